"""Plain numpy implementations of both ops, written from the contract
(``docs/contract.md``), one request at a time, in Python integers (which
cannot wrap) for every check.

They are the oracle of the differential tests and a debugging aid: feed them
a state dumped from an engine and read what the op should have done. Each
takes the state as a dict of numpy arrays keyed by its form's table
(``fastdeploy_mtp.signature.FORMS``), then the op's attributes, and changes
the arrays in place, exactly as the op changes tensors. A state that lacks a
tensor of the table, or holds one the table does not name, is a
:class:`TypeError` naming it. Bad input raises
:class:`fastdeploy_mtp.ops.BadInputError` naming the request and the field,
after checking the whole batch, so nothing has changed when it does.
"""

from __future__ import annotations

from typing import Dict

import numpy as np

from .ops import BadInputError
from .signature import FORMS

State = Dict[str, np.ndarray]

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def _bad(op: str, i: int, field: str, detail: str) -> BadInputError:
    return BadInputError(f"{op}: request {i}: {field}: {detail}")


def _state(form: str, op: str, state: State) -> State:
    """`state`, once it holds exactly the tensors of `form`'s table of `op`."""
    names = FORMS[form][op].input_names
    missing = [n for n in names if n not in state]
    unknown = [n for n in state if n not in names]
    # Everything wrong at once, in one line: a state dumped from an engine of
    # another version lacks some tensors and has others.
    said = ([f"lacks {', '.join(missing)}"] if missing else []) + \
        ([f"has {', '.join(unknown)}, which its table does not name"] if unknown else [])
    if said:
        raise TypeError(f"{op} ({form} form): the state {'; it '.join(said)}")
    return state


def _vec(a: np.ndarray) -> np.ndarray:
    """A per-request vector as a 1-D view ([N] or [N, 1])."""
    return a.reshape(a.shape[0])


def _check_first_token(op, i, col, L, A, P, writes_pre_ids0):
    """A prefill reads accept_tokens[i, 0] and writes input_ids[i, col] (and,
    where it does, pre_ids[i, 0]); seq_lens_this_time becomes col + 1."""
    if A < 1:
        raise _bad(op, i, "accept_tokens", f"has {A} columns, no column 0")
    if col >= L or col >= INT32_MAX:
        raise _bad(op, i, "input_ids", f"first token column {col} >= {L} columns")
    if writes_pre_ids0 and P < 1:
        raise _bad(op, i, "pre_ids", f"has {P} columns, no column 0")


def _check_refeed(op, i, E, a, end, A, D, P) -> int:
    """A decode re-feeds its a accepted tokens into draft_tokens and the
    pre_ids columns [end - a, end); returns end - a."""
    if E < 0:
        raise _bad(op, i, "seq_lens_encoder", f"{E} is negative")
    if not 0 <= a <= min(A, D):
        raise _bad(op, i, "accept_num", f"{a} outside [0, min({A}, {D})]")
    first = end - a
    if a > 0 and not (0 <= first and first + a <= P):
        raise _bad(op, i, "pre_ids", f"[{first}, {first + a}) outside [0, {P})")
    return first


def _check_new_length(op, i, new_S):
    # Only representable: a negative new length is written as it is.
    if not INT32_MIN <= new_S <= INT32_MAX:
        raise _bad(op, i, "seq_lens_decoder", f"new value {new_S} leaves int32")


def draft_model_preprocess(state: State, num_model_step: int, truncate_first_token: bool,
                           splitwise_prefill: bool, kvcache_scheduler_v1: bool) -> None:
    """The rollback form (21 tensors, the default)."""
    _preprocess(_state("rollback", "draft_model_preprocess", state), num_model_step,
                truncate_first_token, splitwise_prefill, kvcache_scheduler_v1, recompute_form=False)


def draft_model_preprocess_recompute(state: State, num_model_step: int,
                                     truncate_first_token: bool, splitwise_prefill: bool,
                                     kvcache_scheduler_v1: bool) -> None:
    """FastDeploy's recompute form (22 tensors; docs/contract.md, "FastDeploy's
    recompute form"): a running decode recomputes r = min(recompute_token_num,
    max(base_model_seq_lens_this_time - 2, 0)) tokens. Its normal branch rolls
    seq_lens_decoder and step_idx back by r, its re-sync branch takes them from
    the base model less accept_num, both add r to mask_rollback and set
    recompute_token_num to num_model_step - 1. Nothing else touches
    mask_rollback; a prefill keeps is_block_step."""
    _preprocess(_state("recompute", "draft_model_preprocess", state), num_model_step,
                truncate_first_token, splitwise_prefill, kvcache_scheduler_v1, recompute_form=True)


