"""FastDeploy's shadow form (develop's 17-tensor draft_model_preprocess and
8-tensor update_attn_mask_offsets)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastdeploy_mtp import forms, ops, reference
from fastdeploy_mtp.harness import states
from fastdeploy_mtp.registration import differences, read_registered
from fastdeploy_mtp.signature import FORMS
import guarded
from helpers import DEVICES, assert_states_equal, to_numpy, to_tensors
from case_states import decode_states_case, shadow_decode_state
from raw_op import (assert_raw_alias_refused, assert_raw_refused, call_raw, raw_refusal_cases,
                    same_kind_pairs)

SIG = FORMS["shadow"]["draft_model_preprocess"]
MASK = FORMS["shadow"]["update_attn_mask_offsets"]
I32_MAX, I64_MAX, I64_MIN = 2**31 - 1, 2**63 - 1, -(2**63)


def shadow():
    return forms.load("shadow")


def run_op(state, k, splitwise=False, device="cpu"):
    t = to_tensors(state, device)
    shadow().draft_model_preprocess(**t, num_model_step=k, is_splitwise_prefill=splitwise)
    return to_numpy(t)


def run_ref(state, k, splitwise=False):
    s = states.copy_state(state)
    reference.draft_model_preprocess_shadow(s, num_model_step=k, is_splitwise_prefill=splitwise)
    return s


def decode_state(k=3, bsz=2):
    """`bsz` running decode requests, far from their length limit."""
    s = shadow_decode_state(k, bsz)
    s["input_ids"] = np.arange(bsz * 12, dtype=np.int64).reshape(bsz, 12)
    for i in range(bsz):
        s["seq_lens_decoder"][i] = 17  # the draft's own: not read
        s["step_idx"][i] = 3
    return s


def fastdeploy_test_state(rng, bsz):
    """The state FastDeploy's own op test draws (in our words): a mix of
    prefills and decodes, draft_tokens of 4 columns, accept_num in [1, 4],
    100 columns of input_ids, pre_ids and accept_tokens, the target's
    lengths and steps in [11, 100), max_dec_len 200 and num_model_step 10."""
    i64, i32 = np.int64, np.int32
    enc = rng.integers(0, 100, bsz).astype(i32)
    return {
        "draft_tokens": rng.integers(0, 100, (bsz, 4)).astype(i64),
        "input_ids": rng.integers(0, 100, (bsz, 100)).astype(i64),
        "stop_flags": np.zeros(bsz, bool),
        "seq_lens_this_time": rng.integers(0, 100, bsz).astype(i32),
        "seq_lens_encoder": enc,
        "seq_lens_decoder": rng.integers(0, 100, bsz).astype(i32),
        "step_idx": rng.integers(0, 100, bsz).astype(i64),
        "not_need_stop": np.zeros(1, bool),
        "pre_ids": rng.integers(0, 100, (bsz, 100)).astype(i64),
        "accept_tokens": rng.integers(0, 100, (bsz, 100)).astype(i64),
        "accept_num": rng.integers(1, 5, bsz).astype(i32),
        "target_model_seq_lens_encoder": enc.copy(),
        "target_model_seq_lens_decoder": rng.integers(11, 100, bsz).astype(i32),
        "target_model_step_idx": rng.integers(11, 100, bsz).astype(i64),
        "target_model_stop_flags": np.zeros(bsz, bool),
        "max_dec_len": np.full(bsz, 200, i64),
        "target_model_draft_tokens": np.zeros((bsz, 10), i64),
    }


# ---------------------------------------------------------------------------
# Registration and the positional calls FastDeploy makes


def test_registered_as_fastdeploy_registers_the_shadow_form():
    reg = read_registered("draft_model_preprocess_shadow")
    assert differences(SIG, reg) == []
    assert len(reg.inputs) == 17 and reg.inputs[15] == "max_dec_len"
    assert [a[0] for a in reg.attrs] == ["num_model_step", "is_splitwise_prefill"]
    assert reg.outputs == ("draft_tokens_out", "input_ids_out", "stop_flags_out",
                           "seq_lens_this_time_out", "seq_lens_encoder_out",
                           "seq_lens_decoder_out", "step_idx_out", "not_need_stop_out",
                           "pre_ids_out")
    mask = read_registered("update_attn_mask_offsets_shadow")
    assert differences(MASK, mask) == []
    assert len(mask.inputs) == 8 and "mask_rollback" not in mask.inputs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("splitwise", [False, True])
@pytest.mark.parametrize("bsz", [10, 1024, 1025])
def test_the_raw_op_called_positionally_as_fastdeploy_s_test_does(device, splitwise, bsz):
    """FastDeploy's kernel refuses more than 1024 requests; ours takes any batch."""
    s = fastdeploy_test_state(np.random.default_rng(bsz + splitwise), bsz)
    t = to_tensors(s, device)
    forms.load("shadow").library.draft_model_preprocess(*[t[n] for n in SIG.input_names], 10, splitwise)
    assert_states_equal(to_numpy(t), run_ref(s, 10, splitwise), f"bsz={bsz}")


