"""The numpy model of FastDeploy's draft_model_preprocess as PR #5738 merged it
(fastdeploy_mtp/reference_fastdeploy.py), numpy only.

Kernel lines cited as "cu:N" are FastDeploy 9018ccf74's
custom_ops/gpu_ops/speculate_decoding/draft_model/draft_model_preprocess.cu;
"test:N" its tests/operators/test_draft_model_preprocess.py. (a) one branch a
case, expected values worked out by hand; (b) FastDeploy's own op test,
restated, with decode cases its seeded batch never reaches; (c) properties
against the recompute form's reference: where the two must agree and where
they must not.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastdeploy_mtp import reference
from fastdeploy_mtp.harness import states
from fastdeploy_mtp.reference_fastdeploy import (SIGNATURES, OutOfRowAccess,
                                                 draft_model_preprocess_pr5245,
                                                 draft_model_preprocess_pr5738)

INPUT_NAMES = SIGNATURES["pr5738"].input_names

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def attrs(k=3, truncate=False, splitwise=False, v1=True):
    return dict(num_model_step=k, truncate_first_token=truncate, splitwise_prefill=splitwise,
                kvcache_scheduler_v1=v1)


def make_state(bsz=1, D=4, L=8, P=8, A=4, Db=3):
    """A quiet running decode in every row, every cell distinct: matrices hold
    base + 100 * row + column (draft_tokens 1000, input_ids 2000, pre_ids
    3000, accept_tokens 4000, base_model_draft_tokens 5000)."""
    def mat(base, cols):
        return (base + 100 * np.arange(bsz)[:, None] + np.arange(cols)[None, :]).astype(np.int64)

    def vec(value, dtype):
        return np.full(bsz, value, dtype)

    s = {
        "draft_tokens": mat(1000, D),
        "input_ids": mat(2000, L),
        "stop_flags": vec(False, bool),
        "seq_lens_this_time": vec(7, np.int32),
        "seq_lens_encoder": vec(0, np.int32),
        "seq_lens_decoder": vec(20, np.int32),
        "step_idx": vec(10, np.int64),
        "not_need_stop": np.array([False]),
        "is_block_step": vec(False, bool),
        "batch_drop": vec(False, bool),
        "pre_ids": mat(3000, P),
        "mask_rollback": vec(3, np.int32),
        "recompute_token_num": vec(2, np.int32),
        "accept_tokens": mat(4000, A),
        "accept_num": vec(1, np.int32),
        "base_model_seq_lens_this_time": vec(4, np.int32),
        "base_model_seq_lens_encoder": vec(0, np.int32),
        "base_model_seq_lens_decoder": vec(30, np.int32),
        "base_model_step_idx": vec(6, np.int64),
        "base_model_stop_flags": vec(False, bool),
        "base_model_is_block_step": vec(False, bool),
        "base_model_draft_tokens": mat(5000, Db),
    }
    assert tuple(s) == INPUT_NAMES
    return s


def copy(s):
    return {k: v.copy() for k, v in s.items()}


def run(s, **kw):
    out = copy(s)
    draft_model_preprocess_pr5738(out, **kw)
    return out


def assert_state(got, want):
    for name in INPUT_NAMES:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def cleared_base_draft(want, row=0):
    """cu:180-182: columns 1.. of base_model_draft_tokens become -1 (3 columns)."""
    want["base_model_draft_tokens"][row, 1:] = -1


def stopped(want, row=0):
    """cu:252-255 (cu:113-116 on a prefill node)."""
    want["stop_flags"][row] = True
    want["seq_lens_this_time"][row] = 0
    want["seq_lens_decoder"][row] = 0
    want["seq_lens_encoder"][row] = 0


# ---------------------------------------------------------------- (a) branches


def test_prefill_node_places_the_first_token_on_the_prompts_last():
    """cu:99-107, 122-125: a prefill node's request with E = 5 > 0 runs:
    stop_flags false, input_ids[0, 4] = accept_tokens[0, 0] = 4000,
    seq_lens_this_time = 5. It reads no base flag (the base model stopped it
    here), writes no pre_ids, leaves base_model_draft_tokens, lengths,
    step_idx, mask_rollback alone."""
    s = make_state()
    s["seq_lens_encoder"][0] = 5
    s["stop_flags"][0] = True
    s["base_model_stop_flags"][0] = True
    s["base_model_is_block_step"][0] = True
    s["batch_drop"][0] = True
    got = run(s, **attrs(truncate=True, splitwise=True))
    want = copy(s)
    want["stop_flags"][0] = False
    want["input_ids"][0, 4] = 4000
    want["seq_lens_this_time"][0] = 5
    want["not_need_stop"][0] = True
    assert_state(got, want)


def test_prefill_node_places_the_first_token_after_the_prompt():
    """cu:108-111: untruncated, input_ids[0, 5] = 4000 and seq_lens_this_time
    = 5 + 1 = 6."""
    s = make_state()
    s["seq_lens_encoder"][0] = 5
    got = run(s, **attrs(splitwise=True))
    want = copy(s)
    want["input_ids"][0, 5] = 4000
    want["seq_lens_this_time"][0] = 6
    want["not_need_stop"][0] = True
    assert_state(got, want)


@pytest.mark.parametrize("E", [0, -1])
def test_prefill_node_stops_a_request_without_a_prompt(E):
    """cu:112-118: E <= 0 on a prefill node: stopped, this_time, decoder and
    encoder 0; step_idx (10), mask_rollback (3), recompute_token_num (2),
    pre_ids and base_model_draft_tokens kept; nothing runs (cu:122-125)."""
    s = make_state()
    s["seq_lens_encoder"][0] = E
    s["not_need_stop"][0] = True
    got = run(s, **attrs(splitwise=True))
    want = copy(s)
    stopped(want)
    want["not_need_stop"][0] = False
    assert_state(got, want)


def test_v1_parks_a_draft_whose_base_is_in_a_block_step():
    """cu:187-192 then cu:201, 251-256: with kvcache_scheduler_v1, base
    stopped and in a block step: stop_flags and is_block_step true,
    batch_drop untouched, then stopped (decoder 20 -> 0); mask_rollback 3 and
    recompute_token_num 2 kept, step_idx 10 kept."""
    s = make_state()
    s["base_model_stop_flags"][0] = True
    s["base_model_is_block_step"][0] = True
    got = run(s, **attrs(v1=True))
    want = copy(s)
    want["is_block_step"][0] = True
    cleared_base_draft(want)
    stopped(want)
    assert_state(got, want)


def test_v0_drops_a_draft_whose_base_is_in_a_block_step():
    """cu:193-198 then cu:251-256: without kvcache_scheduler_v1 the draft is
    dropped: batch_drop true, stopped; is_block_step untouched."""
    s = make_state()
    s["base_model_stop_flags"][0] = True
    s["base_model_is_block_step"][0] = True
    got = run(s, **attrs(v1=False))
    want = copy(s)
    want["batch_drop"][0] = True
    cleared_base_draft(want)
    stopped(want)
    assert_state(got, want)


@pytest.mark.parametrize("v1", [True, False])
def test_a_stop_keeps_mask_rollback_recompute_and_is_block_step(v1):
    """cu:201, 251-256: base stopped, not in a block step: stopped; nothing
    else of the row moves: mask_rollback 3, recompute_token_num 2, a set
    is_block_step, step_idx 10, pre_ids, draft_tokens, input_ids."""
    s = make_state()
    s["base_model_stop_flags"][0] = True
    s["is_block_step"][0] = True
    s["not_need_stop"][0] = True
    got = run(s, **attrs(v1=v1))
    want = copy(s)
    cleared_base_draft(want)
    stopped(want)
    want["not_need_stop"][0] = False
    assert_state(got, want)


def test_a_dropped_draft_stays_stopped_while_its_base_runs():
    """cu:201: batch_drop on entry stops the row though the base runs, and
    the row does not count as running (cu:259-262)."""
    s = make_state()
    s["batch_drop"][0] = True
    s["seq_lens_encoder"][0] = 5
    got = run(s, **attrs())
    want = copy(s)
    cleared_base_draft(want)
    stopped(want)
    assert_state(got, want)


def test_prefill_truncated_keeps_mask_rollback_and_a_parked_flag():
    """cu:204-213: E = 5: stop_flags false, pre_ids[0, 0] = input_ids[0, 4] =
    accept_tokens[0, 0] = 4000, seq_lens_this_time 5; mask_rollback 3,
    recompute_token_num 2 and is_block_step (true) are kept."""
    s = make_state()
    s["seq_lens_encoder"][0] = 5
    s["stop_flags"][0] = True
    s["is_block_step"][0] = True
    got = run(s, **attrs(truncate=True, v1=True))
    want = copy(s)
    want["stop_flags"][0] = False
    want["pre_ids"][0, 0] = 4000
    want["input_ids"][0, 4] = 4000
    want["seq_lens_this_time"][0] = 5
    want["not_need_stop"][0] = True
    cleared_base_draft(want)
    assert_state(got, want)


def test_prefill_untruncated():
    """cu:214-216: E = 5: input_ids[0, 5] = 4000, seq_lens_this_time 6."""
    s = make_state()
    s["seq_lens_encoder"][0] = 5
    got = run(s, **attrs(truncate=False))
    want = copy(s)
    want["pre_ids"][0, 0] = 4000
    want["input_ids"][0, 5] = 4000
    want["seq_lens_this_time"][0] = 6
    want["not_need_stop"][0] = True
    cleared_base_draft(want)
    assert_state(got, want)


def test_decode_rolls_back_recompute_token_num():
    """cu:232-241, 242-249: S 20, step 10, mask 3, recompute 2, k = 3,
    accept_num 2, base step 6: S 18, step 8, mask 5, recompute 2 (k - 1);
    draft_tokens[0, :2] = 4000, 4001; pre_ids[0, 4:6] = 4000, 4001 (6 - 2
    + j); seq_lens_this_time 2."""
    s = make_state()
    s["accept_num"][0] = 2
    s["recompute_token_num"][0] = 2
    got = run(s, **attrs(k=3))
    want = copy(s)
    want["seq_lens_decoder"][0] = 18
    want["step_idx"][0] = 8
    want["mask_rollback"][0] = 5
    want["recompute_token_num"][0] = 2
    want["draft_tokens"][0, :2] = [4000, 4001]
    want["pre_ids"][0, 4:6] = [4000, 4001]
    want["seq_lens_this_time"][0] = 2
    want["not_need_stop"][0] = True
    cleared_base_draft(want)
    assert_state(got, want)


def test_decode_rollback_is_not_clamped_by_the_base_models_tokens():
    """cu:234-237: recompute 3 with base_model_seq_lens_this_time 2 (the
    recompute form would roll back min(3, max(2 - 2, 0)) = 0): S 20 - 3 = 17,
    step 7, mask 6; recompute becomes k - 1 = 4 (k = 5, cu:240)."""
    s = make_state()
    s["recompute_token_num"][0] = 3
    s["base_model_seq_lens_this_time"][0] = 2
    got = run(s, **attrs(k=5))
    assert got["seq_lens_decoder"][0] == 17
    assert got["step_idx"][0] == 7
    assert got["mask_rollback"][0] == 6
    assert got["recompute_token_num"][0] == 4


def test_decode_rollback_past_zero_leaves_negative_lengths():
    """cu:235-236: nothing bounds the rollback: S 3, step 1, recompute 5 ->
    S -2, step -4; mask 3 + 5 = 8."""
    s = make_state()
    s["seq_lens_decoder"][0] = 3
    s["step_idx"][0] = 1
    s["recompute_token_num"][0] = 5
    got = run(s, **attrs(k=3))
    assert (got["seq_lens_decoder"][0], got["step_idx"][0], got["mask_rollback"][0]) == (-2, -4, 8)


def test_decode_with_a_negative_recompute_rolls_forward():
    """cu:235-237: recompute -1: S 21, step 11, mask 2."""
    s = make_state()
    s["recompute_token_num"][0] = -1
    got = run(s, **attrs(k=3))
    assert (got["seq_lens_decoder"][0], got["step_idx"][0], got["mask_rollback"][0]) == (21, 11, 2)


def test_a_stopped_draft_resyncs_from_the_base_models_this_time():
    """cu:225-231, 242-249: stop_flags on entry, base decoder 30, base this
    time 4, base step 6, accept_num 3: stop false, S = 30 - 4 = 26, step = 6 -
    4 = 2 (accept_num plays no part); mask_rollback 3 and recompute 2 kept;
    pre_ids[0, 3:6] and draft_tokens[0, :3] = 4000..4002; this_time 3."""
    s = make_state()
    s["stop_flags"][0] = True
    s["accept_num"][0] = 3
    got = run(s, **attrs(k=3))
    want = copy(s)
    want["stop_flags"][0] = False
    want["seq_lens_decoder"][0] = 26
    want["step_idx"][0] = 2
    want["draft_tokens"][0, :3] = [4000, 4001, 4002]
    want["pre_ids"][0, 3:6] = [4000, 4001, 4002]
    want["seq_lens_this_time"][0] = 3
    want["not_need_stop"][0] = True
    cleared_base_draft(want)
    assert_state(got, want)


@pytest.mark.parametrize("v1,base_block,want_block", [
    (True, False, False),   # cu:221-222: the base left its block step: unparked
    (True, True, True),     # base in a block step but running: still parked
    (False, False, True),   # cu:219 is v1's only: v0 never unparks
])
def test_unparking_a_decode(v1, base_block, want_block):
    """cu:219-224: a running decode with is_block_step set."""
    s = make_state()
    s["is_block_step"][0] = True
    s["base_model_is_block_step"][0] = base_block
    got = run(s, **attrs(v1=v1))
    assert got["is_block_step"][0] == want_block
    assert got["seq_lens_decoder"][0] == 18 and not got["stop_flags"][0]


def test_a_decode_with_a_negative_encoder_length_keeps_it():
    """cu:204, 218: E = -2 is not > 0: the decode branch, E kept."""
    s = make_state()
    s["seq_lens_encoder"][0] = -2
    got = run(s, **attrs())
    assert got["seq_lens_encoder"][0] == -2 and got["seq_lens_decoder"][0] == 18


@pytest.mark.parametrize("running", [False, True])
def test_not_need_stop_is_whether_any_request_runs(running):
    """cu:202, 259-262: two rows, the base stopped both, or row 1 a decode of
    accept_num 0 (runs, feeds nothing: this_time 0)."""
    s = make_state(bsz=2)
    s["base_model_stop_flags"][:] = True
    s["not_need_stop"][0] = not running
    if running:
        s["base_model_stop_flags"][1] = False
        s["accept_num"][1] = 0
    got = run(s, **attrs())
    assert got["not_need_stop"][0] == running
    assert got["seq_lens_this_time"][1] == 0


def test_requests_from_512_on_are_left_alone():
    """cu:298, 306, 337 launch one block of 512 threads; cu:95, 167 give a
    thread one request: with bsz 514, rows 512 and 513 (prefills) are not
    touched, base_model_draft_tokens included, and do not count (cu:259-262)."""
    s = make_state(bsz=514)
    s["base_model_stop_flags"][:512] = True
    s["seq_lens_encoder"][512:] = 5
    got = run(s, **attrs())
    want = copy(s)
    for i in range(512):
        cleared_base_draft(want, i)
        stopped(want, i)
    assert_state(got, want)
    assert not got["not_need_stop"][0]


def test_32_bit_sums_wrap():
    """cu:234-237 in 32-bit int: S = INT32_MIN + 1 - 2 wraps to INT32_MAX;
    mask INT32_MAX + 2 wraps to INT32_MIN + 1. cu:228-229: a re-sync of base
    decoder INT32_MIN with base this time 1 wraps to INT32_MAX. cu:236 in
    64 bits: step INT64_MIN - 2 wraps to INT64_MAX - 1. cu:240: k = INT32_MIN,
    k - 1 wraps to INT32_MAX."""
    s = make_state(bsz=2)
    s["seq_lens_decoder"][0] = I32_MIN + 1
    s["step_idx"][0] = I64_MIN
    s["mask_rollback"][0] = I32_MAX
    s["stop_flags"][1] = True
    s["base_model_seq_lens_decoder"][1] = I32_MIN
    s["base_model_seq_lens_this_time"][1] = 1
    s["base_model_step_idx"][1] = 6
    got = run(s, **attrs(k=I32_MIN))
    assert got["seq_lens_decoder"][0] == I32_MAX
    assert got["mask_rollback"][0] == I32_MIN + 1
    assert got["step_idx"][0] == I64_MAX - 1
    assert got["recompute_token_num"][0] == I32_MAX
    assert got["seq_lens_decoder"][1] == I32_MAX
    assert got["step_idx"][1] == 5


def test_the_pre_ids_position_is_narrowed_to_32_bits():
    """cu:244-245: base step 2**32 + 5 minus (2 - j) is 2**32 + 3 + j,
    narrowed to the int 3 + j: pre_ids[0, 3:5] = 4000, 4001."""
    s = make_state()
    s["base_model_step_idx"][0] = 2**32 + 5
    s["accept_num"][0] = 2
    got = run(s, **attrs())
    want_row = s["pre_ids"][0].copy()
    want_row[3:5] = [4000, 4001]
    np.testing.assert_array_equal(got["pre_ids"][0], want_row)


def test_a_pre_ids_position_before_the_row():
    """cu:244-247: base step 1, accept_num 2: positions -1 and 0. Refused by
    default, nothing changed; "flat": position -1 of row 1 is row 0's last
    cell, pre_ids[0, 7] = accept_tokens[1, 0] = 4100, and pre_ids[1, 0] =
    4101. Row 0 (a stop) writes no pre_ids."""
    s = make_state(bsz=2)
    s["base_model_stop_flags"][0] = True
    s["base_model_step_idx"][1] = 1
    s["accept_num"][1] = 2
    before = copy(s)
    with pytest.raises(OutOfRowAccess, match=r"pre_ids: request 1: column -1 outside its row"):
        draft_model_preprocess_pr5738(s, **attrs())
    assert_state(s, before)
    got = run(s, **attrs(), out_of_row="flat")
    assert got["pre_ids"][0, 7] == 4100 and got["pre_ids"][1, 0] == 4101


@pytest.mark.parametrize("field,edit", [
    ("input_ids", dict(seq_lens_encoder=8)),   # cu:215: column 8 of 8
    ("draft_tokens", dict(accept_num=5)),      # cu:243: 5 tokens, 4 columns
])
def test_other_accesses_past_the_row(field, edit):
    """cu:215, 243: no column is checked. The last row's access past its row
    is past the buffer: refused even when "flat"."""
    s = make_state()
    for k, value in edit.items():
        s[k][0] = value
    if field == "draft_tokens":
        s["accept_tokens"] = np.zeros((1, 8), np.int64)
    for mode in ("raise", "flat"):
        with pytest.raises(OutOfRowAccess, match=field):
            draft_model_preprocess_pr5738(copy(s), **attrs(), out_of_row=mode)


def test_per_request_vectors_may_be_columns():
    """FastDeploy's runner holds mask_rollback, recompute_token_num,
    is_block_step and batch_drop as [N, 1] (mtp.py:471-472, 495-500): the
    same decode as test_decode_rolls_back_recompute_token_num."""
    s = make_state()
    for name in ("mask_rollback", "recompute_token_num", "is_block_step", "batch_drop"):
        s[name] = s[name].reshape(-1, 1)
    got = run(s, **attrs(k=3))
    assert got["mask_rollback"].shape == (1, 1)
    assert (got["seq_lens_decoder"][0], got["mask_rollback"][0, 0]) == (18, 5)
    assert got["recompute_token_num"][0, 0] == 2 and got["pre_ids"][0, 5] == 4000


# ------------------------------------------- (b) FastDeploy's own test, restated


def fastdeploy_test_model(s, k, truncate, splitwise, v1):
    """test:23-180's per-request model of the kernel, restated (one pass over
    every request, no 512 limit; its v1 unpark reads `not (base block and
    block)`, test:152, which has the kernel's effect; pre_ids positions index
    the row numpy's way)."""
    bsz = s["seq_lens_this_time"].shape[0]
    v = {n: s[n].reshape(s[n].shape[0]) for n in INPUT_NAMES
         if s[n].ndim == 1 or s[n].shape[1] == 1}
    running = 0
    for i in range(bsz):
        E = int(v["seq_lens_encoder"][i])
        if splitwise:
            if E > 0:
                running += 1
                v["stop_flags"][i] = False
                col = E - 1 if truncate else E
                s["input_ids"][i, col] = s["accept_tokens"][i, 0]
                v["seq_lens_this_time"][i] = col + 1
            else:
                v["stop_flags"][i] = True
                v["seq_lens_this_time"][i] = v["seq_lens_decoder"][i] = v["seq_lens_encoder"][i] = 0
            continue
        s["base_model_draft_tokens"][i, 1:] = -1
        if v["base_model_stop_flags"][i] and v["base_model_is_block_step"][i]:
            v["stop_flags"][i] = True
            if v1:
                v["is_block_step"][i] = True
            else:
                v["batch_drop"][i] = True
        if not (v["base_model_stop_flags"][i] or v["batch_drop"][i]):
            running += 1
            if E > 0:
                v["stop_flags"][i] = False
                s["pre_ids"][i, 0] = s["accept_tokens"][i, 0]
                col = E - 1 if truncate else E
                s["input_ids"][i, col] = s["accept_tokens"][i, 0]
                v["seq_lens_this_time"][i] = col + 1
                continue
            if v1 and not (v["base_model_is_block_step"][i] and v["is_block_step"][i]):
                v["is_block_step"][i] = False
            if v["stop_flags"][i]:
                v["stop_flags"][i] = False
                v["seq_lens_decoder"][i] = (v["base_model_seq_lens_decoder"][i]
                                            - v["base_model_seq_lens_this_time"][i])
                v["step_idx"][i] = (v["base_model_step_idx"][i]
                                    - v["base_model_seq_lens_this_time"][i])
            else:
                r = v["recompute_token_num"][i]
                v["seq_lens_decoder"][i] -= r
                v["step_idx"][i] -= r
                v["mask_rollback"][i] += r
                v["recompute_token_num"][i] = k - 1
            a = int(v["accept_num"][i])
            for j in range(a):
                s["draft_tokens"][i, j] = s["accept_tokens"][i, j]
                pos = int(v["base_model_step_idx"][i]) - (a - j)
                s["pre_ids"][i, pos] = s["accept_tokens"][i, j]
            v["seq_lens_this_time"][i] = a
        else:
            v["stop_flags"][i] = True
            v["seq_lens_this_time"][i] = v["seq_lens_decoder"][i] = v["seq_lens_encoder"][i] = 0
    s["not_need_stop"][0] = running > 0


