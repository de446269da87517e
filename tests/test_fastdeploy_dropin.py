"""FastDeploy's own conventions, kept by the ops: the states its MTP proposer
builds for each role, its short cu_seqlens_q, its output order, its
decode_states rule, and a slot reused by an insert that never writes
mask_rollback (docs/contract.md)."""

import numpy as np
import pytest

from fastdeploy_mtp import forms, ops
from fastdeploy_mtp.harness import states
from fastdeploy_mtp.registration import read_registered
from fastdeploy_mtp.signature import DRAFT_MODEL_PREPROCESS, UPDATE_ATTN_MASK_OFFSETS, op_name
from helpers import (DEVICES, WITH_GUARDED, assert_states_equal, call_op, preprocess_attrs,
                     run_mask_op, run_mask_ref, run_preprocess_op, run_preprocess_ref, to_numpy,
                     to_tensors)
from case_states import decode_states_case
from raw_op import assert_raw_refused, raw_refusal_cases


# ---------------------------------------------------------------------------
# FastDeploy's decode-node insert, for k = 1..4


def fastdeploy_decode_node_state(rng, bsz, k):
    """Each slot as FastDeploy's older decode-node insert leaves it
    (insert_prefill_inputs, 9018ccf74 fastdeploy/spec_decode/mtp.py lines
    620-641: step_idx 1, seq_lens_decoder = the prompt length,
    seq_lens_this_time = k + 1), with our proposer's mask_rollback = 1 - (k-1),
    after the base model's first verification accepted 1 or 2 tokens."""
    L = 64
    n = rng.integers(1, 20, bsz).astype(np.int32)
    a = rng.integers(1, 3, bsz).astype(np.int32)
    i32, i64 = np.int32, np.int64
    return {
        "draft_tokens": np.full((bsz, k + 1), -1, i64),
        "input_ids": np.zeros((bsz, L), i64),
        "stop_flags": np.zeros(bsz, bool),
        "seq_lens_this_time": np.full(bsz, k + 1, i32),
        "seq_lens_encoder": np.zeros(bsz, i32),
        "seq_lens_decoder": n.copy(),
        "step_idx": np.ones(bsz, i64),
        "not_need_stop": np.zeros(1, bool),
        "is_block_step": np.zeros(bsz, bool),
        "batch_drop": np.zeros(bsz, bool),
        "pre_ids": np.full((bsz, L), -1, i64),
        "mask_rollback": np.full(bsz, 1 - (k - 1), i32),
        "accept_tokens": rng.integers(3, 1000, (bsz, k + 1)).astype(i64),
        "accept_num": a,
        "base_model_seq_lens_this_time": np.full(bsz, k + 1, i32),
        "base_model_seq_lens_encoder": np.zeros(bsz, i32),
        "base_model_seq_lens_decoder": (n + a).astype(i32),
        "base_model_step_idx": (1 + a).astype(i64),
        "base_model_stop_flags": np.zeros(bsz, bool),
        "base_model_is_block_step": np.zeros(bsz, bool),
        "base_model_draft_tokens": np.full((bsz, k + 1), 5, i64),
    }


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("bsz", [1, 3, 8])
def test_fastdeploy_decode_node_state_runs_as_the_reference(device, k, bsz):
    s = fastdeploy_decode_node_state(np.random.default_rng(100 * k + bsz), bsz, k)
    attrs = preprocess_attrs(k, truncate=True, v1=True)
    got = run_preprocess_op(s, attrs, device)
    assert_states_equal(got, run_preprocess_ref(s, attrs), f"k={k} bsz={bsz}")
    # Written as it is, also where it is negative (k >= 3): 1 - (k-1).
    np.testing.assert_array_equal(got["step_idx"], np.full(bsz, 1 - (k - 1)))
    np.testing.assert_array_equal(got["seq_lens_decoder"], s["seq_lens_decoder"] - (k - 1))


@pytest.mark.parametrize("device", WITH_GUARDED)
def test_a_one_token_prompt_may_roll_back_below_zero(device):
    """A decode-node request of a one-token prompt with k = 4: seq_lens_decoder
    1 - 3 = -2 is written, not refused (no write outside a tensor)."""
    s = fastdeploy_decode_node_state(np.random.default_rng(7), 2, 4)
    s["seq_lens_decoder"][:] = [1, 2]
    attrs = preprocess_attrs(4, truncate=True, v1=True)
    got = run_preprocess_op(s, attrs, device)
    np.testing.assert_array_equal(got["seq_lens_decoder"], [-2, -1])
    np.testing.assert_array_equal(got["mask_rollback"], s["mask_rollback"] + 3)