@pytest.mark.parametrize("device", DEVICES)
def test_the_raw_mask_op_called_positionally_as_fastdeploy_does(device):
    s = states.shadow_mask_state(np.random.default_rng(2), 40)
    t = to_tensors(s, device)
    outs = forms.load("shadow").library.update_attn_mask_offsets(*[t[n] for n in MASK.input_names])
    want = states.copy_state(s)
    want_out = reference.update_attn_mask_offsets_shadow(want)
    out = outs[0] if isinstance(outs, (list, tuple)) else outs
    np.testing.assert_array_equal(out.numpy(), want_out)
    assert_states_equal(to_numpy(t), want)


# ---------------------------------------------------------------------------
# The rules, case by case


@pytest.mark.parametrize("device", DEVICES)
def test_a_decode_takes_its_state_from_the_target_model(device):
    k = 3
    s = decode_state(k)
    s["accept_tokens"][0, :2] = [71, 72]
    got = run_op(s, k, device=device)
    assert got["seq_lens_decoder"][0] == 40 - 2 and got["step_idx"][0] == 6 - 2
    assert got["seq_lens_this_time"][0] == 2 and not got["stop_flags"][0]
    assert got["draft_tokens"][0, :2].tolist() == [71, 72]
    assert got["pre_ids"][0, 4:6].tolist() == [71, 72]  # the columns before the target step
    assert (got["target_model_draft_tokens"][:, 1:] == -1).all()
    assert got["not_need_stop"][0]
    assert_states_equal(got, run_ref(s, k))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("splitwise", [False, True])
def test_a_prefill_places_the_first_token_at_e_minus_1(device, splitwise):
    k = 2
    s = decode_state(k)
    s["seq_lens_encoder"][0] = 5
    s["accept_tokens"][0, 0] = 99
    got = run_op(s, k, splitwise, device)
    assert got["input_ids"][0, 4] == 99 and got["pre_ids"][0, 0] == 99
    assert got["seq_lens_this_time"][0] == 5 and got["step_idx"][0] == 6 - 1
    assert got["seq_lens_encoder"][0] == 5 and got["seq_lens_decoder"][0] == 17  # kept
    assert_states_equal(got, run_ref(s, k, splitwise))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("splitwise", [False, True])
@pytest.mark.parametrize("room,skipped", [(0, True), (-5, True), (1, False)])
def test_a_request_at_its_length_limit_is_skipped_off_a_prefill_node(device, splitwise, room,
                                                                       skipped):
    """Skipped when target_model_step_idx + num_model_step >= max_dec_len, but
    on a prefill node, which runs every request the target model runs."""
    k = 3
    s = decode_state(k)
    s["max_dec_len"][0] = 6 + k + room
    got = run_op(s, k, splitwise, device)
    if skipped and not splitwise:
        assert got["stop_flags"][0]
        assert (got["seq_lens_this_time"][0], got["seq_lens_decoder"][0],
                got["seq_lens_encoder"][0], got["step_idx"][0]) == (0, 0, 0, 0)
    else:
        assert not got["stop_flags"][0] and got["seq_lens_decoder"][0] == 38
    assert (got["target_model_draft_tokens"][:, 1:] == -1).all()  # on every node
    assert_states_equal(got, run_ref(s, k, splitwise))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("splitwise", [False, True])
