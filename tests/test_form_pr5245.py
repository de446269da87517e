"""FastDeploy's draft_model_preprocess as its PR #5245 left it (ba915e03e,
custom_ops/gpu_ops/speculate_decoding/draft_model/draft_model_preprocess.cu,
"ba:N" below; the same kernel as PR #5738 merged but for the running decode's
rollback, lines 226-230, and no mask_rollback or recompute_token_num): the
pr5245 form's op against the numpy model of that kernel
(fastdeploy_mtp/reference_fastdeploy.py), rule by rule; what every FastDeploy
kernel form is held to alike is in tests/test_fastdeploy_kernels.py."""

from functools import partial

import pytest

from fastdeploy_mtp import forms
from fastdeploy_mtp.registration import differences, read_registered
from fastdeploy_mtp.signature import FORMS
from helpers import DEVICES, assert_states_equal, preprocess_attrs
from case_states import recompute_decode_state
from fastdeploy_forms import run_fastdeploy_model, run_form_preprocess
from raw_op import assert_raw_refused

FORM = "pr5245"
SIG = FORMS[FORM]["draft_model_preprocess"]
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


# The attributes FastDeploy's proposer passes (kvcache_scheduler_v1 on).
attrs_of = partial(preprocess_attrs, v1=True)


def ours(s):
    """The 20 tensors of the form's table, from a 22-tensor state."""
    return {n: s[n] for n in SIG.input_names}


def decode_state(k=3, bsz=2):
    return ours(recompute_decode_state(k, bsz))


run_op = partial(run_form_preprocess, FORM)
run_fastdeploy = partial(run_fastdeploy_model, FORM)  # FastDeploy's kernel, its numpy model


def test_registered_as_fastdeploy_ba915e03e_registers_it():
    assert differences(SIG, read_registered("draft_model_preprocess_pr5245")) == []
    assert FORMS[FORM]["update_attn_mask_offsets"] is FORMS["rollback"]["update_attn_mask_offsets"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [1, 2, 4])
def test_a_running_decode_rolls_back_k_minus_1_and_tells_no_one(device, k):
    """ba:226-230: seq_lens_decoder and step_idx less num_model_step - 1; there
    is no mask_rollback to carry it to the mask op (the drift this project's
    rollback form exists to fix)."""
    s = decode_state(k, bsz=1)
    got = run_op(s, attrs_of(k), device)
    assert int(got["seq_lens_decoder"][0]) == int(s["seq_lens_decoder"][0]) - (k - 1)
    assert int(got["step_idx"][0]) == int(s["step_idx"][0]) - (k - 1)
    assert "mask_rollback" not in got


@pytest.mark.parametrize("device", DEVICES)
def test_a_stopped_draft_resyncs_from_base_model_seq_lens_this_time(device):
    """ba:221-225."""
    s = decode_state(3, bsz=1)
    s["stop_flags"][0] = True
    s["base_model_seq_lens_decoder"][0] = 27
    s["base_model_step_idx"][0] = 9
    s["base_model_seq_lens_this_time"][0] = 3
    s["accept_num"][0] = 1
    got = run_op(s, attrs_of(3), device)
    assert (bool(got["stop_flags"][0]), int(got["seq_lens_decoder"][0]),
            int(got["step_idx"][0]), int(got["seq_lens_this_time"][0])) == (False, 24, 6, 1)


@pytest.mark.parametrize("device", DEVICES)
def test_a_prefill_keeps_a_parked_flag(device):
    """ba:204-213 write no is_block_step (our rollback form's prefill clears it)."""
    s = decode_state(3, bsz=1)
    s["seq_lens_encoder"][0] = 5
    s["is_block_step"][0] = True
    got = run_op(s, attrs_of(3), device)
    assert bool(got["is_block_step"][0]) and int(got["seq_lens_this_time"][0]) == 6


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("field,value", [("accept_num", -2), ("seq_lens_encoder", -1)])
def test_states_fastdeploy_s_kernel_runs_that_our_form_refuses(device, field, value):
    """ba:231-237 and 214: a negative accept_num copies nothing and becomes
    seq_lens_this_time; a negative seq_lens_encoder is a decode."""
    s = decode_state(3, bsz=2)
    s[field][1] = value
    got = run_op(s, attrs_of(3), device)
    assert_states_equal(got, run_fastdeploy(s, attrs_of(3)), field)
    if field == "accept_num":
        assert int(got["seq_lens_this_time"][1]) == value


@pytest.mark.parametrize("device", DEVICES)
def test_a_rollback_past_int32_is_refused_unchanged(device):
    """FastDeploy's int subtraction (ba:228) would wrap; ours refuses."""
    s = decode_state(3, bsz=2)
    s["seq_lens_decoder"][1] = I32_MIN + 1
    assert_raw_refused(forms.load(FORM).library, SIG, s, attrs_of(3).values(),
                       "draft_model_preprocess: request 1: seq_lens_decoder: the rolled-back "
                       "value seq_lens_decoder - (num_model_step - 1) = -2147483647 - 2 = "
                       "-2147483649 leaves the int32 range", device)