def draft_model_preprocess_corrected(state: State, num_model_step: int,
                                     truncate_first_token: bool, splitwise_prefill: bool,
                                     kvcache_scheduler_v1: bool, form: str = "corrected_pr5738"
                                     ) -> None:
    """The corrected forms (docs/contract.md, "The corrected forms"): the
    rollback form's rules, but every running decode takes seq_lens_decoder
    and step_idx from the base model less accept_num, stopped or not. `form`:
    corrected_pr5738 or corrected_pr6403 (22 tensors; recompute_token_num and
    base_model_seq_lens_this_time never read or written), or
    corrected_pr5245 (20 tensors, no mask_rollback)."""
    _preprocess(_state(form, "draft_model_preprocess", state), num_model_step,
                truncate_first_token, splitwise_prefill, kvcache_scheduler_v1,
                recompute_form=False, resync_every_decode=True)


def _preprocess(s: State, num_model_step, truncate_first_token, splitwise_prefill,
                kvcache_scheduler_v1, recompute_form: bool, resync_every_decode=False) -> None:
    """The rollback, recompute and corrected forms. (The shadow form's rules
    share little with these: draft_model_preprocess_shadow.) A state without
    mask_rollback (the corrected_pr5245 form) keeps no rollback."""
    op = "draft_model_preprocess"
    if num_model_step < 1:
        raise BadInputError(f"{op}: num_model_step must be >= 1, got {num_model_step}")
    k = int(num_model_step)
    stop, this_time, enc, dec, step = map(
        _vec, (s["stop_flags"], s["seq_lens_this_time"], s["seq_lens_encoder"],
               s["seq_lens_decoder"], s["step_idx"]))
    block, drop, acc_num = map(_vec, (s["is_block_step"], s["batch_drop"], s["accept_num"]))
    has_rollback = "mask_rollback" in s
    rollback = _vec(s["mask_rollback"]) if has_rollback else np.zeros(block.shape[0], np.int64)
    base_n, base_dec, base_step, base_stop, base_block = map(
        _vec, (s["base_model_seq_lens_this_time"], s["base_model_seq_lens_decoder"],
               s["base_model_step_idx"], s["base_model_stop_flags"], s["base_model_is_block_step"]))
    recompute = _vec(s["recompute_token_num"]) if recompute_form else None
    draft_tokens, input_ids, pre_ids, accept_tokens, base_model_draft_tokens, not_need_stop = (
        s[n] for n in ("draft_tokens", "input_ids", "pre_ids", "accept_tokens",
                       "base_model_draft_tokens", "not_need_stop"))
    bsz = this_time.shape[0]
    L, D, P, A = input_ids.shape[1], draft_tokens.shape[1], pre_ids.shape[1], accept_tokens.shape[1]

    # Pass 1: decide each request's branch and check what it will touch.
    plans = []

    def check_rollback(i, new_S):
        r = int(rollback[i]) + int(dec[i]) - new_S
        if not INT32_MIN <= r <= INT32_MAX:
            raise _bad(op, i, "mask_rollback", f"{int(rollback[i])} + ({int(dec[i])} - {new_S}) "
                       "leaves int32")

    for i in range(bsz):
        E, S = int(enc[i]), int(dec[i])
        parked = dropped = False
        if splitwise_prefill:
            running = prefill = E > 0
        else:
            if base_stop[i] and base_block[i]:
                parked, dropped = bool(kvcache_scheduler_v1), not kvcache_scheduler_v1
            running = not (base_stop[i] or drop[i] or dropped)
            prefill = running and E > 0
        plan = dict(running=running, prefill=prefill, parked=parked, dropped=dropped)
        if prefill:
            col = E - 1 if truncate_first_token else E
            _check_first_token(op, i, col, L, A, P, not splitwise_prefill)
            # The rollback form's prefill starts a new mask history: a rollback
            # left in the slot by an earlier request is dropped, so the new one
            # is 0 and needs no check. The recompute form's keeps it.
            plan["col"] = col
        elif running:
            a = int(acc_num[i])
            first = _check_refeed(op, i, E, a, int(base_step[i]), A, D, P)
            # The tokens a normal decode rolls back: k - 1, or the recompute form's r.
            back = (min(int(recompute[i]), max(int(base_n[i]) - 2, 0)) if recompute_form
                    else k - 1)
            if stop[i] or resync_every_decode:
                new_S, new_step = int(base_dec[i]) - a, int(base_step[i]) - a
            else:
                new_S, new_step = S - back, int(step[i]) - back
            # Only representable: a negative new length or step is written as it is.
            _check_new_length(op, i, new_S)
            if not INT64_MIN <= new_step <= INT64_MAX:
                raise _bad(op, i, "step_idx", f"new value {new_step} leaves int64")
            if not recompute_form and has_rollback:
                check_rollback(i, new_S)
            elif recompute_form and not INT32_MIN <= int(rollback[i]) + back <= INT32_MAX:
                raise _bad(op, i, "mask_rollback", f"{int(rollback[i])} + {back} leaves int32")
            plan.update(a=a, first=first, new_S=new_S, new_step=new_step, r=back)
        elif not recompute_form and has_rollback:
            check_rollback(i, 0)
        plans.append(plan)

    # Pass 2: write.
    any_running = False
    for i, plan in enumerate(plans):
        S_old = int(dec[i])
        if not splitwise_prefill:
            base_model_draft_tokens[i, 1:] = -1
            if plan["parked"]:
                stop[i] = True
                block[i] = True
            if plan["dropped"]:
                drop[i] = True
                stop[i] = True
        if plan["prefill"]:
            E = int(enc[i])
            t = accept_tokens[i, 0]
            stop[i] = False
            if not splitwise_prefill:
                pre_ids[i, 0] = t
            input_ids[i, plan["col"]] = t
            this_time[i] = E if truncate_first_token else E + 1
            if not recompute_form:
                rollback[i] = 0  # a new mask history: no earlier rollback, not parked
                block[i] = False
        elif plan["running"]:
            if kvcache_scheduler_v1 and not base_block[i] and block[i]:
                block[i] = False
            stop[i] = False
            dec[i] = plan["new_S"]
            step[i] = plan["new_step"]
            if recompute_form:
                rollback[i] = int(rollback[i]) + plan["r"]
                recompute[i] = k - 1
            a = plan["a"]
            draft_tokens[i, :a] = accept_tokens[i, :a]
            pre_ids[i, plan["first"]:plan["first"] + a] = accept_tokens[i, :a]
            this_time[i] = a
        else:
            stop[i] = True
            this_time[i] = 0
            dec[i] = 0
            enc[i] = 0
        any_running |= plan["running"]
        if not recompute_form and has_rollback:
            # In Python integers: check_rollback has seen the sum fit int32, but
            # the change alone may not (an old seq_lens_decoder near INT32_MIN).
            # (A prefill's change is 0, added to the 0 it set.)
            rollback[i] = int(rollback[i]) + S_old - int(dec[i])
    not_need_stop.reshape(-1)[0] = any_running