def test_a_stopped_target_skips_the_request_on_every_node(device, splitwise):
    k = 2
    s = decode_state(k, bsz=1)
    s["target_model_stop_flags"][0] = True
    got = run_op(s, k, splitwise, device)
    assert got["stop_flags"][0] and got["step_idx"][0] == 0 and not got["not_need_stop"][0]
    assert_states_equal(got, run_ref(s, k, splitwise))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("step,skipped", [(I64_MAX, True), (I64_MAX - 2, True),
                                          (I64_MAX - 3, True), (I64_MAX - 4, False)])
def test_the_length_limit_compare_cannot_overflow(device, step, skipped):
    """target step + k past INT64_MAX is at the limit whatever max_dec_len is."""
    k = 3
    s = decode_state(k, bsz=1)
    s["accept_num"][0] = 0
    s["target_model_step_idx"][0] = step
    s["max_dec_len"][0] = I64_MAX
    got = run_op(s, k, device=device)
    assert bool(got["stop_flags"][0]) == skipped
    assert got["step_idx"][0] == (0 if skipped else step)
    assert_states_equal(got, run_ref(s, k))


# ---------------------------------------------------------------------------
# Against the reference


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("splitwise", [False, True])
def test_matches_the_reference(device, k, splitwise):
    rng = np.random.default_rng(100 * k + splitwise)
    for bsz in (1, 7, 64, 300, 1100):
        s = states.shadow_state(rng, bsz, num_model_step=k, is_splitwise_prefill=splitwise,
                                extra_rows=2)
        assert_states_equal(run_op(s, k, splitwise, device), run_ref(s, k, splitwise),
                            f"bsz={bsz}")


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("splitwise", [False, True])
def test_the_guarded_driver_matches_the_reference(k, splitwise):
    """The CPU driver with every tensor between inaccessible pages
    (tests/guarded.py): no read or write outside a tensor, on either side."""
    rng = np.random.default_rng(7 * k + splitwise)
    for bsz in (1, 9, 200):
        s = states.shadow_state(rng, bsz, num_model_step=k, is_splitwise_prefill=splitwise,
                                extra_rows=1)
        got = states.copy_state(s)
        guarded.call(SIG, got, dict(num_model_step=k, is_splitwise_prefill=splitwise))
        assert_states_equal(got, run_ref(s, k, splitwise), f"bsz={bsz}")
        m = states.shadow_mask_state(rng, bsz, padding_tokens=2)
        got, want = states.copy_state(m), states.copy_state(m)
        out = guarded.call(MASK, got)
        np.testing.assert_array_equal(out, reference.update_attn_mask_offsets_shadow(want))
        assert_states_equal(got, want)


@pytest.mark.parametrize("case", ["prefill_step", "decoder", "window", "accept_num", "column",
                                  "flush"])
