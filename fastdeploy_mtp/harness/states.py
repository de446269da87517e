"""Random valid op states, as numpy arrays keyed by input name.

Used by the differential tests, the benchmark and the GPU check script. Every
request takes a branch drawn from a fixed mix so that any batch of a few dozen
requests reaches every branch of the contract (docs/contract.md); the values are drawn so that every
per-request check passes (the bad-input tests break them on purpose).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

from ..signature import DRAFT_MODEL_PREPROCESS, UPDATE_ATTN_MASK_OFFSETS

State = Dict[str, np.ndarray]

# Branch mix of a normal-mode (not splitwise_prefill) request.
PREPROCESS_BRANCHES = ("block_step", "base_stopped", "dropped", "prefill", "decode", "recover")
_PREPROCESS_WEIGHTS = np.array([0.12, 0.08, 0.05, 0.2, 0.35, 0.2])
MASK_BRANCHES = ("block_step", "idle", "prompt", "vision", "decode")
_MASK_WEIGHTS = np.array([0.1, 0.1, 0.25, 0.1, 0.45])


def _per_request(rng, values: np.ndarray, column: bool) -> np.ndarray:
    return values.reshape(-1, 1) if column and rng.random() < 0.5 else values


def preprocess_state(
    rng: np.random.Generator,
    bsz: int,
    *,
    num_model_step: int,
    splitwise_prefill: bool = False,
    truncate_first_token: bool = False,
    extra_rows: int = 0,
    column_vectors: bool = False,
) -> State:
    """A valid input of draft_model_preprocess for `bsz` requests.

    `extra_rows` adds rows past bsz (the op must leave them alone);
    `column_vectors` makes some per-request vectors [N, 1].
    """
    k = num_model_step
    N = bsz + extra_rows
    D = int(rng.integers(k + 1, k + 4))        # draft_tokens columns
    A = int(rng.integers(k + 1, k + 4))        # accept_tokens columns
    L = int(rng.integers(4, 40))               # input_ids columns
    P = int(rng.integers(max(8, k + 3), 64))   # pre_ids columns: room for every accepted token
    Db = int(rng.integers(1, k + 3))           # base_model_draft_tokens columns
    i64, i32 = np.int64, np.int32

    s: State = {
        "draft_tokens": rng.integers(-1, 1000, (N, D)).astype(i64),
        "input_ids": rng.integers(0, 1000, (N, L)).astype(i64),
        "stop_flags": rng.random(N) < 0.3,
        "seq_lens_this_time": rng.integers(0, 4, bsz).astype(i32),
        "seq_lens_encoder": np.zeros(N, i32),
        "seq_lens_decoder": rng.integers(0, 200, N).astype(i32),
        "step_idx": rng.integers(0, 100, N).astype(i64),
        "not_need_stop": np.array([rng.random() < 0.5]),
        "is_block_step": rng.random(N) < 0.2,
        "batch_drop": np.zeros(N, bool),
        "pre_ids": rng.integers(-1, 1000, (N, P)).astype(i64),
        "mask_rollback": rng.integers(-3, 4, N).astype(i32),
        "accept_tokens": rng.integers(0, 1000, (N, A)).astype(i64),
        "accept_num": np.zeros(N, i32),
        "base_model_seq_lens_this_time": rng.integers(0, 5, N).astype(i32),
        "base_model_seq_lens_encoder": rng.integers(0, 5, N).astype(i32),
        "base_model_seq_lens_decoder": rng.integers(0, 200, N).astype(i32),
        "base_model_step_idx": rng.integers(0, P + 1, N).astype(i64),
        "base_model_stop_flags": np.zeros(N, bool),
        "base_model_is_block_step": rng.random(N) < 0.1,
        "base_model_draft_tokens": rng.integers(-1, 1000, (N, Db)).astype(i64),
    }
    max_E = L if truncate_first_token else L - 1  # the first token must land inside input_ids
    for i in range(bsz):
        if splitwise_prefill:
            running = rng.random() < 0.7
            s["seq_lens_encoder"][i] = rng.integers(1, max_E + 1) if running else rng.integers(-1, 1)
            if running and rng.random() < 0.2:
                s["seq_lens_encoder"][i] = max_E  # the first token in input_ids' last column
            continue
        branch = PREPROCESS_BRANCHES[rng.choice(len(PREPROCESS_BRANCHES), p=_PREPROCESS_WEIGHTS)]
        if branch == "block_step":
            s["base_model_stop_flags"][i] = True
            s["base_model_is_block_step"][i] = True
        elif branch == "base_stopped":
            s["base_model_stop_flags"][i] = True
            s["base_model_is_block_step"][i] = False
        elif branch == "dropped":
            s["batch_drop"][i] = True
        elif branch == "prefill":
            s["seq_lens_encoder"][i] = max_E if rng.random() < 0.2 else rng.integers(1, max_E + 1)
        else:  # decode or recover
            a = int(rng.integers(0, min(A, D) + 1))
            if rng.random() < 0.1:
                a = min(A, D)  # every column of the accepted tokens
            s["accept_num"][i] = a
            # Edges now and then: the window [step - a, step) flush with either
            # end of pre_ids; with a == 0 (nothing is written) any step at all.
            edge = rng.random()
            if a == 0 and edge < 0.2:
                s["base_model_step_idx"][i] = rng.choice([-(2**62), -1, P + 1, 2**62])
            elif edge < 0.3:
                s["base_model_step_idx"][i] = rng.choice([a, P])
            else:
                s["base_model_step_idx"][i] = rng.integers(a, P + 1)
            if branch == "recover":
                s["stop_flags"][i] = True
                s["base_model_seq_lens_decoder"][i] = a if edge < 0.3 else rng.integers(a, a + 200)
                if s["base_model_step_idx"][i] < a:  # the new step_idx must not be negative
                    s["base_model_step_idx"][i] = a
            else:
                s["stop_flags"][i] = False
                # Rolled back by k - 1: seq_lens_decoder and step_idx must stay >= 0.
                s["seq_lens_decoder"][i] = k - 1 if edge < 0.3 else rng.integers(k - 1, k + 200)
                s["step_idx"][i] = k - 1 if edge > 0.8 else rng.integers(k - 1, k + 100)
    if column_vectors:
        for t in DRAFT_MODEL_PREPROCESS.inputs:
            if s[t.name].ndim == 1 and t.name != "not_need_stop":
                s[t.name] = _per_request(rng, s[t.name], True)
    return s


def recompute_state(rng: np.random.Generator, bsz: int, *, num_model_step: int,
                    **kwargs) -> State:
    """A valid input of the recompute form's draft_model_preprocess
    (preprocess_state's, with recompute_token_num after mask_rollback): a
    request recomputes 0..k-1 tokens as FastDeploy's runner sets them, now
    and then more or fewer, and the base model fed 0..k+2 tokens, so every
    side of min(recompute_token_num, base_model_seq_lens_this_time - 2)
    happens."""
    k = num_model_step
    base = preprocess_state(rng, bsz, num_model_step=k, **kwargs)
    N = base["mask_rollback"].shape[0]
    recompute = rng.integers(0, k, N).astype(np.int32)
    odd = rng.random(N)
    recompute[odd < 0.1] = rng.integers(k, k + 4, int((odd < 0.1).sum()))
    recompute[odd > 0.95] = -1
    base["base_model_seq_lens_this_time"] = rng.integers(0, k + 3, N).astype(np.int32)
    out: State = {}
    for name, value in base.items():
        out[name] = value
        if name == "mask_rollback":
            out["recompute_token_num"] = recompute.reshape(value.shape[0], *value.shape[1:])
    return out


def repeatable_preprocess_state(rng: np.random.Generator, bsz: int, *,
                                num_model_step: int) -> State:
    """A valid preprocess input that stays valid through many calls in a row
    (benchmarks, captured-graph replays): every call rolls the draft back
    num_model_step - 1 positions, so lengths and steps start far from zero, and
    no draft is stopped (a re-sync would set step_idx near 0, and the next
    rollbacks would take it below 0, which is refused)."""
    s = preprocess_state(rng, bsz, num_model_step=num_model_step)
    s["seq_lens_decoder"] += 1_000_000
    s["base_model_seq_lens_decoder"] += 1_000_000
    s["step_idx"] += 1_000_000
    s["stop_flags"][:] = False
    return s


def mask_state(
    rng: np.random.Generator,
    bsz: int,
    *,
    extra_rows: int = 0,
    padding_tokens: int = 0,
    column_vectors: bool = False,
    mask_cols: Optional[int] = None,
    branches: Optional[Sequence[str]] = None,
    prompt_tokens: Optional[int] = None,
    short_cu: bool = False,
) -> State:
    """A valid input of update_attn_mask_offsets for `bsz` requests (`mask_cols`:
    the columns of attn_mask_offsets_full, which bound a prompt's tokens;
    random in [4, 48) unless given). Each request's branch (MASK_BRANCHES) is
    drawn unless `branches` names them, and a prompt's tokens in [0, mask_cols]
    unless `prompt_tokens` says; what is not given is drawn as always, in the
    same order. `short_cu`: cu_seqlens_q of bsz entries instead of bsz + 1."""
    N = bsz + extra_rows
    M = int(rng.integers(4, 48))   # attn_mask_offsets_full columns (max_model_len)
    if mask_cols is not None:
        M = mask_cols
    if branches is not None and (len(branches) != bsz or not set(branches) <= set(MASK_BRANCHES)):
        raise ValueError(f"mask_state: branches must be {bsz} of {MASK_BRANCHES}")
    if prompt_tokens is not None and not 0 <= prompt_tokens <= M:
        raise ValueError(f"mask_state: prompt_tokens {prompt_tokens} outside [0, {M}]")
    Ds = int(rng.integers(1, 8))   # decode_states columns
    i32 = np.int32
    enc = np.zeros(N, i32)
    dec = rng.integers(0, 300, N).astype(i32)
    block = np.zeros(N, bool)
    n = np.zeros(bsz, i32)
    # Every value class: -1, 0, 1 (which the shadow form's decode turns to -1),
    # 2 (vision generation), 3.
    states = rng.integers(-1, 4, (N, Ds)).astype(i32)
    decode_rows = []
    for i in range(bsz):
        if branches is None:
            branch = MASK_BRANCHES[rng.choice(len(MASK_BRANCHES), p=_MASK_WEIGHTS)]
        else:
            branch = branches[i]
        if branch == "block_step":
            block[i] = True
            n[i] = rng.integers(0, 3)
        elif branch == "idle":
            dec[i] = 0
            n[i] = rng.integers(0, 2)
        elif branch in ("prompt", "vision"):
            enc[i] = rng.integers(1, 100)
            n[i] = rng.integers(0, M + 1) if prompt_tokens is None else prompt_tokens
            if branch == "vision":
                states[i, 0] = 2
                dec[i] = rng.integers(1, 300)
            elif rng.random() < 0.5:
                dec[i] = 0
            elif states[i, 0] == 2:
                states[i, 0] = 0
        else:  # decode
            dec[i] = rng.integers(1, 300)
            # Up to one past decode_states' columns (only the row's own are written).
            n[i] = rng.integers(0, Ds + 2) if rng.random() < 0.7 else 1
            decode_rows.append(i)
    cu = np.zeros(bsz + 1, i32)
    cu[1:] = np.cumsum(n)
    T = int(cu[-1]) + padding_tokens
    s: State = {
        "ids_remove_padding": rng.integers(0, 1000, T).astype(np.int64),
        "seq_lens_this_time": n,
        "seq_lens_encoder": enc,
        "seq_lens_decoder": dec,
        "cu_seqlens_q": cu,
        "attn_mask_offsets_full": np.sort(rng.integers(0, 500, (N, M)), axis=1).astype(i32),
        "attn_mask_offsets_decoder": rng.integers(0, 400, N).astype(i32),
        "is_block_step": block,
        "decode_states": states,
        "mask_rollback": rng.integers(-3, 4, N).astype(i32),
    }
    # A decode request's cursor minus its pending rollback must not be negative;
    # sometimes it is exactly 0.
    for i in decode_rows:
        r = int(s["mask_rollback"][i])
        low = max(r, 0)
        s["attn_mask_offsets_decoder"][i] = low if rng.random() < 0.2 else rng.integers(low, 400)
    if short_cu:  # bsz entries, as FastDeploy's tests pass it: the last ends at T
        s["cu_seqlens_q"] = cu[:bsz].copy()
    if column_vectors:
        for t in UPDATE_ATTN_MASK_OFFSETS.inputs:
            if s[t.name].ndim == 1 and t.name not in ("ids_remove_padding", "cu_seqlens_q"):
                s[t.name] = _per_request(rng, s[t.name], True)
    return s


def widen_mask_full(s: State, cols: int, fill: Optional[int] = None) -> State:
    """`s` (a mask state) with attn_mask_offsets_full widened to `cols` columns,
    the prompts as drawn: a real engine's table has max_model_len columns, so
    its batches of decodes run the kernels that may share out long prompts.
    The new columns hold `fill`, or their column numbers where it is None."""
    full = s["attn_mask_offsets_full"]
    if cols < full.shape[1]:
        raise ValueError(f"widen_mask_full: {cols} columns, fewer than the {full.shape[1]} it has")
    if fill is None:
        wide = np.tile(np.arange(cols, dtype=np.int32), (full.shape[0], 1))
    else:
        wide = np.full((full.shape[0], cols), fill, np.int32)
    wide[:, :full.shape[1]] = full
    out = dict(s)
    out["attn_mask_offsets_full"] = wide
    return out


def prefill_chunks_state(rng: np.random.Generator, bsz: int, *, prefills: int, chunk: int,
                         cols: int) -> State:
    """A batch of decodes in which `prefills` requests (at random slots) each
    prefill a chunk of `chunk` prompt tokens, attn_mask_offsets_full `cols`
    columns wide (max_model_len; the columns past the chunk hold -1, which no
    request reads): the step a serving engine with chunked prefill runs while
    requests arrive."""
    if not 0 <= prefills <= bsz or chunk < 1 or cols < chunk:
        raise ValueError(f"prefill_chunks_state: prefills {prefills} of {bsz}, chunk {chunk}, "
                         f"cols {cols}")
    branches = ["decode"] * bsz
    for i in rng.choice(bsz, prefills, replace=False):
        branches[int(i)] = "prompt"
    s = mask_state(rng, bsz, mask_cols=chunk, branches=branches, prompt_tokens=chunk)
    return widen_mask_full(s, cols, fill=-1)


def copy_state(s: State) -> State:
    return {k: v.copy() for k, v in s.items()}


def repeatable_recompute_state(rng: np.random.Generator, bsz: int, *,
                               num_model_step: int) -> State:
    """repeatable_preprocess_state for the recompute form: every decode
    recomputes k - 1 tokens (recompute_token_num k - 1, the base model fed
    k + 1), as a steady decode of FastDeploy's runner does."""
    k = num_model_step
    base = repeatable_preprocess_state(rng, bsz, num_model_step=k)
    N = base["mask_rollback"].shape[0]
    base["base_model_seq_lens_this_time"] = np.full(N, k + 1, np.int32)
    out: State = {}
    for name, value in base.items():
        out[name] = value
        if name == "mask_rollback":
            out["recompute_token_num"] = np.full(N, k - 1, np.int32)
    return out



def shadow_state(rng: np.random.Generator, bsz: int, *, num_model_step: int,
                 is_splitwise_prefill: bool = False, **kwargs) -> State:
    """A valid input of the shadow form's draft_model_preprocess: the branch
    mix of preprocess_state (its first token at E - 1, as the form places
    it), the base model named the target model, and each request's
    max_dec_len drawn so that some requests reach it (target step + k >=
    max_dec_len, skipped off a prefill node), some sit exactly one short or
    at it, and now and then an extreme value of either int64 end."""
    from ..signature import FORMS

    k = num_model_step
    s = preprocess_state(rng, bsz, num_model_step=k, splitwise_prefill=is_splitwise_prefill,
                         truncate_first_token=True, **kwargs)
    # Every request but a skipped one runs, so none has a negative
    # seq_lens_encoder (refused for a decode).
    np.maximum(s["seq_lens_encoder"], 0, out=s["seq_lens_encoder"])
    step = s["base_model_step_idx"].reshape(-1)
    N = step.shape[0]
    limit = step + k + rng.integers(1, 50, N)       # room: the request runs
    kind = rng.random(N)
    limit[kind < 0.1] = step[kind < 0.1] + k        # at the limit: skipped
    at_edge = (kind >= 0.1) & (kind < 0.2)
    limit[at_edge] = step[at_edge] + k + 1          # one short of it: runs
    far = kind > 0.97
    limit[far] = rng.choice([-(2**63), 2**63 - 1], int(far.sum()))
    s["max_dec_len"] = limit.astype(np.int64)
    renamed = {("target_model_" + n[len("base_model_"):] if n.startswith("base_model_") else n): v
               for n, v in s.items()}
    return {t.name: renamed[t.name] for t in FORMS["shadow"]["draft_model_preprocess"].inputs}


def repeatable_shadow_state(rng: np.random.Generator, bsz: int, *,
                            num_model_step: int) -> State:
    """A shadow-form input that stays valid through any number of calls in a
    row (benchmarks, captured-graph replays): the draft's state is derived
    from the target model's every call, so the first call's result is every
    later call's too; no request is near its max_dec_len."""
    s = shadow_state(rng, bsz, num_model_step=num_model_step)
    s["max_dec_len"] = np.full_like(s["max_dec_len"], 2**62)
    return s


def shadow_mask_state(rng: np.random.Generator, bsz: int, **kwargs) -> State:
    """mask_state without the cursor and the rollback the shadow form's
    update_attn_mask_offsets has not."""
    from ..signature import FORMS

    s = mask_state(rng, bsz, **kwargs)
    return {t.name: s[t.name] for t in FORMS["shadow"]["update_attn_mask_offsets"].inputs}
