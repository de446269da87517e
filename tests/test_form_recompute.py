"""FastDeploy's recompute form of draft_model_preprocess (22 tensors)."""

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
from case_states import recompute_decode_state
from fastdeploy_forms import run_form_preprocess
from raw_op import (assert_raw_alias_refused, assert_raw_refused, call_raw, raw_refusal_cases,
                    same_kind_pairs)

SIG = FORMS["recompute"]["draft_model_preprocess"]
I32_MAX, I64_MAX = 2**31 - 1, 2**63 - 1


def attrs_of(k, truncate=False, splitwise=False, v1=True):
    return dict(num_model_step=k, truncate_first_token=truncate, splitwise_prefill=splitwise,
                kvcache_scheduler_v1=v1)


def run_op(state, attrs, device):
    return run_form_preprocess("recompute", state, attrs, device)


def run_ref(state, attrs):
    s = {k: v.copy() for k, v in state.items()}
    reference.draft_model_preprocess_recompute(s, **attrs)
    return s


def decode_state(k=3, bsz=2):
    return recompute_decode_state(k, bsz)


# ---------------------------------------------------------------------------
# Registration and the positional call FastDeploy makes


def test_registered_as_fastdeploy_registers_the_recompute_form():
    reg = read_registered("draft_model_preprocess_recompute")
    assert differences(SIG, reg) == []
    assert len(reg.inputs) == 22 and reg.inputs[12] == "recompute_token_num"
    assert reg.outputs == ("draft_tokens_out", "input_ids_out", "stop_flags_out",
                           "seq_lens_this_time_out", "seq_lens_encoder_out",
                           "seq_lens_decoder_out", "step_idx_out", "not_need_stop_out",
                           "batch_drop_out", "pre_ids_out")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_the_raw_op_called_positionally_as_fastdeploy_does(device, k):
    s = states.recompute_state(np.random.default_rng(k), 24, num_model_step=k)
    attrs = attrs_of(k)
    t = to_tensors(s, device)
    forms.load("recompute").library.draft_model_preprocess(*[t[n] for n in SIG.input_names], k, False, False,
                                               True)
    assert_states_equal(to_numpy(t), run_ref(s, attrs), f"k={k}")


# ---------------------------------------------------------------------------
# The rules, case by case


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("recompute,base_n,r", [
    (2, 5, 2),   # the base fed k+2 tokens: all k-1 recomputed
    (2, 3, 1),   # the base fed 3: only 1
    (2, 2, 0),   # the base fed 2 or fewer: none
    (2, 0, 0),
    (0, 5, 0),   # a decode node's first step: 0
    (6, 5, 3),   # more asked than the base fed: base_n - 2
    (-1, 5, -1),  # a negative count steps forward, as FastDeploy's min does
])
def test_a_decode_rolls_back_what_it_recomputes(device, recompute, base_n, r):
    k = 3
    s = decode_state(k)
    s["recompute_token_num"][0] = recompute
    s["base_model_seq_lens_this_time"][0] = base_n
    s["mask_rollback"][0] = 4
    got = run_op(s, attrs_of(k), device)
    assert got["seq_lens_decoder"][0] == 40 - r
    assert got["step_idx"][0] == 30 - r
    assert got["mask_rollback"][0] == 4 + r
    assert got["recompute_token_num"][0] == k - 1
    assert_states_equal(got, run_ref(s, attrs_of(k)))


