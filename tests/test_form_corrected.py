"""The corrected forms: FastDeploy's registrations (20 and 22 tensors, the
ten-tensor mask op) with rules that keep the draft right in FastDeploy's
runners (docs/contract.md, "The corrected forms"). Held to the numpy
reference (reference.draft_model_preprocess_corrected,
update_attn_mask_offsets_corrected) on random states, and to the contract's
invariant asserted without it: after the preprocess a running decode's KV
positions and step are the base model's less accept_num, stopped or not, and
a decode token's mask end is its KV position + 1 whatever the cursor and the
rollback held."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fastdeploy_mtp import forms, reference
from fastdeploy_mtp.harness import states
from fastdeploy_mtp.registration import differences, read_registered
from fastdeploy_mtp.signature import FORMS, op_name
import guarded
from helpers import (DEVICES, WITH_GUARDED, GUARDED, assert_states_equal, assert_unchanged,
                     preprocess_attrs, to_numpy, to_tensors)
from raw_op import call_raw

PRE, MASK = "draft_model_preprocess", "update_attn_mask_offsets"
CORRECTED = ("corrected_pr5245", "corrected_pr5738", "corrected_pr6403")
# The FastDeploy form whose registration each corrected form takes.
REGISTRATION_OF = {"corrected_pr5245": "pr5245", "corrected_pr5738": "pr5738",
                   "corrected_pr6403": "pr6403"}
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def corrected_state(form, rng, bsz, k, **kwargs):
    """A valid preprocess input of `form`'s table: the recompute form's 22
    tensors, or the rollback form's less mask_rollback (corrected_pr5245).
    The tensors the form never reads hold garbage."""
    if form == "corrected_pr5245":
        s = states.preprocess_state(rng, bsz, num_model_step=k, **kwargs)
        del s["mask_rollback"]
    else:
        s = states.recompute_state(rng, bsz, num_model_step=k, **kwargs)
        s["recompute_token_num"][...] = rng.integers(-2**31, 2**31 - 1,
                                                     s["recompute_token_num"].shape)
    s["base_model_seq_lens_this_time"][...] = rng.integers(
        -2**31, 2**31 - 1, s["base_model_seq_lens_this_time"].shape)
    assert list(s) == list(FORMS[form][PRE].input_names)
    return s


def run_pre(form, s, attrs, device):
    if device == GUARDED:
        got = states.copy_state(s)
        guarded.call(FORMS[form][PRE], got, attrs, form=form)
        return got
    t = to_tensors(s, device)
    forms.load(form).draft_model_preprocess(**t, **attrs)
    return to_numpy(t)


def run_mask(form, s, device):
    if device == GUARDED:
        got = states.copy_state(s)
        out = guarded.call(FORMS[form][MASK], got, form=form)
        return out, got
    t = to_tensors(s, device)
    out = forms.load(form).update_attn_mask_offsets(**t)
    return out.numpy(), to_numpy(t)


@pytest.mark.parametrize("form", CORRECTED)
def test_registered_as_fastdeploy_registers_the_version_it_corrects(form):
    """FastDeploy's proposer calls these positionally: the inputs, outputs,
    attributes and in-place pairs are its own op's."""
    theirs = REGISTRATION_OF[form]
    for name in (PRE, MASK):
        assert differences(FORMS[theirs][name], read_registered(op_name(form, FORMS[form][name]))) \
            == []


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("form", CORRECTED)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 64), k=st.integers(1, 6),
       truncate=st.booleans(), splitwise=st.booleans(), v1=st.booleans())
def test_preprocess_matches_the_reference(device, form, seed, bsz, k, truncate, splitwise, v1):
    rng = np.random.default_rng(seed)
    s = corrected_state(form, rng, bsz, k, splitwise_prefill=splitwise,
                        truncate_first_token=truncate)
    attrs = preprocess_attrs(k, truncate, splitwise, v1)
    want = states.copy_state(s)
    reference.draft_model_preprocess_corrected(want, **attrs, form=form)
    assert_states_equal(run_pre(form, s, attrs, device), want, f"seed={seed}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", CORRECTED)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 64), k=st.integers(1, 6),
       v1=st.booleans())
def test_every_running_decode_takes_the_base_model_s_positions_less_accept_num(
        device, form, seed, bsz, k, v1):
    """The contract's invariant, without the reference: stopped (a re-sync)
    or not, a running decode leaves with seq_lens_decoder =
    base_model_seq_lens_decoder - accept_num and step_idx =
    base_model_step_idx - accept_num, whatever the draft held; where the form
    has mask_rollback, it grows by exactly the change of seq_lens_decoder,
    and a prefill sets it to 0."""
    rng = np.random.default_rng(seed)
    s = corrected_state(form, rng, bsz, k)
    got = run_pre(form, s, preprocess_attrs(k, v1=v1), device)
    vec = {n: a.reshape(a.shape[0]) for n, a in s.items() if a.ndim <= 2 and a.size == a.shape[0]}
    after = {n: a.reshape(a.shape[0]) for n, a in got.items() if n in vec}
    decodes = prefills = 0
    for i in range(bsz):
        running = not after["stop_flags"][i]
        if not running:
            continue
        if vec["seq_lens_encoder"][i] > 0:
            prefills += 1
            if "mask_rollback" in after:
                assert after["mask_rollback"][i] == 0, i
            continue
        decodes += 1
        a = int(vec["accept_num"][i])
        assert after["seq_lens_decoder"][i] == int(vec["base_model_seq_lens_decoder"][i]) - a, i
        assert after["step_idx"][i] == int(vec["base_model_step_idx"][i]) - a, i
        assert after["seq_lens_this_time"][i] == a, i
        if "mask_rollback" in after:
            assert int(after["mask_rollback"][i]) - int(vec["mask_rollback"][i]) == \
                int(vec["seq_lens_decoder"][i]) - int(after["seq_lens_decoder"][i]), i
    # Never read, never written: garbage passes through.
    for name in ("recompute_token_num", "base_model_seq_lens_this_time"):
        if name in s:
            np.testing.assert_array_equal(got[name], s[name])
    # A state where every request stops proves nothing: hypothesis draws
    # another (and fails where it cannot find one that runs).
    assume(decodes + prefills > 0)


