"""The simulator's FastDeploy-style runner (``simulate --runner fastdeploy``).

Our ops driven the way FastDeploy's own MTP proposer (the December 2025 form,
21 tensors) drives them, in our words from reading it:

- a mixed or prefill node inserts a new prompt and never writes
  ``mask_rollback``, ``decode_states``, ``is_block_step`` or ``draft_tokens``;
- a decode node inserts a handed-over request with ``step_idx = 1``,
  ``seq_lens_decoder`` = the prompt length, ``seq_lens_this_time = k + 1``,
  ``mask_rollback = 1 - (k-1)``, the prefill node's draft token and the mask
  cursor ``attn_mask_offsets_decoder = n + 1``: FastDeploy's scheduler hands
  the first token over as a one-token prefill of position n, and the cursor
  is the offset of that prefill's last token (n: a generated token attends
  causally) + 1;
- the prefill node passes ``num_model_step = k`` too (the op ignores it there);
- a finished slot is never released: it keeps what the ops left in it until
  the next insert.

``--form recompute`` drives FastDeploy's recompute form (22 tensors) with that
version's presets: ``recompute_token_num`` starts at ``k - 1`` in every slot
and only a decode-node insert writes it (0), with ``mask_rollback = 1``.

``--form shadow`` drives develop's shadow form (17 tensors, and the 8-tensor
``update_attn_mask_offsets``): the inserts as above but for the buffers that
form has not (no ``mask_rollback`` preset), each slot's ``max_dec_len`` the
run's, and the prefill node passing ``is_splitwise_prefill``.

It also counts every index FastDeploy's own kernels would write outside a row
or a tensor on the states of the loop (a numpy model of their writes): the
preprocess's ``pre_ids`` window and first-token column, and the draft update's
``pre_ids[i, step_idx]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from .. import forms, ops
from ..signature import FORMS
from ..buffers import SLOT_FIELDS, read, write
from ..slots import Request


@dataclass
class OutsideWrites:
    """Indices FastDeploy's kernels would write outside a row or tensor."""

    preprocess: int = 0   # pre_ids window or input_ids column of draft_model_preprocess
    draft_update: int = 0  # pre_ids[i, step_idx] of draft_model_update
    first: str = ""

    @property
    def total(self) -> int:
        return self.preprocess + self.draft_update

    def note(self, msg: str) -> None:
        if not self.first:
            self.first = msg


def insert(proposer, requests: Iterable[Request], recompute=None, form: str = "rollback") -> None:
    """FastDeploy's per-role insert of `form`'s version, written into the
    proposer's buffers (and, in the recompute form, into `recompute`: its
    recompute_token_num). The shadow form's has no mask_rollback to preset."""
    cfg = proposer.config
    k = cfg.num_model_steps
    a = {n: read(proposer.state[n]) for n in SLOT_FIELDS}
    for r in requests:
        i, prompt = int(r.slot), np.asarray(r.prompt, np.int64)
        n = prompt.shape[0]
        offsets = np.asarray(r.mask_offsets if r.mask_offsets is not None else np.arange(n),
                             np.int32)
        a["input_ids"][i, : n - 1] = prompt[1:]
        a["pre_ids"][i] = -1
        a["stop_flags"][i] = False
        a["batch_drop"][i] = False
        a["attn_mask_offsets_full"][i, :n] = offsets
        if cfg.role == "decode":
            # The scheduler hands the first token over as a one-token prefill
            # [n, n + 1): the cursor is that token's offset (its position,
            # as it attends causally) + 1.
            a["attn_mask_offsets_decoder"][i] = n + 1
        else:
            a["attn_mask_offsets_decoder"][i] = int(offsets[n - 1]) + 1
        if cfg.role == "decode":
            a["seq_lens_encoder"][i] = 0
            a["seq_lens_decoder"][i] = n
            a["seq_lens_this_time"][i] = cfg.draft_width + 1
            a["step_idx"][i] = 1
            a["draft_tokens"][i, 0] = int(r.draft_token)
            if form != "shadow":
                a["mask_rollback"][i] = 1 - (k - 1) if recompute is None else 1
            if recompute is not None:
                counts = read(recompute)
                counts[i] = 0
                write(recompute, counts)
        else:
            a["seq_lens_encoder"][i] = n
            a["seq_lens_decoder"][i] = 0
            a["seq_lens_this_time"][i] = n
            a["step_idx"][i] = 0
    for name in SLOT_FIELDS:
        write(proposer.state[name], a[name])