def test_the_guarded_driver_refuses_at_the_edges_and_writes_inside_at_them(case):
    """Each write at the last column it may take is made, one past it is
    refused; either way nothing lands outside a tensor."""
    k = 3
    s = decode_state(k)
    P, L = s["pre_ids"].shape[1], s["input_ids"].shape[1]
    bad = True
    if case == "prefill_step":
        s["seq_lens_encoder"][1], s["target_model_step_idx"][1] = 4, I64_MIN
        s["max_dec_len"][1] = I64_MAX
    elif case == "decoder":
        s["target_model_seq_lens_decoder"][1] = -(2**31)
    elif case == "window":
        s["target_model_step_idx"][1] = P + 1  # the window's end one past pre_ids
    elif case == "accept_num":
        s["accept_num"][1] = min(s["accept_tokens"].shape[1], s["draft_tokens"].shape[1]) + 1
    elif case == "column":
        s["seq_lens_encoder"][1] = L + 1
    else:  # at the edges, all inside: the first token in the last column, the window flush
        s["seq_lens_encoder"][0], s["target_model_step_idx"][1] = L, P
        bad = False
    got = states.copy_state(s)
    attrs = dict(num_model_step=k, is_splitwise_prefill=False)
    if bad:
        with pytest.raises(ops.BadInputError, match="request 1"):
            guarded.call(SIG, got, attrs)
        assert_states_equal(got, s)
    else:
        guarded.call(SIG, got, attrs)
        assert got["input_ids"][0, L - 1] == s["accept_tokens"][0, 0]
        assert_states_equal(got, run_ref(s, k))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 40), k=st.integers(1, 5),
       splitwise=st.booleans())
def test_property_matches_the_reference(seed, bsz, k, splitwise):
    s = states.shadow_state(np.random.default_rng(seed), bsz, num_model_step=k,
                            is_splitwise_prefill=splitwise, column_vectors=True)
    assert_states_equal(run_op(s, k, splitwise), run_ref(s, k, splitwise))


@pytest.mark.parametrize("device", DEVICES)
def test_the_mask_op_numbers_decode_tokens_from_seq_lens_decoder(device):
    s = states.shadow_mask_state(np.random.default_rng(9), 3,
                                 branches=["decode", "prompt", "decode"])
    s["seq_lens_decoder"][0], s["seq_lens_this_time"][0] = 30, 3
    s["cu_seqlens_q"] = np.cumsum([0] + list(s["seq_lens_this_time"])).astype(np.int32)
    s["ids_remove_padding"] = np.zeros(int(s["cu_seqlens_q"][-1]), np.int64)
    t = to_tensors(s, device)
    out = shadow().update_attn_mask_offsets(**t).numpy()
    assert out[1:6:2].tolist() == [31, 32, 33]
    want = states.copy_state(s)
    np.testing.assert_array_equal(out, reference.update_attn_mask_offsets_shadow(want))
    assert_states_equal(to_numpy(t), want)


SHADOW_DECODE_STATE_CASES = [
    # (row before, tokens n, row after). FastDeploy 7a6c28781,
    # custom_ops/gpu_ops/update_attn_mask_offsets.cu, the decode branch: every
    # decode rewrites its row; a column of one of its tokens becomes 0 unless
    # it holds 1, which becomes -1 like every column after its tokens.
    ([-1, -1], 1, [0, -1]),
    ([1, 1, 2], 1, [-1, -1, -1]),
    ([1, 2], 0, [-1, -1]),
    ([0, 1, 3], 2, [0, -1, -1]),
    ([2, 3, 1, 1], 3, [0, 0, -1, -1]),
    ([1, 3], 3, [-1, 0]),            # more tokens than columns: only the row's own
]


@pytest.mark.parametrize("device", DEVICES + ["guarded"])
@pytest.mark.parametrize("before,n,after", SHADOW_DECODE_STATE_CASES)
def test_decode_states_follow_the_eight_tensor_op(device, before, n, after):
    Ds = len(before)
    s = decode_states_case(states.shadow_mask_state(
        np.random.default_rng(5), 2, branches=["decode", "prompt"], prompt_tokens=1), before, n)
    want = states.copy_state(s)
    want_out = reference.update_attn_mask_offsets_shadow(want)
    if device == "guarded":
        got = states.copy_state(s)
        out = guarded.call(MASK, got)
    else:
        t = to_tensors(s, device)
        out = shadow().update_attn_mask_offsets(**t).numpy()
        got = to_numpy(t)
    np.testing.assert_array_equal(got["decode_states"][0], after)
    np.testing.assert_array_equal(got["decode_states"][1], [3] * Ds)  # a prompt's row: untouched
    np.testing.assert_array_equal(out, want_out)
    assert_states_equal(got, want)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 30), short_cu=st.booleans())