FD_BSZ, FD_DRAFT_COLS, FD_INPUT_COLS, FD_MAX_DRAFT = 10, 4, 100, 10


def fastdeploy_seeded_state(randint):
    """test:335-374's inputs, drawn in its order by randint(low, high, shape,
    dtype) (high exclusive): bsz 10, draft_tokens [10, 4], input_ids and
    accept_tokens [10, 100], stop_flags all false (randint(0, 1)),
    accept_num in [1, 15), base_model_draft_tokens [10, 10] zeros, pre_ids a
    copy of input_ids, and base_model_seq_lens_this_time the very array of
    seq_lens_this_time; mask_rollback and recompute_token_num [10] zeros."""
    b, i32, i64 = FD_BSZ, np.int32, np.int64
    s = {}
    s["draft_tokens"] = randint(0, 100, [b, FD_DRAFT_COLS], i64)
    s["input_ids"] = randint(0, 100, [b, FD_INPUT_COLS], i64)
    s["stop_flags"] = randint(0, 1, [b], i32).astype(bool)
    s["seq_lens_this_time"] = randint(0, 100, [b], i32)
    s["seq_lens_encoder"] = randint(0, FD_INPUT_COLS, [b], i32)
    s["seq_lens_decoder"] = randint(0, FD_INPUT_COLS, [b], i32)
    s["step_idx"] = randint(0, 100, [b], i64)
    randint(0, 100, [b], i32)  # test:354-355 draw two arrays it never uses
    randint(0, 100, [b], i32)
    s["not_need_stop"] = np.zeros(1, bool)
    s["is_block_step"] = np.zeros(b, bool)
    s["batch_drop"] = np.zeros(b, bool)
    s["mask_rollback"] = np.zeros(b, i32)
    s["recompute_token_num"] = np.zeros(b, i32)
    s["accept_tokens"] = randint(0, 100, [b, 100], i64)
    s["accept_num"] = randint(1, FD_MAX_DRAFT + 5, [b], i32)
    s["base_model_seq_lens_encoder"] = randint(0, 100, [b], i32)
    s["base_model_seq_lens_decoder"] = randint(0, 100, [b], i32)
    s["base_model_step_idx"] = randint(0, 100, [b], i64)
    s["base_model_stop_flags"] = np.zeros(b, bool)
    s["base_model_is_block_step"] = np.zeros(b, bool)
    s["base_model_draft_tokens"] = np.zeros((b, FD_MAX_DRAFT), i64)
    s["pre_ids"] = s["input_ids"].copy()
    s["base_model_seq_lens_this_time"] = s["seq_lens_this_time"]
    return {n: s[n] for n in INPUT_NAMES}


