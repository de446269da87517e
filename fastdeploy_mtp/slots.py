"""What an insert writes into one slot, for each role (docs/contract.md,
"Inserting requests"), and the checks a request passes first.

Plain functions over numpy copies of the draft buffers (``buffers.read``), so
the proposer can insert a whole batch with one write per buffer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence

import numpy as np

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class ProposerError(ValueError):
    """A bad configuration or a request that does not fit; nothing was changed."""


@dataclass
class Request:
    """A request to insert into `slot`.

    ``prompt``: the n prompt token ids (ints >= 0). ``mask_offsets``: for each
    prompt position j, the last key it attends (``j <= mask_offsets[j] <= n-1``;
    text, the default: ``j``; an image span [a, b) that attends itself
    bidirectionally: ``b - 1`` for every j in it). On a decode node also
    ``first_token`` and ``draft_token``, handed over by the prefill node.
    """

    slot: int
    prompt: Sequence[int]
    mask_offsets: Optional[Sequence[int]] = None
    first_token: Optional[int] = None
    draft_token: Optional[int] = None


@dataclass(frozen=True)
class CheckedRequest:
    slot: int
    prompt: np.ndarray        # int64 [n]
    mask_offsets: np.ndarray  # int32 [n]
    first_token: Optional[int]
    draft_token: Optional[int]


def is_int(v) -> bool:
    """An integer that is not a bool (True is an int to Python, never a slot here)."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _int_array(values, what: str, where: str, low: int, high: int) -> np.ndarray:
    try:
        arr = np.asarray(values)
    except Exception as e:  # ragged or otherwise not an array
        raise ProposerError(f"{where}: {what} is not a sequence of integers ({e})") from None
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ProposerError(f"{where}: {what} must be a flat sequence of integers, got "
                            f"{arr.dtype} of shape {list(arr.shape)}")
    if arr.size and (int(arr.min()) < low or int(arr.max()) > high):
        raise ProposerError(f"{where}: {what} must lie in [{low}, {high}], got values from "
                            f"{int(arr.min())} to {int(arr.max())}")
    return arr


def check_request(r: Request, max_num_seqs: int, max_prompt: int, decode_node: bool,
                  ) -> CheckedRequest:
    """The request as arrays, or ProposerError saying what does not fit."""
    if not is_int(r.slot) or not 0 <= r.slot < max_num_seqs:
        raise ProposerError(f"MTPProposer.insert: slot {r.slot!r}: not an int, or outside "
                            f"[0, {max_num_seqs})")
    where = f"MTPProposer.insert: slot {r.slot}"
    prompt = _int_array(r.prompt, "prompt", where, 0, INT64_MAX).astype(np.int64)
    n = prompt.shape[0]
    if not 1 <= n <= max_prompt:
        raise ProposerError(f"{where}: prompt of {n} tokens, must be 1..{max_prompt}")
    if r.mask_offsets is None:
        offsets = np.arange(n, dtype=np.int32)
    else:
        offsets = _int_array(r.mask_offsets, "mask_offsets", where, 0, INT32_MAX)
        if offsets.shape[0] != n:
            raise ProposerError(f"{where}: {offsets.shape[0]} mask offsets for a prompt of "
                                f"{n} tokens")
        j = np.arange(n)
        bad = np.nonzero((offsets < j) | (offsets > n - 1))[0]
        if bad.size:
            raise ProposerError(f"{where}: mask_offsets[{bad[0]}] = {offsets[bad[0]]}: each "
                                f"position j must attend itself and nothing past the prompt "
                                f"(j <= offset <= {n - 1})")
        offsets = offsets.astype(np.int32)
    handed = (r.first_token, r.draft_token)
    if decode_node:
        if any(not is_int(t) or not 0 <= t <= INT64_MAX for t in handed):
            raise ProposerError(f"{where}: a decode node needs the first_token and draft_token "
                                f"(ints >= 0) handed over by the prefill node, got {handed}")
    elif any(t is not None for t in handed):
        raise ProposerError(f"{where}: first_token/draft_token are for a decode node only")
    return CheckedRequest(int(r.slot), prompt, offsets,
                          None if r.first_token is None else int(r.first_token),
                          None if r.draft_token is None else int(r.draft_token))


def _clear_slot(a: Dict[str, np.ndarray], i: int, offsets: np.ndarray) -> None:
    n = offsets.shape[0]
    a["draft_tokens"][i] = -1
    a["pre_ids"][i] = -1
    a["input_ids"][i] = 0
    a["attn_mask_offsets_full"][i] = 0
    a["attn_mask_offsets_full"][i, :n] = offsets
    a["decode_states"][i] = 0
    a["stop_flags"][i] = False
    a["is_block_step"][i] = False
    a["batch_drop"][i] = False


def write_new_request(a: Dict[str, np.ndarray], r: CheckedRequest) -> None:
    """Mixed or prefill node: the draft prefills the prompt shifted by one
    (the preprocess op then places the first token after it)."""
    i, n = r.slot, r.prompt.shape[0]
    _clear_slot(a, i, r.mask_offsets)
    a["input_ids"][i, : n - 1] = r.prompt[1:]
    a["seq_lens_encoder"][i] = n
    a["seq_lens_decoder"][i] = 0
    a["step_idx"][i] = 0
    a["seq_lens_this_time"][i] = n
    a["attn_mask_offsets_decoder"][i] = int(r.mask_offsets[n - 1]) + 1
    a["mask_rollback"][i] = 0


def decode_mask_rollback(num_model_steps: int) -> int:
    """The preset of a handed-over request: the first preprocess adds k-1 it
    did not advance, and one position really must be rolled back (the draft
    runs one position behind the base model's offsets)."""
    return 1 - (num_model_steps - 1)


def write_handed_over(a: Dict[str, np.ndarray], r: CheckedRequest, k: int,
                      mask_rollback: int) -> None:
    """Decode node: the state a mixed node holds after its k-substep prefill
    step (the prompt's draft KV arrived with the request)."""
    i, n = r.slot, r.prompt.shape[0]
    _clear_slot(a, i, r.mask_offsets)
    a["seq_lens_encoder"][i] = 0
    a["seq_lens_decoder"][i] = n + (k - 1)
    a["step_idx"][i] = 1 + (k - 1)
    a["seq_lens_this_time"][i] = 1
    a["draft_tokens"][i, 0] = r.draft_token
    a["pre_ids"][i, 0] = r.first_token
    # The base model's offsets of prompt + first token, plus one.
    a["attn_mask_offsets_decoder"][i] = int(r.mask_offsets[n - 1]) + 2
    a["mask_rollback"][i] = mask_rollback


# What release leaves in a slot; every other field keeps its value until the
# next insert overwrites it.
RELEASED = {"stop_flags": True, "seq_lens_this_time": 0, "seq_lens_encoder": 0,
            "seq_lens_decoder": 0, "mask_rollback": 0, "is_block_step": False}