@pytest.mark.parametrize("device", DEVICES)
def test_a_stopped_draft_resyncs_from_the_base_and_still_adds_r(device):
    k = 4
    s = decode_state(k)
    s["stop_flags"][0] = True
    s["recompute_token_num"][0] = 3
    s["base_model_seq_lens_this_time"][0] = 4
    s["base_model_seq_lens_decoder"][0] = 57
    s["accept_num"][0] = 2
    s["mask_rollback"][0] = 1
    got = run_op(s, attrs_of(k), device)
    assert got["seq_lens_decoder"][0] == 57 - 2
    assert got["step_idx"][0] == 5 - 2
    assert got["mask_rollback"][0] == 1 + 2  # r = min(3, 4 - 2), not the change of the length
    assert got["recompute_token_num"][0] == k - 1
    assert not got["stop_flags"][0]
    assert_states_equal(got, run_ref(s, attrs_of(k)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("splitwise", [False, True])
def test_a_prefill_keeps_mask_rollback_and_is_block_step(device, splitwise):
    """FastDeploy's recompute form does not start a prefill's mask history
    afresh (the rollback form does): a drop-in keeps its rules."""
    k = 2
    s = decode_state(k)
    s["seq_lens_encoder"][0] = 5
    s["mask_rollback"][0] = 7
    s["is_block_step"][0] = True
    s["recompute_token_num"][0] = 0
    got = run_op(s, attrs_of(1 if splitwise else k, splitwise=splitwise), device)
    assert got["mask_rollback"][0] == 7
    assert got["is_block_step"][0]
    assert got["recompute_token_num"][0] == 0
    assert got["seq_lens_this_time"][0] == 6
    assert_states_equal(got, run_ref(s, attrs_of(1 if splitwise else k, splitwise=splitwise)))


@pytest.mark.parametrize("device", DEVICES)
def test_a_stop_leaves_mask_rollback_and_recompute_alone(device):
    k = 3
    s = decode_state(k)
    s["base_model_stop_flags"][0] = True
    s["mask_rollback"][0] = 5
    s["recompute_token_num"][0] = 1
    got = run_op(s, attrs_of(k), device)
    assert got["mask_rollback"][0] == 5 and got["recompute_token_num"][0] == 1
    assert got["seq_lens_decoder"][0] == 0 and got["stop_flags"][0]


# ---------------------------------------------------------------------------
# Against the reference, every branch and attribute


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("truncate", [False, True])
@pytest.mark.parametrize("splitwise", [False, True])
@pytest.mark.parametrize("v1", [False, True])
def test_matches_the_reference(device, k, truncate, splitwise, v1):
    rng = np.random.default_rng(1000 * k + 100 * truncate + 10 * splitwise + v1)
    for bsz in (1, 7, 64, 300):
        s = states.recompute_state(rng, bsz, num_model_step=k, splitwise_prefill=splitwise,
                                   truncate_first_token=truncate, extra_rows=2)
        attrs = attrs_of(k, truncate, splitwise, v1)
        assert_states_equal(run_op(s, attrs, device), run_ref(s, attrs), f"bsz={bsz}")


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("splitwise", [False, True])
def test_the_guarded_driver_matches_the_reference(k, splitwise):
    """The CPU driver with every tensor between inaccessible pages
    (tests/guarded.py): no read or write outside a tensor, on either side."""
    rng = np.random.default_rng(11 * k + splitwise)
    for bsz in (1, 9, 200):
        s = states.recompute_state(rng, bsz, num_model_step=k, splitwise_prefill=splitwise,
                                   extra_rows=1)
        attrs = attrs_of(k, splitwise=splitwise)
        got = states.copy_state(s)
        guarded.call(SIG, got, attrs)
        assert_states_equal(got, run_ref(s, attrs), f"bsz={bsz}")


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 40), k=st.integers(1, 5),
       v1=st.booleans(), truncate=st.booleans())
def test_property_matches_the_reference(seed, bsz, k, v1, truncate):
    rng = np.random.default_rng(seed)
    s = states.recompute_state(rng, bsz, num_model_step=k, truncate_first_token=truncate,
                               column_vectors=True)
    attrs = attrs_of(k, truncate, False, v1)
    assert_states_equal(run_op(s, attrs, "cpu"), run_ref(s, attrs))


# ---------------------------------------------------------------------------
# Refused, with nothing changed


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case,message", [
    ("step_up", "draft_model_preprocess: request 1: step_idx: the new value step_idx - "
                "recomputed tokens = 9223372036854775807 - -1 leaves the int64 range"),
    ("step_down", "draft_model_preprocess: request 1: step_idx: the new value step_idx - "
                  "recomputed tokens = -9223372036854775808 - 2 leaves the int64 range"),
    ("rollback", "draft_model_preprocess: request 1: mask_rollback: 2147483647 + recomputed "
                 "tokens 2 leaves the int32 range"),
    ("decoder", "draft_model_preprocess: request 1: seq_lens_decoder: the rolled-back value "
                "seq_lens_decoder - recomputed tokens = 2147483647 - -1 = 2147483648 leaves "
                "the int32 range"),
    ("recompute_dtype", "draft_model_preprocess: recompute_token_num must be int32, got int64"),
])
def test_refused_whole_and_unchanged(device, case, message):
    k = 3
    s = decode_state(k)
    s["base_model_seq_lens_decoder"][1] = 9
    s["base_model_seq_lens_this_time"][1] = 4
    s["recompute_token_num"][1] = 2
    if case == "step_up":
        s["recompute_token_num"][1] = -1
        s["step_idx"][1] = I64_MAX
    elif case == "step_down":
        s["step_idx"][1] = -(2**63)
    elif case == "rollback":
        s["mask_rollback"][1] = I32_MAX
    elif case == "decoder":
        s["recompute_token_num"][1] = -1
        s["seq_lens_decoder"][1] = I32_MAX
    else:
        s["recompute_token_num"] = s["recompute_token_num"].astype(np.int64)
    t = to_tensors(s, device)
    with pytest.raises(ops.BadInputError) as e:
        forms.load("recompute").draft_model_preprocess(**t, **attrs_of(k))
    assert str(e.value).splitlines()[0].startswith(message), str(e.value)
    assert_states_equal(to_numpy(t), s)
    if case != "recompute_dtype":
        with pytest.raises(ops.BadInputError):
            run_ref(s, attrs_of(k))