# test:344-345, 374-376.
FD_ATTRS = attrs(k=FD_MAX_DRAFT, truncate=True, splitwise=False, v1=True)


def numpy_randint(seed):
    rng = np.random.default_rng(seed)
    return lambda lo, hi, shape, dtype: rng.integers(lo, hi, shape).astype(dtype)


def paddle_randint(seed):
    """Paddle's own generator under test:336's seed, on Paddle's default
    device: on a GPU the very draws of FastDeploy's test, here the CPU's."""
    paddle = pytest.importorskip("paddle")
    paddle.seed(seed)

    def randint(lo, hi, shape, dtype):
        got = paddle.randint(lo, hi, shape, dtype="int64").numpy()
        if got.size and not (lo <= got.min() and got.max() < hi):
            pytest.skip(f"Paddle's own randint drew outside [{lo}, {hi}) on this device "
                        f"(Paddle {paddle.__version__} has no kernels for its GPU)")
        return got.astype(dtype)

    return randint


def both_ways(s):
    """test:405-414: the test's model on a copy of each input (test:406
    clones them: base_model_seq_lens_this_time no longer the array of
    seq_lens_this_time) and the reference on s itself, then compared: the
    test compares the first 12 inputs, draft_tokens to mask_rollback; here
    every one, but for an aliased base_model_seq_lens_this_time, which shows
    the new seq_lens_this_time where the copy keeps the old."""
    want = copy(s)
    fastdeploy_test_model(want, FD_MAX_DRAFT, truncate=True, splitwise=False, v1=True)
    aliased = s["base_model_seq_lens_this_time"] is s["seq_lens_this_time"]
    draft_model_preprocess_pr5738(s, **FD_ATTRS)
    for name in INPUT_NAMES:
        if not (aliased and name == "base_model_seq_lens_this_time"):
            np.testing.assert_array_equal(s[name], want[name], err_msg=name)
    return s