def draft_model_preprocess_shadow(state: State, num_model_step: int,
                                  is_splitwise_prefill: bool) -> None:
    """FastDeploy's shadow form (17 tensors; docs/contract.md, "FastDeploy's
    shadow form"). Every request's target_model_draft_tokens[i, 1:] becomes
    -1. A request whose target model stopped, or (off a prefill node) whose
    target_model_step_idx + num_model_step reaches max_dec_len, is skipped:
    stopped, lengths and step_idx 0. Else it runs: a prefill (E > 0) puts the
    first accepted token at input_ids[i, E-1] and pre_ids[i, 0], feeds E
    tokens and takes step_idx = target step - 1; a decode takes
    seq_lens_decoder and step_idx from the target model less accept_num and
    re-feeds the accepted tokens (draft_tokens, and pre_ids before the target
    step)."""
    s = _state("shadow", "draft_model_preprocess", state)
    op = "draft_model_preprocess"
    if num_model_step < 1:
        raise BadInputError(f"{op}: num_model_step must be >= 1, got {num_model_step}")
    k = int(num_model_step)
    stop, this_time, enc, dec, step, acc_num = map(
        _vec, (s["stop_flags"], s["seq_lens_this_time"], s["seq_lens_encoder"],
               s["seq_lens_decoder"], s["step_idx"], s["accept_num"]))
    t_dec, t_step, t_stop, limit = map(
        _vec, (s["target_model_seq_lens_decoder"], s["target_model_step_idx"],
               s["target_model_stop_flags"], s["max_dec_len"]))
    draft_tokens, input_ids, pre_ids, accept_tokens, target_model_draft_tokens, not_need_stop = (
        s[n] for n in ("draft_tokens", "input_ids", "pre_ids", "accept_tokens",
                       "target_model_draft_tokens", "not_need_stop"))
    bsz = this_time.shape[0]
    L, D, P, A = input_ids.shape[1], draft_tokens.shape[1], pre_ids.shape[1], accept_tokens.shape[1]

    plans = []
    for i in range(bsz):
        E, ts = int(enc[i]), int(t_step[i])
        skip = bool(t_stop[i]) or (not is_splitwise_prefill and ts + k >= int(limit[i]))
        plan = dict(skip=skip)
        if skip:
            pass
        elif E > 0:
            _check_first_token(op, i, E - 1, L, A, P, True)
            if ts - 1 < INT64_MIN:
                raise _bad(op, i, "step_idx", f"new value {ts - 1} leaves int64")
        else:
            a = int(acc_num[i])
            first = _check_refeed(op, i, E, a, ts, A, D, P)
            new_S = int(t_dec[i]) - a
            _check_new_length(op, i, new_S)
            plan.update(a=a, first=first, new_S=new_S)
        plans.append(plan)

    any_running = False
    for i, plan in enumerate(plans):
        target_model_draft_tokens[i, 1:] = -1
        if plan["skip"]:
            stop[i] = True
            this_time[i] = dec[i] = enc[i] = 0
            step[i] = 0
            continue
        any_running = True
        stop[i] = False
        E = int(enc[i])
        if E > 0:
            t = accept_tokens[i, 0]
            pre_ids[i, 0] = t
            input_ids[i, E - 1] = t
            this_time[i] = E
            step[i] = int(t_step[i]) - 1
        else:
            a = plan["a"]
            dec[i] = plan["new_S"]
            step[i] = int(t_step[i]) - a
            draft_tokens[i, :a] = accept_tokens[i, :a]
            pre_ids[i, plan["first"]:plan["first"] + a] = accept_tokens[i, :a]
            this_time[i] = a
    not_need_stop.reshape(-1)[0] = any_running