def test_the_mask_op_is_the_same_in_this_form():
    s = states.mask_state(np.random.default_rng(4), 9)
    want = {k: v.copy() for k, v in s.items()}
    want_out = reference.update_attn_mask_offsets(want)
    t = to_tensors(s)
    out = forms.load("recompute").update_attn_mask_offsets(**t)
    np.testing.assert_array_equal(out.numpy(), want_out)
    assert_states_equal(to_numpy(t), want)


# ---------------------------------------------------------------------------
# In the loop: FastDeploy's runner of this version, the tiny model and the oracle


def run_loop(**kw):
    from fastdeploy_mtp.harness import simulate
    from helpers import sim_args

    a = sim_args(**{"steps": 40, "batch": 6, "runner": "fastdeploy", "form": "recompute",
                    "draft_model": "tiny", "image_prob": 0.5, "seed": 1, **kw})
    return simulate.run(a, legacy=False, print_rows=False)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_the_loop_is_exact_while_no_draft_stops_early_or_parks(k):
    """Every decode takes the normal branch (no end token, no block step, no
    draft at its length limit): seq_lens_decoder and the mask cursor both
    roll back by r."""
    t = run_loop(mode="mixed", num_model_steps=k, draft_eos_prob=0.0, block_prob=0.0,
                 max_dec_len=400)
    assert t.model.tokens > 200 and t.rolled_back > 20
    assert t.violations == 0, t.first_violation
    assert t.model.disagreements == 0, t.model.first


@pytest.mark.parametrize("k", [2, 3, 4])
def test_a_resumed_draft_moves_the_cursor_by_r_not_by_the_positions(k):
    """A draft parked by a block step re-syncs seq_lens_decoder from the base
    model when the base model resumes, but the cursor rolls back by r all the
    same (0 where the base model decodes its last token alone): the mask ends
    drift from the KV positions."""
    t = run_loop(mode="mixed", num_model_steps=k, draft_eos_prob=0.0)
    assert t.mask_violations > 0 and t.align_violations == 0, t.first_violation
    assert t.model.disagreements > 0


@pytest.mark.parametrize("k", [2, 3, 4])
def test_a_draft_stopped_by_an_end_token_resyncs_right(k):
    """FastDeploy's draft update (9018ccf74, the runner the replay drives
    this form with) leaves a draft's end token among the base model's draft
    tokens, so base_model_seq_lens_this_time - 2 is the change of
    seq_lens_decoder at the re-sync, and r rolls the cursor back by exactly
    that: with end tokens and length limits but no block step the loop is
    exact."""
    t = run_loop(mode="mixed", num_model_steps=k, block_prob=0.0, draft_eos_prob=0.2,
                 max_dec_len=20)
    assert t.model.tokens > 200
    assert t.violations == 0, t.first_violation
    assert t.model.disagreements == 0, t.model.first


@pytest.mark.parametrize("k", [1, 3])
def test_fastdeploy_s_decode_node_preset_is_exact_while_no_draft_resyncs(k):
    """FastDeploy 9018ccf74's decode-node insert (fastdeploy/spec_decode/mtp.py
    lines 559-574: the cursor at the first generated token's offset + 1,
    recompute_token_num = 0, mask_rollback = 1): with no re-sync, the draft's
    mask and KV positions stay exact on a decode node."""
    t = run_loop(mode="pd", num_model_steps=k, draft_eos_prob=0.0, block_prob=0.0,
                 max_dec_len=400)
    assert t.model.tokens > 200 and t.rolled_back > 20
    assert t.violations == 0, t.first_violation
    assert t.model.disagreements == 0, t.model.first