@pytest.mark.parametrize("randint", ["numpy", "paddle"])
def test_fastdeploy_seeded_case(randint):
    """test:335-414: every request of the seeded batch is a prefill (E > 0,
    no base stop): pre_ids[i, 0] = input_ids[i, E - 1] = accept_tokens[i, 0],
    seq_lens_this_time = E, decode state untouched, not_need_stop true."""
    if randint == "paddle":
        paddle = pytest.importorskip("paddle")
        saved = paddle.get_rng_state()
        try:
            s = fastdeploy_seeded_state(paddle_randint(2022))
        finally:
            paddle.set_rng_state(saved)
    else:
        s = fastdeploy_seeded_state(numpy_randint(2022))
    before = copy(s)
    E = before["seq_lens_encoder"]
    assert (E > 0).all()  # the batch the test draws: no decode
    got = both_ways(s)
    rows = np.arange(FD_BSZ)
    np.testing.assert_array_equal(got["seq_lens_this_time"], E)
    np.testing.assert_array_equal(got["pre_ids"][:, 0], before["accept_tokens"][:, 0])
    np.testing.assert_array_equal(got["input_ids"][rows, E - 1], before["accept_tokens"][:, 0])
    for name in ("seq_lens_decoder", "step_idx", "mask_rollback", "recompute_token_num",
                 "draft_tokens", "stop_flags"):
        np.testing.assert_array_equal(got[name], before[name], err_msg=name)
    assert got["not_need_stop"][0]