def update_attn_mask_offsets(state: State) -> np.ndarray:
    """The ten-tensor op of the rollback, recompute, pr5245 and pr5738 forms."""
    return _mask(_state("rollback", "update_attn_mask_offsets", state), cursor_kept=True)


def update_attn_mask_offsets_pr6403(state: State) -> np.ndarray:
    """The pr6403 form's ten-tensor op: as update_attn_mask_offsets, with the
    shadow form's decode_states rule (FastDeploy 2178f2829)."""
    return _mask(_state("pr6403", "update_attn_mask_offsets", state), cursor_kept=True,
                 every_decode=True)


def update_attn_mask_offsets_corrected(state: State, form: str = "corrected_pr5738"
                                       ) -> np.ndarray:
    """The corrected forms' ten-tensor op: a decode token's mask end is
    seq_lens_decoder + 1 + j, and the decode leaves the cursor at
    seq_lens_decoder + n and mask_rollback at 0. decode_states by 9018ccf74's
    rule, or by 2178f2829's in the corrected_pr6403 form."""
    return _mask(_state(form, "update_attn_mask_offsets", state), cursor_kept=True,
                 every_decode=form == "corrected_pr6403", from_kv=True)


def update_attn_mask_offsets_shadow(state: State) -> np.ndarray:
    """The shadow form's op (8 tensors): no cursor and no rollback; a decode
    token's mask end is seq_lens_decoder + 1 + j."""
    return _mask(_state("shadow", "update_attn_mask_offsets", state), cursor_kept=False)