def test_property_the_mask_op_matches_the_reference(seed, bsz, short_cu):
    s = states.shadow_mask_state(np.random.default_rng(seed), bsz, short_cu=short_cu,
                                 column_vectors=True, padding_tokens=seed % 3)
    t = to_tensors(s)
    out = shadow().update_attn_mask_offsets(**t).numpy()
    want = states.copy_state(s)
    np.testing.assert_array_equal(out, reference.update_attn_mask_offsets_shadow(want))
    assert_states_equal(to_numpy(t), want)


# ---------------------------------------------------------------------------
# Refused, with nothing changed


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case,message", [
    ("prefill_step", "draft_model_preprocess: request 1: step_idx: the new value "
                     "target_model_step_idx - 1 = -9223372036854775808 - 1 leaves the int64 "
                     "range"),
    ("decoder", "draft_model_preprocess: request 1: seq_lens_decoder: the new value "
                "-2147483650 leaves the int32 range (seq_lens_decoder = 17, "
                "target_model_seq_lens_decoder = -2147483648, accept_num = 2)"),
    ("window", "draft_model_preprocess: request 1: pre_ids: the 2 accepted tokens (accept_num) "
               "go to the columns before target_model_step_idx = 1, outside pre_ids'"),
    ("accept_num", "draft_model_preprocess: request 1: accept_num: -1 is outside [0, min("),
    ("column", "draft_model_preprocess: request 1: input_ids: the first token goes to column"),
    ("max_dec_len_dtype", "draft_model_preprocess: max_dec_len must be int64, got int32"),
])
def test_refused_whole_and_unchanged(device, case, message):
    k = 3
    s = decode_state(k)
    if case == "prefill_step":
        s["seq_lens_encoder"][1] = 4
        s["target_model_step_idx"][1] = I64_MIN
        s["max_dec_len"][1] = I64_MAX
    elif case == "decoder":
        s["target_model_seq_lens_decoder"][1] = -(2**31)
    elif case == "window":
        s["target_model_step_idx"][1] = 1
    elif case == "accept_num":
        s["accept_num"][1] = -1
    elif case == "column":
        s["seq_lens_encoder"][1] = s["input_ids"].shape[1] + 1
    else:
        s["max_dec_len"] = s["max_dec_len"].astype(np.int32)
    t = to_tensors(s, device)
    with pytest.raises(ops.BadInputError) as e:
        shadow().draft_model_preprocess(**t, num_model_step=k, is_splitwise_prefill=False)
    assert str(e.value).splitlines()[0].startswith(message), str(e.value)
    assert_states_equal(to_numpy(t), s)
    if case != "max_dec_len_dtype":
        with pytest.raises(ops.BadInputError):
            run_ref(s, k)


@pytest.mark.parametrize("device", DEVICES)
def test_a_mask_end_past_int32_is_refused_unchanged(device):
    s = states.shadow_mask_state(np.random.default_rng(1), 2, branches=["decode", "decode"])
    s["seq_lens_this_time"][:] = [1, 2]
    s["cu_seqlens_q"] = np.array([0, 1, 3], np.int32)
    s["ids_remove_padding"] = np.zeros(3, np.int64)
    s["seq_lens_decoder"][1] = I32_MAX - 1
    t = to_tensors(s, device)
    with pytest.raises(ops.BadInputError, match=r"request 1: attn_mask_offsets: the offsets "
                                                r"would reach 2147483646 \+ seq_lens_this_time 2"):
        shadow().update_attn_mask_offsets(**t)
    assert_states_equal(to_numpy(t), s)
    with pytest.raises(ops.BadInputError):
        reference.update_attn_mask_offsets_shadow(states.copy_state(s))


# The raw registered op, called positionally as FastDeploy's proposer calls
# it: its checks must hold there too, not only behind our wrapper.


