"""FastDeploy's XPU draft_model_preprocess at develop (c29e86fc9): the
22-tensor registration (custom_ops/xpu_ops/src/ops/mtp/draft_model_preprocess.cc
lines 107-159) with PR #5245's rules, its kernel's CPU form
(custom_ops/xpu_ops/src/plugin/src/wrapper/mtp_wrapper/draft_model_preprocess.cpp
lines 77-196, "xpu:N" below) never reading or writing mask_rollback or
recompute_token_num. The xpu form's op against the numpy model
(fastdeploy_mtp/reference_fastdeploy.py), and that commit's XPU runner in the
loop; what every FastDeploy kernel form is held to alike is in
tests/test_fastdeploy_kernels.py."""

from functools import partial

import numpy as np
import pytest

from fastdeploy_mtp import forms
from fastdeploy_mtp.harness import states
from fastdeploy_mtp.registration import differences, read_registered
from fastdeploy_mtp.signature import FORMS
from helpers import DEVICES, assert_states_equal, preprocess_attrs, to_numpy, to_tensors
from case_states import recompute_decode_state
from fastdeploy_forms import run_fastdeploy_model, run_form_preprocess

FORM = "xpu"
SIG = FORMS[FORM]["draft_model_preprocess"]

# c29e86fc9's XPU registration, as its source lists it.
XPU_INPUTS = (
    "draft_tokens input_ids stop_flags seq_lens_this_time seq_lens_encoder seq_lens_decoder "
    "step_idx not_need_stop is_block_step batch_drop pre_ids mask_rollback recompute_token_num "
    "accept_tokens accept_num base_model_seq_lens_this_time base_model_seq_lens_encoder "
    "base_model_seq_lens_decoder base_model_step_idx base_model_stop_flags "
    "base_model_is_block_step base_model_draft_tokens").split()
XPU_IN_PLACE = (
    "draft_tokens input_ids stop_flags seq_lens_this_time seq_lens_encoder seq_lens_decoder "
    "step_idx not_need_stop batch_drop pre_ids").split()


# The attributes FastDeploy's proposer passes (kvcache_scheduler_v1 on).
attrs_of = partial(preprocess_attrs, truncate=True, v1=True)


run_op = partial(run_form_preprocess, FORM)
run_fastdeploy = partial(run_fastdeploy_model, FORM)  # FastDeploy's kernel, its numpy model


def test_registered_as_fastdeploy_c29e86fc9_registers_its_xpu_op():
    assert list(SIG.input_names) == XPU_INPUTS
    assert SIG.inplace_map == {n: f"{n}_out" for n in XPU_IN_PLACE}
    assert list(SIG.output_names) == [f"{n}_out" for n in XPU_IN_PLACE]
    assert SIG.attr_names == FORMS["pr5738"]["draft_model_preprocess"].attr_names
    assert {t.name for t in SIG.inputs if t.access == "U"} == {
        "mask_rollback", "recompute_token_num", "base_model_seq_lens_encoder"}
    assert differences(SIG, read_registered("draft_model_preprocess_xpu")) == []
    assert FORMS[FORM]["update_attn_mask_offsets"] is FORMS["rollback"]["update_attn_mask_offsets"]


@pytest.mark.parametrize("device", DEVICES)
def test_a_running_decode_rolls_back_k_minus_1_and_leaves_the_two_tensors(device):
    """xpu:174-178: seq_lens_decoder and step_idx less k - 1; mask_rollback
    and recompute_token_num keep what they held, however odd."""
    s = recompute_decode_state(4, bsz=1)
    s["mask_rollback"][0] = -7
    s["recompute_token_num"][0] = 99
    got = run_op(s, attrs_of(4), device)
    assert int(got["seq_lens_decoder"][0]) == int(s["seq_lens_decoder"][0]) - 3
    assert int(got["step_idx"][0]) == int(s["step_idx"][0]) - 3
    assert (int(got["mask_rollback"][0]), int(got["recompute_token_num"][0])) == (-7, 99)


@pytest.mark.parametrize("device", DEVICES)
def test_the_two_tensors_it_never_reads_may_alias_anything(device):
    """Never read or written (access U): passing a read tensor's memory for
    one and a written tensor's for the other changes nothing the op
    computes (a form that wrote either would refuse the overlap)."""
    s = recompute_decode_state(3, bsz=2)
    want = run_fastdeploy(s, attrs_of(3))
    t = to_tensors(s, device)
    t["mask_rollback"] = t["accept_num"]
    t["recompute_token_num"] = t["seq_lens_decoder"]
    forms.load(FORM).draft_model_preprocess(**t, **attrs_of(3))
    got = to_numpy(t)
    for name in SIG.input_names:
        if name not in ("mask_rollback", "recompute_token_num"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
def test_requests_past_512_run_as_its_loop_runs_them(device):
    s = states.recompute_state(np.random.default_rng(5), 600, num_model_step=3)
    assert_states_equal(run_op(s, attrs_of(3), device), run_fastdeploy(s, attrs_of(3)), "600")


def test_the_loop_drifts_as_pr5245_s_does():
    """The same rules, a runner that differs only on a decode node and in its
    draft update (the replay models GPU FastDeploy's, which leaves a draft's
    end token among the base model's drafts, and not the XPU kernel's): with
    no draft ending early and no length limit reached, the mixed loop is
    pr5245's, step by step."""
    from fastdeploy_mtp.harness import simulate
    from helpers import sim_args

    tallies = []
    for form in (FORM, "pr5245"):
        a = sim_args(steps=30, batch=6, runner="fastdeploy", form=form, draft_model="tiny",
                     image_prob=0.5, seed=2, mode="mixed", num_model_steps=2,
                     draft_eos_prob=0.0, max_dec_len=400)
        tallies.append(simulate.run(a, legacy=False, print_rows=False))
    xpu, pr5245 = tallies
    assert xpu.model.disagreements > 0
    assert (xpu.model.tokens, xpu.model.disagreements, xpu.mask_violations) == (
        pr5245.model.tokens, pr5245.model.disagreements, pr5245.mask_violations)