def _mask(s: State, cursor_kept: bool, every_decode=False, from_kv=False) -> np.ndarray:
    """Every form's; no cursor kept (not cursor_kept) is the shadow form's: a
    decode request's cursor is then its seq_lens_decoder, with nothing to roll
    back, and is not kept. every_decode: the decode_states rule of FastDeploy's PR #6403 on
    (_write_decode_states), which the shadow form's op has too. from_kv (the
    corrected forms): a kept cursor is set to seq_lens_decoder, with nothing
    to roll back, before a decode numbers its tokens from it."""
    op = "update_attn_mask_offsets"
    n_all, enc, dec, block = map(
        _vec, (s["seq_lens_this_time"], s["seq_lens_encoder"], s["seq_lens_decoder"],
               s["is_block_step"]))
    ids_remove_padding, cu_seqlens_q, attn_mask_offsets_full, decode_states = (
        s[n] for n in ("ids_remove_padding", "cu_seqlens_q", "attn_mask_offsets_full",
                       "decode_states"))
    attn_mask_offsets_decoder = s["attn_mask_offsets_decoder"] if cursor_kept else None
    mask_rollback = s["mask_rollback"] if cursor_kept else None
    if attn_mask_offsets_decoder is None:
        cursor = dec.astype(np.int64)  # a copy: written below, never returned
        rollback = np.zeros_like(cursor)
    else:
        cursor, rollback = _vec(attn_mask_offsets_decoder), _vec(mask_rollback)
    if from_kv:
        # The checks below read the cursor as seq_lens_decoder; a decode
        # writes it (and the rollback) in the second pass.
        cursor_of = dec.astype(np.int64)
        rollback_of = np.zeros_like(cursor_of)
    else:
        cursor_of, rollback_of = cursor, rollback
    cu = cu_seqlens_q.reshape(-1)
    T = ids_remove_padding.shape[0]

    def next_first(i):
        """The next request's first token: cu[i+1], or T past cu's last entry
        (cu may have bsz entries, as FastDeploy's own tests pass it)."""
        return int(cu[i + 1]) if i + 1 < cu.shape[0] else T

    bsz = n_all.shape[0]
    M = attn_mask_offsets_full.shape[1]

    def skipped(i):
        # FastDeploy's branches: prompt if E > 0, else decode if S > 0, else nothing.
        return bool(block[i]) or (enc[i] <= 0 and dec[i] <= 0)

    for i in range(bsz):
        # Requests' tokens are [cu[i], cu[i+1]) at most, cu never decreasing:
        # no two requests write one token. A skipped request writes none.
        nxt = next_first(i)
        if skipped(i):
            if int(cu[i]) > nxt:
                raise _bad(op, i, "cu_seqlens_q", f"{int(cu[i])} > next {nxt}")
            continue
        E, S, q, n = int(enc[i]), int(dec[i]), int(cu[i]), int(n_all[i])
        if n < 0:
            raise _bad(op, i, "seq_lens_this_time", f"{n} is negative")
        if q < 0 or q + n > T:
            raise _bad(op, i, "cu_seqlens_q", f"tokens [{q}, {q + n}) outside {T}")
        if q + n > nxt:
            raise _bad(op, i, "cu_seqlens_q", f"tokens [{q}, {q + n}) past next {nxt}")
        vision = E > 0 and decode_states[i, 0] == 2 and S > 0
        if E > 0 and not vision:
            if n > M:
                raise _bad(op, i, "attn_mask_offsets_full", f"{n} tokens > {M} columns")
            for j in range(n):
                if not 0 <= int(attn_mask_offsets_full[i, j]) < INT32_MAX:
                    raise _bad(op, i, "attn_mask_offsets_full",
                               f"column {j} holds {int(attn_mask_offsets_full[i, j])}")
        elif vision:
            if S + n > INT32_MAX:
                raise _bad(op, i, "attn_mask_offsets", f"{S} + {n} past int32")
        else:
            c = int(cursor_of[i]) - int(rollback_of[i])
            if c < 0:
                raise _bad(op, i, "attn_mask_offsets_decoder", f"{int(cursor_of[i])} - "
                           f"{int(rollback_of[i])} is negative")
            if c + n > INT32_MAX:
                raise _bad(op, i, "attn_mask_offsets", f"{c} + {n} past int32")

    out = np.zeros(2 * T, dtype=np.int32)
    for i in range(bsz):
        if skipped(i):
            continue
        E, S, q, n = int(enc[i]), int(dec[i]), int(cu[i]), int(n_all[i])
        if E > 0:
            for j in range(n):
                if decode_states[i, 0] == 2 and S > 0:
                    out[(q + j) * 2 + 1] = S + n
                else:
                    out[(q + j) * 2 + 1] = attn_mask_offsets_full[i, j] + 1
        else:
            if from_kv:
                cursor[i], rollback[i] = dec[i], 0
            cursor[i] -= rollback[i]
            rollback[i] = 0
            for j in range(n):
                out[(q + j) * 2 + 1] = cursor[i] + 1 + j
            cursor[i] += n
            _write_decode_states(decode_states[i], n,
                                 every_decode or attn_mask_offsets_decoder is None)
    return out


def _write_decode_states(row, n, every_decode):
    """A decode request's row of decode_states. The ten-tensor op (FastDeploy
    9018ccf74, update_attn_mask_offsets.cu lines 68-77) writes it only when the
    request feeds more than one token: its tokens' columns 0, the rest -1. From
    PR #6403 (2178f2829, lines 68-75; the shadow form's eight-tensor op of
    7a6c28781 too) the op writes it for every decode, and a 1 among its
    tokens' columns becomes -1."""
    if every_decode:
        row[:n] = np.where(row[:n] == 1, -1, 0)
        row[n:] = -1
    elif n > 1:
        row[:n] = 0
        row[n:] = -1