# ---------------------------------------------------------------------------
# cu_seqlens_q of bsz or bsz + 1 entries


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("padding", [0, 2])
def test_cu_seqlens_q_of_bsz_entries_gives_the_same_result(device, seed, padding):
    full = states.mask_state(np.random.default_rng(seed), 9, padding_tokens=padding)
    short = {k: v.copy() for k, v in full.items()}
    short["cu_seqlens_q"] = full["cu_seqlens_q"][:-1].copy()
    out_full, after_full = run_mask_op(full, device)
    out_short, after_short = run_mask_op(short, device)
    np.testing.assert_array_equal(out_short, out_full)
    for name in after_full:
        if name != "cu_seqlens_q":
            np.testing.assert_array_equal(after_short[name], after_full[name], err_msg=name)
    want_out, want = run_mask_ref(short)
    np.testing.assert_array_equal(out_short, want_out)


@pytest.mark.parametrize("device", WITH_GUARDED)
def test_short_cu_seqlens_q_bounds_the_last_request_by_the_token_total(device):
    """With bsz entries the last request's tokens must end by T: one past is
    refused, naming it, with nothing changed; exactly at T is taken."""
    s = states.mask_state(np.random.default_rng(3), 4, branches=["decode"] * 4)
    s["seq_lens_this_time"][:] = 2
    s["cu_seqlens_q"] = np.array([0, 2, 4, 6], np.int32)
    s["ids_remove_padding"] = np.zeros(8, np.int64)  # the last request's [6, 8) ends at T
    out, _ = run_mask_op(s, device)
    np.testing.assert_array_equal(out, run_mask_ref(s)[0])
    s["cu_seqlens_q"][3] = 7  # [7, 9): one past T
    t = to_tensors(s, device)
    with pytest.raises(ops.BadInputError, match=r"request 3: cu_seqlens_q") as info:
        call_op(UPDATE_ATTN_MASK_OFFSETS, t)
    assert "7" in str(info.value) and "8" in str(info.value), info.value  # q and T
    for name, v in to_numpy(t).items():
        np.testing.assert_array_equal(v, s[name], err_msg=name)


# ---------------------------------------------------------------------------
# Output order


def test_mask_outputs_are_registered_in_fastdeploy_s_order():
    ops.load_library()
    reg = read_registered(op_name("rollback", UPDATE_ATTN_MASK_OFFSETS))
    assert list(reg.outputs)[:3] == ["attn_mask_offsets", "decode_states_out",
                                     "mask_rollback_out"]
    assert list(reg.outputs)[3:] == ["attn_mask_offsets_decoder_out"]
    assert UPDATE_ATTN_MASK_OFFSETS.output_names == tuple(reg.outputs)


@pytest.mark.parametrize("device", DEVICES)
def test_the_raw_op_returns_decode_states_second(device):
    """A runner that reads out[1] as decode_states and out[2] as mask_rollback,
    as FastDeploy's registration says, gets them from the raw positional call."""
    s = states.mask_state(np.random.default_rng(11), 6, branches=["decode"] * 6)
    want_out, want = run_mask_ref(s)
    t = to_tensors(s, device)
    lib = forms.load("rollback").library
    outs = lib.update_attn_mask_offsets(*[t[n] for n in UPDATE_ATTN_MASK_OFFSETS.input_names])
    assert len(outs) == 4
    np.testing.assert_array_equal(outs[0].numpy(), want_out)
    np.testing.assert_array_equal(outs[1].numpy(), want["decode_states"])
    np.testing.assert_array_equal(outs[2].numpy(), want["mask_rollback"])
    np.testing.assert_array_equal(outs[3].numpy().reshape(-1),
                                  want["attn_mask_offsets_decoder"].reshape(-1))
    # Not the same values by chance: the decode rows did change.
    assert not np.array_equal(want["attn_mask_offsets_decoder"], s["attn_mask_offsets_decoder"])


def test_preprocess_outputs_follow_the_inputs():
    ops.load_library()
    reg = read_registered(op_name("rollback", DRAFT_MODEL_PREPROCESS))
    assert list(reg.outputs) == [f"{n}_out" for n in DRAFT_MODEL_PREPROCESS.written]


# ---------------------------------------------------------------------------
# decode_states: the rule of FastDeploy's ten-tensor mask op