@pytest.mark.parametrize("seed", [2022, 7])
def test_fastdeploy_seeded_shapes_with_decodes(seed):
    """test:335-376's shapes and attributes (k 10, truncated, v1) with rows
    0-5 made decodes: rows 0-1 stopped drafts (re-sync), rows 2-3 a
    recompute_token_num of k - 1 = 9, rows 4-5 of 0 as test:360 has it;
    accept_num at most the 4 draft_tokens columns and base step at least
    accept_num (test:364 and 367 draw past both). Row 6 parked, row 7 base
    stopped. Checked against the test's model, and by hand for rows 0 and 2."""
    s = fastdeploy_seeded_state(numpy_randint(seed))
    s["base_model_seq_lens_this_time"] = s["seq_lens_this_time"].copy()
    dec = slice(0, 6)
    s["seq_lens_encoder"][dec] = 0
    s["accept_num"][:] = np.minimum(s["accept_num"], FD_DRAFT_COLS)
    s["base_model_step_idx"][:] = np.maximum(s["base_model_step_idx"], s["accept_num"])
    s["stop_flags"][0:2] = True
    s["recompute_token_num"][2:4] = FD_MAX_DRAFT - 1
    s["base_model_stop_flags"][6:8] = True
    s["base_model_is_block_step"][6] = True
    before = copy(s)
    got = both_ways(s)
    # Row 0: cu:228-231.
    n0 = int(before["base_model_seq_lens_this_time"][0])
    assert got["seq_lens_decoder"][0] == before["base_model_seq_lens_decoder"][0] - n0
    assert got["step_idx"][0] == before["base_model_step_idx"][0] - n0
    assert got["mask_rollback"][0] == 0 and got["recompute_token_num"][0] == 0
    # Row 2: cu:234-240.
    assert got["seq_lens_decoder"][2] == before["seq_lens_decoder"][2] - 9
    assert got["mask_rollback"][2] == 9 and got["recompute_token_num"][2] == 9
    a2, step2 = int(before["accept_num"][2]), int(before["base_model_step_idx"][2])
    np.testing.assert_array_equal(got["pre_ids"][2, step2 - a2:step2],
                                  before["accept_tokens"][2, :a2])
    # Rows 4-5 recompute 0 tokens, and recompute k - 1 next.
    np.testing.assert_array_equal(got["seq_lens_decoder"][4:6], before["seq_lens_decoder"][4:6])
    np.testing.assert_array_equal(got["recompute_token_num"][4:6], [9, 9])
    assert got["is_block_step"][6] and got["stop_flags"][7] and got["seq_lens_decoder"][7] == 0