def raw_call(t, k=3, splitwise=False):
    call_raw(forms.load("shadow").library, SIG, t, (k, splitwise))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [0, -1, -(2**31)])
def test_the_raw_op_refuses_num_model_step_below_1_unchanged(device, k):
    assert_raw_refused(forms.load("shadow").library, SIG, decode_state(3), (k, False),
                       f"num_model_step must be >= 1, got {k}", device)


@pytest.mark.parametrize("device", DEVICES)
def test_the_raw_op_takes_num_model_step_at_int32_max(device):
    """Every request passes its length limit (compared without a sum that
    could wrap) and is skipped, as FastDeploy's kernel skips it."""
    s = decode_state(3)
    t = to_tensors(s, device)
    raw_call(t, I32_MAX)
    got = to_numpy(t)
    assert_states_equal(got, run_ref(s, I32_MAX))
    assert got["stop_flags"].all() and not got["not_need_stop"][0]


RAW_CASES = raw_refusal_cases(SIG, decode_state(3))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", [c[0] for c in RAW_CASES])
def test_the_raw_op_refuses_a_wrong_dtype_or_too_few_rows_unchanged(device, case):
    _, s, message = next(c for c in RAW_CASES if c[0] == case)
    assert_raw_refused(forms.load("shadow").library, SIG, s, (3, False), message, device)


RAW_MASK_CASES = raw_refusal_cases(MASK, states.shadow_mask_state(np.random.default_rng(4), 3))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", [c[0] for c in RAW_MASK_CASES])
def test_the_raw_mask_op_refuses_a_wrong_dtype_or_too_few_rows_unchanged(device, case):
    _, s, message = next(c for c in RAW_MASK_CASES if c[0] == case)
    assert_raw_refused(forms.load("shadow").library, MASK, s, (), message, device)


