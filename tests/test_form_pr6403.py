"""FastDeploy's PR #6403 (2178f2829): update_attn_mask_offsets' decode branch
rewrites decode_states for every decode, a 1 among its tokens' columns
becoming -1 (custom_ops/gpu_ops/update_attn_mask_offsets.cu lines 68-75
there; 9018ccf74's lines 68-77 rewrite it only for a decode of more than one
token, 0 for its tokens' columns). Nothing else of the pair changed: the
pr6403 form's preprocess is the pr5738 form's kernel. Held to the numpy
reference (reference.update_attn_mask_offsets_pr6403) and, for the
preprocess, to the model of 9018ccf74's kernel."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastdeploy_mtp import forms, reference
from fastdeploy_mtp.harness import states
from fastdeploy_mtp.registration import differences, read_registered
from fastdeploy_mtp.signature import FORMS
import guarded
from helpers import DEVICES, assert_states_equal, to_numpy, to_tensors
from raw_op import assert_raw_alias_refused, call_raw, same_kind_pairs

FORM = "pr6403"
MASK = FORMS[FORM]["update_attn_mask_offsets"]
PRE = FORMS[FORM]["draft_model_preprocess"]


def one_decode(row, n, cursor=10, rollback=0):
    """A batch of one decode request feeding n tokens, decode_states `row`."""
    row = np.asarray(row, np.int32)[None, :]
    return {
        "ids_remove_padding": np.zeros(n, np.int64),
        "seq_lens_this_time": np.array([n], np.int32),
        "seq_lens_encoder": np.array([0], np.int32),
        "seq_lens_decoder": np.array([12], np.int32),
        "cu_seqlens_q": np.array([0, n], np.int32),
        "attn_mask_offsets_full": np.zeros((1, 4), np.int32),
        "attn_mask_offsets_decoder": np.array([cursor], np.int32),
        "is_block_step": np.array([False]),
        "decode_states": row.copy(),
        "mask_rollback": np.array([rollback], np.int32),
    }


def run_mask(s, device="cpu", form=FORM):
    t = to_tensors(s, device)
    out = forms.load(form).update_attn_mask_offsets(**t)
    return out.numpy(), to_numpy(t)


def test_registered_as_the_ten_tensor_op_and_pr5738_s_preprocess():
    assert differences(MASK, read_registered("update_attn_mask_offsets_pr6403")) == []
    assert differences(PRE, read_registered("draft_model_preprocess_pr6403")) == []


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("row,n,want,before", [
    # One token: rewritten from PR #6403 on, left alone before it.
    ([0, 5, 7], 1, [0, -1, -1], [0, 5, 7]),
    ([1, 5, 7], 1, [-1, -1, -1], [1, 5, 7]),
    # Two tokens: a 1 among them becomes -1 (before: 0).
    ([1, 1, 3], 2, [-1, -1, -1], [0, 0, -1]),
    ([4, 1, 3], 2, [0, -1, -1], [0, 0, -1]),
    # More tokens than columns: only the row's own columns are written.
    ([2, 2], 3, [0, 0], [0, 0]),
])
def test_every_decode_rewrites_decode_states(device, row, n, want, before):
    """Lines 68-75 at 2178f2829 against 9018ccf74's 68-77 (the rollback form's
    op); the offsets and the cursor are the same in both."""
    s = one_decode(row, n, cursor=10, rollback=2)
    out, got = run_mask(s, device)
    out_before, got_before = run_mask(s, device, form="rollback")
    np.testing.assert_array_equal(got["decode_states"][0], want)
    np.testing.assert_array_equal(got_before["decode_states"][0], before)
    np.testing.assert_array_equal(out, out_before)
    np.testing.assert_array_equal(out[1::2], 8 + 1 + np.arange(n))
    assert int(got["attn_mask_offsets_decoder"][0]) == 8 + n
    assert int(got["mask_rollback"][0]) == 0


@pytest.mark.parametrize("device", DEVICES)
def test_a_prompt_request_s_decode_states_are_left_alone(device):
    s = one_decode([1, 5, 7], 2)
    s["seq_lens_encoder"][0] = 2
    _, got = run_mask(s, device)
    np.testing.assert_array_equal(got["decode_states"][0], [1, 5, 7])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_raw_mask_op_called_positionally_as_fastdeploy_does(device, seed):
    s = states.mask_state(np.random.default_rng(seed), 40)
    s["decode_states"][np.random.default_rng(seed).random(s["decode_states"].shape) < 0.3] = 1
    t = to_tensors(s, device)
    outs = call_raw(forms.load(FORM).library, MASK, t, ())
    want = states.copy_state(s)
    want_out = reference.update_attn_mask_offsets_pr6403(want)
    np.testing.assert_array_equal(outs[0].numpy(), want_out)
    assert_states_equal(to_numpy(t), want)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 40), ones=st.floats(0, 1))
def test_property_matches_the_reference(seed, bsz, ones):
    rng = np.random.default_rng(seed)
    s = states.mask_state(rng, bsz)
    s["decode_states"][rng.random(s["decode_states"].shape) < ones] = 1
    want = states.copy_state(s)
    want_out = reference.update_attn_mask_offsets_pr6403(want)
    out, got = run_mask(s)
    np.testing.assert_array_equal(out, want_out)
    assert_states_equal(got, want)


def test_the_guarded_driver_matches_the_reference():
    """Between guard pages: the pr6403 mask rules read and write nothing outside a tensor."""
    s = states.mask_state(np.random.default_rng(9), 20)
    s["decode_states"][:, 0] = 1
    got = states.copy_state(s)
    out = guarded.call(MASK, got, form=FORM)
    want = states.copy_state(s)
    want_out = reference.update_attn_mask_offsets_pr6403(want)
    np.testing.assert_array_equal(out, want_out)
    assert_states_equal(got, want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("written,other", same_kind_pairs(MASK, one_decode([0, 0], 1),
                                                          not_read=("ids_remove_padding",)))
def test_the_raw_mask_op_refuses_a_written_tensor_passed_twice_unchanged(device, written, other):
    assert_raw_alias_refused(forms.load(FORM).library, MASK, one_decode([0, 0], 1), written,
                             other, (), device)