DECODE_STATE_CASES = [
    # (row before, tokens n, row after). FastDeploy 9018ccf74,
    # custom_ops/gpu_ops/update_attn_mask_offsets.cu lines 68-77: only a decode
    # of more than one token rewrites its row, 0 for its tokens, -1 after.
    ([-1, -1], 1, [-1, -1]),         # a one-token decode leaves the row as it was
    ([1, 1, 2], 1, [1, 1, 2]),
    ([1, 2], 0, [1, 2]),             # no tokens: untouched
    ([0, 1, 3], 2, [0, 0, -1]),      # a 1 among the tokens' columns becomes 0
    ([2, 3, 1, 1], 3, [0, 0, 0, -1]),
    ([1, 3], 3, [0, 0]),             # more tokens than columns: only the row's own
]


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("before,n,after", DECODE_STATE_CASES)
def test_decode_states_follow_fastdeploy(device, before, n, after):
    Ds = len(before)
    s = decode_states_case(states.mask_state(
        np.random.default_rng(5), 2, branches=["decode", "prompt"], prompt_tokens=1), before, n)
    _, got = run_mask_op(s, device)
    np.testing.assert_array_equal(got["decode_states"][0], after)
    np.testing.assert_array_equal(got["decode_states"][1], [3] * Ds)  # a prompt's row: untouched
    assert_states_equal(got, run_mask_ref(s)[1])


# FastDeploy's own unit test of this op (9018ccf74,
# tests/operators/test_update_attn_mask.py, lines 250-310), restated: each case
# builds cu_seqlens_q of bsz entries (exclusive prefix sums), a mask table
# counting 0, 1, 2, ... row after row, the cursor seeded with
# seq_lens_decoder, decode_states all -1 (or column 0 = 2 for the vision
# case), no rollback, and compares both outputs with its own model of the
# kernel. Our expected values are worked out by hand from that kernel.
FASTDEPLOY_MASK_TEST_CASES = {
    # name: (this_time, encoder, decoder, mask columns, decode_states columns,
    #        vision, expected odd entries, expected decode_states)
    "stop": ([1], [0], [0], 4, 2, False, [0], [[-1, -1]]),
    "prefill": ([3], [3], [0], 8, 4, False, [1, 2, 3], [[-1] * 4]),
    "vision generation": ([2], [2], [5], 8, 4, True, [7, 7], [[2, -1, -1, -1]]),
    "decode": ([2], [0], [7], 8, 6, False, [8, 9], [[0, 0, -1, -1, -1, -1]]),
    # Request 2 decodes one token: its row is left as it was.
    "mixed batch": ([2, 4, 1], [0, 4, 0], [5, 0, 1], 12, 2, False,
                    [6, 7, 13, 14, 15, 16, 2], [[0, 0], [-1, -1], [-1, -1]]),
}


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("case", sorted(FASTDEPLOY_MASK_TEST_CASES))
def test_fastdeploy_s_own_mask_op_cases(device, case):
    n, enc, dec, M, Ds, vision, ends, after = FASTDEPLOY_MASK_TEST_CASES[case]
    bsz, T = len(n), sum(n)
    s = {
        "ids_remove_padding": np.zeros(T, np.int64),
        "seq_lens_this_time": np.array(n, np.int32),
        "seq_lens_encoder": np.array(enc, np.int32),
        "seq_lens_decoder": np.array(dec, np.int32),
        "cu_seqlens_q": np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int32),
        "attn_mask_offsets_full": np.arange(bsz * M, dtype=np.int32).reshape(bsz, M),
        "attn_mask_offsets_decoder": np.array(dec, np.int32),
        "is_block_step": np.zeros(bsz, bool),
        "decode_states": np.full((bsz, Ds), -1, np.int32),
        "mask_rollback": np.zeros(bsz, np.int32),
    }
    if vision:
        s["decode_states"][:, 0] = 2
    out, got = run_mask_op(s, device)
    out = np.asarray(out)
    assert out[1::2].tolist() == ends and not out[0::2].any()
    np.testing.assert_array_equal(got["decode_states"], after)
    want_out, want = run_mask_ref(s)
    np.testing.assert_array_equal(out, want_out)
    assert_states_equal(got, want)


# ---------------------------------------------------------------------------
# A slot reused by an insert that never writes mask_rollback