# ------------------------------------- (c) against the recompute form's reference


def recompute_form(s, k, truncate, splitwise, v1):
    out = copy(s)
    reference.draft_model_preprocess_recompute(out, **attrs(k, truncate, splitwise, v1))
    return out


def row(s, name, i):
    a = s[name]
    return a[i] if a.ndim == 2 and a.shape[1] != 1 else a.reshape(a.shape[0])[i]


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 24), k=st.integers(1, 5),
       truncate=st.booleans(), splitwise=st.booleans(), v1=st.booleans(),
       extra=st.integers(0, 2))
def test_the_two_versions_agree_except_on_a_decodes_rollback(seed, bsz, k, truncate,
                                                             splitwise, v1, extra):
    """The recompute form (0956b09a's rules) and the merged kernel take the
    same branches. A prefill-node request, a stopped, parked or dropped one
    and a prefill end the same in both. A running decode ends the same when
    recompute_token_num <= max(base this time - 2, 0) (the clamp leaves it);
    past that the merged one rolls back the excess further, S and step_idx
    lower and mask_rollback higher by it (cu:234-237). A re-sync takes S and
    step from the base less base this time, not accept_num, and keeps
    mask_rollback and recompute_token_num (cu:225-231). Rows past the batch:
    untouched by both."""
    rng = np.random.default_rng(seed)
    s = states.recompute_state(rng, bsz, num_model_step=k, splitwise_prefill=splitwise,
                               truncate_first_token=truncate, extra_rows=extra)
    ours = recompute_form(s, k, truncate, splitwise, v1)
    merged = run(s, **attrs(k, truncate, splitwise, v1))
    assert merged["not_need_stop"][0] == ours["not_need_stop"][0]
    for i in range(bsz + extra):
        diff = {}
        decode = (i < bsz and not splitwise and not row(s, "base_model_stop_flags", i)
                  and not row(s, "batch_drop", i) and row(s, "seq_lens_encoder", i) <= 0)
        if decode:
            rc = int(row(s, "recompute_token_num", i))
            n = int(row(s, "base_model_seq_lens_this_time", i))
            clamped = min(rc, max(n - 2, 0))
            if row(s, "stop_flags", i):
                shift = int(row(s, "accept_num", i)) - n
                diff = {"seq_lens_decoder": shift, "step_idx": shift,
                        "mask_rollback": -clamped, "recompute_token_num": rc - (k - 1)}
            else:
                diff = {"seq_lens_decoder": clamped - rc, "step_idx": clamped - rc,
                        "mask_rollback": rc - clamped}
        for name in INPUT_NAMES:
            if name == "not_need_stop" or s[name].shape[0] <= i:
                continue
            m, o = row(merged, name, i), row(ours, name, i)
            if name in diff:
                assert int(m) - int(o) == diff[name], (i, name)
            else:
                np.testing.assert_array_equal(m, o, err_msg=f"request {i}: {name}")


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 6), n=st.integers(0, 8),
       excess=st.integers(1, 5), v1=st.booleans())