def count_preprocess_writes(proposer, tally: OutsideWrites, where: str,
                            max_dec_len=None) -> None:
    """What FastDeploy's draft_model_preprocess would write outside a row on
    the state it is about to get (before our op runs). With `max_dec_len`
    (numpy, a slot's limit each) the shadow form's: its first token at E - 1,
    and every request but a skipped one runs, on a prefill node too."""
    s = {n: read(proposer.state[n]).reshape(proposer.state[n].shape[0], -1)
         for n in ("seq_lens_encoder", "batch_drop", "input_ids", "pre_ids")}
    base = {n: read(proposer.base[n]).reshape(proposer.base[n].shape[0], -1)
            for n in ("stop_flags", "is_block_step", "accept_num", "step_idx")}
    prefill_node = proposer.config.role == "prefill"
    L, P = s["input_ids"].shape[1], s["pre_ids"].shape[1]
    shadow = max_dec_len is not None
    truncate = proposer.config.truncate_first_token or shadow
    k = proposer.config.num_model_steps
    for i in range(s["seq_lens_encoder"].shape[0]):
        E = int(s["seq_lens_encoder"][i, 0])
        if shadow:
            runs = not (base["stop_flags"][i, 0] or (
                not prefill_node and int(base["step_idx"][i, 0]) + k >= int(max_dec_len[i])))
        else:
            # A block step's drop needs the base stopped too, which already stops it.
            runs = prefill_node or not (base["stop_flags"][i, 0] or s["batch_drop"][i, 0])
        if not runs:
            continue
        if E > 0:
            col = E - 1 if truncate else E
            if not 0 <= col < L:
                tally.preprocess += 1
                tally.note(f"{where}: slot {i}: input_ids column {col} of {L}")
        elif shadow or not prefill_node:
            acc, step = int(base["accept_num"][i, 0]), int(base["step_idx"][i, 0])
            cols = step - acc + np.arange(acc)
            bad = int(((cols < 0) | (cols >= P)).sum())
            if bad:
                tally.preprocess += bad
                tally.note(f"{where}: slot {i}: pre_ids columns {cols.tolist()} of {P}")


def recompute_counts(proposer):
    """The recompute form's recompute_token_num as FastDeploy allocates it:
    k - 1 in every slot."""
    import paddle

    n, k = proposer.config.max_num_seqs, proposer.config.num_model_steps
    return paddle.to_tensor(np.full(n, k - 1, np.int32), place=proposer.place)


def max_dec_lens(proposer, max_dec_len: int):
    """The shadow form's max_dec_len as FastDeploy's runner holds it: each
    slot's request's limit (here the run's, for every slot)."""
    import paddle

    return paddle.to_tensor(np.full(proposer.config.max_num_seqs, max_dec_len, np.int64),
                            place=proposer.place)


def prepare_inputs(proposer, tally: OutsideWrites, where: str, recompute=None,
                   max_dec_len=None) -> bool:
    """draft_model_preprocess as FastDeploy's proposer calls it (the prefill
    node passes k too), after counting what FastDeploy's kernel would write
    outside a row on this state; returns not_need_stop. With `recompute`
    (recompute_counts) the recompute form's op, with `max_dec_len`
    (max_dec_lens) the shadow form's."""
    count_preprocess_writes(proposer, tally, where,
                            None if max_dec_len is None else max_dec_len.numpy())
    args = proposer.preprocess_arguments()
    args["num_model_step"] = proposer.config.num_model_steps
    if max_dec_len is not None:
        sig = FORMS["shadow"]["draft_model_preprocess"]
        tensors = {n: v for n, v in args.items() if n in sig.input_names}
        forms.load("shadow").draft_model_preprocess(
            **tensors, max_dec_len=max_dec_len, num_model_step=args["num_model_step"],
            is_splitwise_prefill=proposer.config.role == "prefill")
    elif recompute is None:
        ops.draft_model_preprocess(**args)
    else:
        forms.load("recompute").draft_model_preprocess(**args, recompute_token_num=recompute)
    return bool(proposer.state["not_need_stop"].numpy()[0])


def shadow_mask_offsets(proposer, ids_remove_padding, cu_seqlens_q):
    """The shadow form's update_attn_mask_offsets as FastDeploy's proposer
    calls it: 8 tensors, no cursor and no rollback."""
    s = proposer.state
    return forms.load("shadow").update_attn_mask_offsets(
        ids_remove_padding, s["seq_lens_this_time"], s["seq_lens_encoder"],
        s["seq_lens_decoder"], cu_seqlens_q, s["attn_mask_offsets_full"], s["is_block_step"],
        s["decode_states"])