def fastdeploy_mixed_insert(s, i, n):
    """FastDeploy's insert of a new n-token prompt on a mixed or prefill node:
    everything it writes, and no mask_rollback."""
    s["input_ids"][i, : n - 1] = 7
    s["pre_ids"][i] = -1
    s["stop_flags"][i] = False
    s["batch_drop"][i] = False
    s["seq_lens_encoder"][i] = n
    s["seq_lens_decoder"][i] = 0
    s["seq_lens_this_time"][i] = n
    s["step_idx"][i] = 0


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("splitwise", [False, True])
def test_a_slot_reused_by_a_fastdeploy_insert_starts_without_the_old_rollback(device, splitwise):
    k = 3
    s = fastdeploy_decode_node_state(np.random.default_rng(1), 2, k)
    s["mask_rollback"][:] = [0, 4]
    # The base model finished both requests: each stops, its KV length moving
    # into mask_rollback (the residue).
    s["base_model_stop_flags"][:] = True
    attrs = preprocess_attrs(k, truncate=True, v1=True)
    done = run_preprocess_op(s, attrs, device)
    residue = s["mask_rollback"] + s["seq_lens_decoder"]
    np.testing.assert_array_equal(done["mask_rollback"], residue)
    assert (residue > 0).all()
    # A new prompt in slot 1, inserted as FastDeploy does; the base prefilled it.
    fastdeploy_mixed_insert(done, 1, 6)
    done["base_model_stop_flags"][1] = False
    attrs = preprocess_attrs(1 if splitwise else k, truncate=True, splitwise=splitwise, v1=True)
    got = run_preprocess_op(done, attrs, device)
    assert_states_equal(got, run_preprocess_ref(done, attrs))
    assert got["mask_rollback"][1] == 0  # the prefill started afresh
    assert got["mask_rollback"][0] == residue[0]  # a stopped slot keeps its own


# ---------------------------------------------------------------------------
# Negative lengths in the mask op: FastDeploy's branches


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("E,S,runs", [(0, -2, False), (-1, 0, False), (-3, -1, False),
                                      (-1, 5, True), (0, 1, True)])
def test_mask_branches_on_lengths_as_fastdeploy(device, E, S, runs):
    """A prompt if E > 0, else a decode if S > 0, else nothing: a negative
    length (a transient rollback of FastDeploy's decode-node state) is not
    refused and writes nothing."""
    s = states.mask_state(np.random.default_rng(9), 3, branches=["decode"] * 3)
    s["seq_lens_encoder"][1], s["seq_lens_decoder"][1] = E, S
    out, got = run_mask_op(s, device)
    want_out, want = run_mask_ref(s)
    np.testing.assert_array_equal(out, want_out)
    assert_states_equal(got, want)
    q, n = int(s["cu_seqlens_q"][1]), int(s["seq_lens_this_time"][1])
    assert n > 0
    ends = out[2 * (q + np.arange(n)) + 1]
    if runs:
        assert (ends > 0).all() and got["mask_rollback"][1] == 0
    else:
        assert (ends == 0).all()
        for name in ("attn_mask_offsets_decoder", "mask_rollback", "decode_states"):
            np.testing.assert_array_equal(got[name][1], s[name][1], err_msg=name)


@pytest.mark.parametrize("device", WITH_GUARDED)
def test_a_slot_whose_draft_was_parked_starts_unparked(device):
    """The base finished a request while its draft was parked (is_block_step);
    FastDeploy's insert of the next prompt leaves the flag, and the mask op
    would skip that prompt: the prefill clears it."""
    k = 2
    s = fastdeploy_decode_node_state(np.random.default_rng(2), 2, k)
    s["is_block_step"][1] = True
    s["stop_flags"][1] = True
    fastdeploy_mixed_insert(s, 1, 5)
    attrs = preprocess_attrs(k, truncate=True, v1=True)
    got = run_preprocess_op(s, attrs, device)
    assert_states_equal(got, run_preprocess_ref(s, attrs))
    assert not got["is_block_step"][1] and not got["stop_flags"][1]
    assert got["seq_lens_this_time"][1] == 5


# ---------------------------------------------------------------------------
# The raw registered ops, called positionally as FastDeploy calls them: a
# wrong dtype or too few rows in any input is refused there too, unchanged

RAW_CASES = ([("preprocess", *c) for c in raw_refusal_cases(
                 DRAFT_MODEL_PREPROCESS, states.preprocess_state(np.random.default_rng(6), 3,
                                                                 num_model_step=2))]
             + [("mask", *c) for c in raw_refusal_cases(
                 UPDATE_ATTN_MASK_OFFSETS, states.mask_state(np.random.default_rng(6), 3))])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op,case", [c[:2] for c in RAW_CASES])
def test_the_raw_ops_refuse_a_wrong_dtype_or_too_few_rows_unchanged(device, op, case):
    _, _, s, message = next(c for c in RAW_CASES if c[:2] == (op, case))
    sig, attrs = ((DRAFT_MODEL_PREPROCESS, (2, False, False, True)) if op == "preprocess"
                  else (UPDATE_ATTN_MASK_OFFSETS, ()))
    assert_raw_refused(forms.load("rollback").library, sig, s, attrs, message, device)