# The one input this form never reads (FastDeploy e87ce4b8c's kernel takes it
# and leaves it alone): it may alias anything.
NOT_READ = ("target_model_seq_lens_encoder",)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("written", ["seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder"])
def test_the_raw_op_lets_the_unread_input_alias_a_written_one(device, written):
    s = decode_state(3)
    s["seq_lens_encoder"][0] = 5  # one prefill, one decode
    t = to_tensors(s, device)
    t[NOT_READ[0]] = t[written]
    raw_call(t)
    got = to_numpy(t)
    want = run_ref(s, 3)
    want[NOT_READ[0]] = want[written]
    assert_states_equal(got, want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("written,other",
                         same_kind_pairs(SIG, decode_state(3, bsz=1), not_read=NOT_READ))
def test_the_raw_op_refuses_a_written_tensor_passed_twice_unchanged(device, written, other):
    """One request, so that not_need_stop's one row is every vector's."""
    assert_raw_alias_refused(forms.load("shadow").library, SIG, decode_state(3, bsz=1), written, other,
                             (3, False), device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("value", [I32_MAX, -(2**31), 0, -1])
def test_a_decode_never_reads_the_draft_s_own_lengths(device, value):
    """A decode's seq_lens_decoder and step_idx come from the target model:
    whatever the draft's own hold (int32 and int64 extremes included) is
    overwritten, never refused."""
    s = decode_state(3)
    s["seq_lens_decoder"][:] = value
    s["step_idx"][:] = I64_MIN if value < 0 else I64_MAX
    t = to_tensors(s, device)
    raw_call(t)
    got = to_numpy(t)
    assert_states_equal(got, run_ref(s, 3))
    assert got["seq_lens_decoder"].tolist() == [38, 38] and got["step_idx"].tolist() == [4, 4]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["none", "overlap", "short", "grad"])
def test_max_dec_len_hostile_arguments_are_refused_unchanged(device, case):
    k = 2
    s = decode_state(k, bsz=3)
    t = to_tensors(s, device)
    if case == "none":
        t["max_dec_len"] = None
        words = "max_dec_len"
    elif case == "overlap":
        t["max_dec_len"] = t["step_idx"]  # a written tensor passed again
        words = "overlap"
    elif case == "short":
        t["max_dec_len"] = to_tensors({"x": s["max_dec_len"][:2]}, device)["x"]
        words = "max_dec_len"
    else:
        t["target_model_draft_tokens"].stop_gradient = False
        words = "requires grad"
    before = {n: (v.numpy().copy() if v is not None else None) for n, v in t.items()}
    with pytest.raises(ops.BadInputError, match=words):
        shadow().draft_model_preprocess(**t, num_model_step=k, is_splitwise_prefill=False)
    for n, v in t.items():
        if v is not None and before[n] is not None:
            np.testing.assert_array_equal(v.numpy(), before[n], err_msg=n)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", SIG.written)
def test_every_written_tensor_requiring_grad_is_refused_unchanged(device, name):
    """target_model_draft_tokens too, which FastDeploy writes without declaring it."""
    k = 2
    s = decode_state(k, bsz=3)
    t = to_tensors(s, device)
    t[name].stop_gradient = False
    with pytest.raises(ops.BadInputError, match=f"{name} is written in place but requires grad"):
        shadow().draft_model_preprocess(**t, num_model_step=k, is_splitwise_prefill=False)
    assert_states_equal(to_numpy(t), s)


# A read view is made contiguous by Paddle before the op runs, with Paddle's
# own kernel: on the CPU only, since Paddle 2.6.2's GPU kernels have no image
# for every GPU (the H200's among them) and the op would then read garbage.
@pytest.mark.parametrize("device,name,written",
                         [(d, "seq_lens_decoder", True) for d in DEVICES]
                         + [("cpu", "max_dec_len", False)])
def test_a_non_contiguous_view_is_refused_where_written_and_taken_where_read(device, name,
                                                                             written):
    import paddle

    from helpers import place_of

    k = 2
    s = decode_state(k, bsz=3)
    t = to_tensors(s, device)
    wide = np.zeros(6, s[name].dtype)
    wide[::2] = s[name]
    t[name] = paddle.to_tensor(wide, place=place_of(device))[::2]
    if not hasattr(t[name], "is_contiguous") or t[name].is_contiguous():
        pytest.skip("this Paddle copies a strided slice: no non-contiguous views")
    call = lambda: shadow().draft_model_preprocess(**t, num_model_step=k,  # noqa: E731
                                                   is_splitwise_prefill=False)
    if written:
        with pytest.raises(ops.BadInputError, match=f"{name} is written in place but is a "
                                                    "non-contiguous view"):
            call()
        assert_states_equal(to_numpy(t), s)
    else:
        call()
        assert_states_equal(to_numpy(t), run_ref(s, k))


# ---------------------------------------------------------------------------
# In the loop: FastDeploy's runner of this version, the tiny model and the oracle


def run_loop(**kw):
    from fastdeploy_mtp.harness import simulate
    from helpers import sim_args

    a = sim_args(**{"steps": 40, "batch": 6, "runner": "fastdeploy", "form": "shadow",
                    "draft_model": "tiny", "image_prob": 0.5, "seed": 1, **kw})
    return simulate.run(a, legacy=False, print_rows=False)


@pytest.mark.parametrize("mode", ["mixed", "pd"])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_the_loop_is_exact_through_end_tokens_block_steps_and_resumes(mode, k):
    """The draft's state is the target model's every step, so nothing a draft
    end token, a block step or a decode-node preset leaves behind can move it."""
    t = run_loop(mode=mode, num_model_steps=k, draft_eos_prob=0.3, block_prob=0.2,
                 finish_prob=0.1)
    assert t.model.tokens > 100 and t.rolled_back > 20
    assert t.violations == 0, t.first_violation
    assert t.model.disagreements == 0, t.model.first
    assert t.outside.total == 0, t.outside.first


def test_requests_at_their_length_limit_stop_drafting_and_stay_exact():
    t = run_loop(mode="mixed", num_model_steps=3, max_dec_len=6, steps=30)
    assert t.violations == 0 and t.model.disagreements == 0, t.first_violation