def decode_batch(cursors, rollbacks, S=(12, 30, 7), n=(1, 3, 2)):
    """Decode requests with these cursors and pending rollbacks (any values:
    the corrected op reads neither), each feeding n tokens from KV position S."""
    bsz = len(S)
    cu = np.concatenate([[0], np.cumsum(n)]).astype(np.int32)
    return {
        "ids_remove_padding": np.zeros(int(cu[-1]), np.int64),
        "seq_lens_this_time": np.array(n, np.int32),
        "seq_lens_encoder": np.zeros(bsz, np.int32),
        "seq_lens_decoder": np.array(S, np.int32),
        "cu_seqlens_q": cu,
        "attn_mask_offsets_full": np.zeros((bsz, 4), np.int32),
        "attn_mask_offsets_decoder": np.array(cursors, np.int32),
        "is_block_step": np.zeros(bsz, bool),
        "decode_states": np.ones((bsz, 3), np.int32),
        "mask_rollback": np.array(rollbacks, np.int32),
    }


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("form", CORRECTED)
@pytest.mark.parametrize("cursors,rollbacks", [
    ((12, 30, 7), (0, 0, 0)),                        # as a runner that kept it right leaves it
    ((13, 33, 7), (1, 3, 0)),                        # FastDeploy's pending rollbacks
    ((-5, 2**31 - 1, 0), (2**31 - 1, -2**31, 99)),   # anything at all
])
def test_a_decode_token_s_mask_end_is_its_kv_position_plus_one(device, form, cursors, rollbacks):
    s = decode_batch(cursors, rollbacks)
    out, got = run_mask(form, s, device)
    ends, q = [], 0
    for S, n in zip((12, 30, 7), (1, 3, 2)):
        ends += [S + 1 + j for j in range(n)]
    np.testing.assert_array_equal(out[1::2], ends)
    np.testing.assert_array_equal(out[0::2], 0)
    np.testing.assert_array_equal(got["attn_mask_offsets_decoder"], [12 + 1, 30 + 3, 7 + 2])
    np.testing.assert_array_equal(got["mask_rollback"], 0)


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("form,row", [("corrected_pr5245", [1, 1, 1]),
                                      ("corrected_pr5738", [1, 1, 1]),
                                      ("corrected_pr6403", [-1, -1, -1])])
def test_decode_states_follow_the_rule_of_the_version_corrected(device, form, row):
    """One token: 9018ccf74's rule leaves the row, 2178f2829's rewrites it
    (a 1 becoming -1)."""
    s = decode_batch((12,), (0,), S=(12,), n=(1,))
    _, got = run_mask(form, s, device)
    np.testing.assert_array_equal(got["decode_states"][0], row)


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("form", ["corrected_pr5738", "corrected_pr6403"])
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 64), ones=st.floats(0, 1))
def test_mask_matches_the_reference(device, form, seed, bsz, ones):
    rng = np.random.default_rng(seed)
    s = states.mask_state(rng, bsz)
    s["decode_states"][rng.random(s["decode_states"].shape) < ones] = 1
    want = states.copy_state(s)
    want_out = reference.update_attn_mask_offsets_corrected(want, form=form)
    out, got = run_mask(form, s, device)
    np.testing.assert_array_equal(out, want_out)
    assert_states_equal(got, want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", CORRECTED)
def test_a_decode_whose_end_passes_int32_is_refused_unchanged(device, form):
    s = decode_batch((0, 0, 0), (0, 0, 0), S=(12, 2**31 - 2, 7), n=(1, 2, 1))
    t = to_tensors(s, device)
    before = to_numpy(t)
    with pytest.raises(ValueError, match="request 1"):
        forms.load(form).update_attn_mask_offsets(**t)
    assert_unchanged(t, before)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", CORRECTED)
def test_the_raw_op_takes_fastdeploy_s_positional_call(device, form):
    """The registered op, called positionally as FastDeploy's proposer calls
    it, does what the typed wrapper does."""
    rng = np.random.default_rng(3)
    s = corrected_state(form, rng, 24, 3)
    attrs = preprocess_attrs(3, v1=True)
    t = to_tensors(s, device)
    call_raw(forms.load(form).library, FORMS[form][PRE], t, tuple(attrs.values()))
    want = states.copy_state(s)
    reference.draft_model_preprocess_corrected(want, **attrs, form=form)
    assert_states_equal(to_numpy(t), want)