def test_a_running_decode_past_the_clamp_differs(seed, k, n, excess, v1):
    """A running decode with recompute_token_num > max(base this time - 2, 0):
    the merged kernel's seq_lens_decoder is lower than the recompute form's,
    by exactly the excess (cu:235), and its mask_rollback higher (cu:237)."""
    rng = np.random.default_rng(seed)
    s = states.recompute_state(rng, 1, num_model_step=k)
    for name, value in (("seq_lens_encoder", 0), ("stop_flags", False), ("batch_drop", False),
                        ("base_model_stop_flags", False), ("accept_num", 0)):
        s[name].reshape(-1)[0] = value
    s["seq_lens_decoder"].reshape(-1)[0] = 100
    s["step_idx"].reshape(-1)[0] = 100
    s["base_model_seq_lens_this_time"].reshape(-1)[0] = n
    s["recompute_token_num"].reshape(-1)[0] = max(n - 2, 0) + excess
    ours = recompute_form(s, k, False, False, v1)
    merged = run(s, **attrs(k, False, False, v1))
    assert int(row(ours, "seq_lens_decoder", 0)) - int(row(merged, "seq_lens_decoder", 0)) == excess
    assert int(row(merged, "mask_rollback", 0)) - int(row(ours, "mask_rollback", 0)) == excess