def test_a_parked_flag_never_reaches_the_next_prompt_s_mask():
    """FastDeploy's proposer passes its batch_drop where the op declares
    is_block_step (9018ccf74: mtp.py lines 766-767 against cpp_extensions.cc
    lines 887-888), so a draft parked by a block step is parked in a buffer
    every insert clears, and a prefill that keeps the op's is_block_step never
    skips the next prompt's mask: k = 1 with block steps stays exact."""
    t = run_loop(mode="mixed", num_model_steps=1, draft_eos_prob=0.0, block_prob=0.2,
                 finish_prob=0.1, steps=60)
    assert t.model.tokens > 200
    assert t.violations == 0, t.first_violation
    assert t.model.disagreements == 0, t.model.first


# ---------------------------------------------------------------------------
# Hostile arguments of the form's own tensor


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["none", "overlap", "grad", "short", "base_dtype"])
def test_recompute_token_num_hostile_arguments_are_refused_unchanged(device, case):
    k = 2
    s = decode_state(k, bsz=3)
    t = to_tensors(s, device)
    if case == "none":
        t["recompute_token_num"] = None
        words = "recompute_token_num"
    elif case == "overlap":
        t["recompute_token_num"] = t["mask_rollback"]  # one tensor passed twice
        words = "overlap"
    elif case == "grad":
        t["recompute_token_num"].stop_gradient = False
        words = "requires grad"
    elif case == "short":
        t["recompute_token_num"] = to_tensors({"x": s["recompute_token_num"][:2]}, device)["x"]
        words = "recompute_token_num"
    else:
        t["base_model_seq_lens_this_time"] = to_tensors(
            {"x": s["base_model_seq_lens_this_time"].astype(np.int64)}, device)["x"]
        words = "base_model_seq_lens_this_time must be int32"
    before = {n: (v.numpy().copy() if v is not None else None) for n, v in t.items()}
    with pytest.raises(ops.BadInputError, match=words):
        forms.load("recompute").draft_model_preprocess(**t, **attrs_of(k))
    for n, v in t.items():
        if v is not None and before[n] is not None:
            np.testing.assert_array_equal(v.numpy(), before[n], err_msg=n)


# ---------------------------------------------------------------------------
# The raw registered op, called positionally as FastDeploy's proposer calls it


def raw_call(t, k=3):
    call_raw(forms.load("recompute").library, SIG, t, attrs_of(k).values())


# Inputs this form never reads: they may alias anything.
NOT_READ = ("base_model_seq_lens_encoder",)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("written,other",
                         same_kind_pairs(SIG, decode_state(3, bsz=1), not_read=NOT_READ))
def test_the_raw_op_refuses_a_written_tensor_passed_twice_unchanged(device, written, other):
    """base_model_seq_lens_this_time among them: this form reads it, so it may
    not share memory with a written tensor (the default form never reads it).
    One request, so that not_need_stop's one row is every vector's."""
    assert_raw_alias_refused(forms.load("recompute").library, SIG, decode_state(3, bsz=1), written, other,
                             attrs_of(3).values(), device)


def test_base_model_seq_lens_this_time_is_checked_for_overlap():
    pairs = same_kind_pairs(SIG, decode_state(3, bsz=1), not_read=NOT_READ)
    assert ("seq_lens_this_time", "base_model_seq_lens_this_time") in pairs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [0, -1])
def test_the_raw_op_refuses_num_model_step_below_1_unchanged(device, k):
    assert_raw_refused(forms.load("recompute").library, SIG, decode_state(3), attrs_of(k).values(),
                       f"num_model_step must be >= 1, got {k}", device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("base_n", [-(2**31), -(2**31) + 1, -1, I32_MAX])
def test_the_recompute_limit_cannot_wrap_at_int32_extremes(device, base_n):
    """r = min(recompute_token_num, max(base_model_seq_lens_this_time - 2, 0)),
    computed without wrapping: at INT32_MIN the limit is 0, not a wrapped large
    number; at INT32_MAX it is the count asked for."""
    k = 3
    s = decode_state(k)
    s["recompute_token_num"][0] = 2
    s["base_model_seq_lens_this_time"][0] = base_n
    t = to_tensors(s, device)
    raw_call(t, k)
    got = to_numpy(t)
    r = 2 if base_n == I32_MAX else 0
    assert got["seq_lens_decoder"][0] == 40 - r and got["mask_rollback"][0] == r
    assert_states_equal(got, run_ref(s, attrs_of(k)))


RAW_CASES = raw_refusal_cases(SIG, decode_state(3))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", [c[0] for c in RAW_CASES])
def test_the_raw_op_refuses_a_wrong_dtype_or_too_few_rows_unchanged(device, case):
    _, s, message = next(c for c in RAW_CASES if c[0] == case)
    assert_raw_refused(forms.load("recompute").library, SIG, s, attrs_of(3).values(), message, device)