# ------------------------------------- (d) PR #5245's kernel (ba915e03e, 20 tensors)
# "ba:N" is ba915e03e's draft_model_preprocess.cu. `git diff ba915e03e
# 9018ccf74` of that file changes the kernel's parameters (mask_rollback,
# recompute_token_num) and the running decode's rollback (ba:226-230 against
# cu:232-241), nothing else.

PR5245_NAMES = SIGNATURES["pr5245"].input_names


def pr5245_state(s):
    return {n: s[n] for n in PR5245_NAMES}


def run_pr5245(s, **kw):
    out = copy(s)
    draft_model_preprocess_pr5245(out, **kw)
    return out


def test_pr5245_decode_rolls_back_k_minus_1_and_has_no_mask_rollback():
    """ba:226-230, 231-237: S 20, step 10, k = 4, accept_num 2, base step 6:
    S 17, step 7; the accepted tokens re-fed as at 9018ccf74."""
    s = pr5245_state(make_state())
    s["accept_num"][0] = 2
    got = run_pr5245(s, **attrs(k=4))
    want = copy(s)
    want["seq_lens_decoder"][0] = 17
    want["step_idx"][0] = 7
    want["draft_tokens"][0, :2] = [4000, 4001]
    want["pre_ids"][0, 4:6] = [4000, 4001]
    want["seq_lens_this_time"][0] = 2
    want["not_need_stop"][0] = True
    cleared_base_draft(want)
    assert set(got) == set(PR5245_NAMES)
    for name in PR5245_NAMES:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_pr5245_resync_takes_the_base_models_this_time():
    """ba:221-225: a stopped draft: S = 30 - 4 = 26, step = 6 - 4 = 2."""
    s = pr5245_state(make_state())
    s["stop_flags"][0] = True
    got = run_pr5245(s, **attrs(k=3))
    assert (got["stop_flags"][0], got["seq_lens_decoder"][0], got["step_idx"][0]) == (False, 26, 2)


def test_pr5245_rollback_wraps_in_32_bits():
    """ba:228: seq_lens_decoder -= k - 1 in int: S = INT32_MIN + 1, k = 4
    wraps to INT32_MAX - 1; step_idx is int64 and goes to 10 - 3 = 7."""
    s = pr5245_state(make_state())
    s["seq_lens_decoder"][0] = I32_MIN + 1
    got = run_pr5245(s, **attrs(k=4))
    assert (got["seq_lens_decoder"][0], got["step_idx"][0]) == (I32_MAX - 1, 7)


def test_pr5245_refuses_a_state_without_its_tensors():
    s = pr5245_state(make_state())
    del s["accept_num"]
    with pytest.raises(ValueError, match="lacks accept_num"):
        draft_model_preprocess_pr5245(s, **attrs())


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 24), k=st.integers(1, 5),
       truncate=st.booleans(), splitwise=st.booleans(), v1=st.booleans(),
       extra=st.integers(0, 2))
def test_pr5245_is_9018ccf74_with_k_minus_1_recomputed(seed, bsz, k, truncate, splitwise, v1,
                                                       extra):
    """With recompute_token_num = k - 1 in every row, 9018ccf74's kernel
    computes on the 20 tensors they share what ba915e03e's does: the two
    differ only in that line (and 9018ccf74's writes of mask_rollback and
    recompute_token_num)."""
    rng = np.random.default_rng(seed)
    s = states.recompute_state(rng, bsz, num_model_step=k, splitwise_prefill=splitwise,
                               truncate_first_token=truncate, extra_rows=extra)
    s["recompute_token_num"][...] = k - 1
    merged = run(s, **attrs(k, truncate, splitwise, v1))
    old = run_pr5245(pr5245_state(s), **attrs(k, truncate, splitwise, v1))
    for name in PR5245_NAMES:
        np.testing.assert_array_equal(old[name], merged[name], err_msg=name)
