"""FastDeploy's draft_model_preprocess as its PR #5738 merged it (9018ccf74,
custom_ops/gpu_ops/speculate_decoding/draft_model/draft_model_preprocess.cu;
the release branch's dcb0ccede holds the same file): the pr5738 form's op
against the numpy model of that kernel (fastdeploy_mtp/reference_fastdeploy.py),
whose own cases restate the kernel branch by branch
(tests/test_reference_fastdeploy.py), rule by rule; what every FastDeploy kernel
form is held to alike is in tests/test_fastdeploy_kernels.py."""

from functools import partial

import numpy as np
import pytest

from fastdeploy_mtp import forms
from fastdeploy_mtp.harness import states
from fastdeploy_mtp.registration import differences, read_registered
from fastdeploy_mtp.signature import FORMS, same_registration
from helpers import DEVICES, assert_states_equal, preprocess_attrs
from case_states import recompute_decode_state
from fastdeploy_forms import run_fastdeploy_model, run_form_preprocess
from raw_op import assert_raw_refused

FORM = "pr5738"
SIG = FORMS[FORM]["draft_model_preprocess"]
I32_MIN, I32_MAX, I64_MIN = -(2**31), 2**31 - 1, -(2**63)


# The attributes FastDeploy's proposer passes (kvcache_scheduler_v1 on).
attrs_of = partial(preprocess_attrs, v1=True)


run_op = partial(run_form_preprocess, FORM)
run_fastdeploy = partial(run_fastdeploy_model, FORM)  # FastDeploy's kernel, its numpy model


def decode_state(k=3, bsz=2):
    return recompute_decode_state(k, bsz)


def test_registered_as_fastdeploy_9018ccf74_registers_it():
    """cpp_extensions.cc and draft_model_preprocess.cu's PD_BUILD_STATIC_OP at
    9018ccf74: the 22-tensor registration the recompute form has too."""
    assert differences(SIG, read_registered("draft_model_preprocess_pr5738")) == []
    assert same_registration(SIG, FORMS["recompute"]["draft_model_preprocess"])
    assert FORMS[FORM]["update_attn_mask_offsets"] is FORMS["rollback"]["update_attn_mask_offsets"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("recompute,base_n", [(2, 4), (5, 3), (4, 0), (0, 9)])
def test_a_running_decode_rolls_back_recompute_token_num_unclamped(device, recompute, base_n):
    """Lines 232-241: seq_lens_decoder and step_idx less recompute_token_num,
    mask_rollback plus it, recompute_token_num set to k - 1; no clamp by
    base_model_seq_lens_this_time (the recompute form's min(r, n - 2))."""
    s = decode_state(3, bsz=1)
    s["recompute_token_num"][0] = recompute
    s["base_model_seq_lens_this_time"][0] = base_n
    s["mask_rollback"][0] = 7
    got = run_op(s, attrs_of(3), device)
    assert int(got["seq_lens_decoder"][0]) == 40 - recompute
    assert int(got["step_idx"][0]) == 30 - recompute
    assert int(got["mask_rollback"][0]) == 7 + recompute
    assert int(got["recompute_token_num"][0]) == 2


@pytest.mark.parametrize("device", DEVICES)
def test_a_stopped_draft_resyncs_from_base_model_seq_lens_this_time(device):
    """Lines 225-231: a draft stopped while the base model runs takes the
    base model's lengths less base_model_seq_lens_this_time (not accept_num),
    and mask_rollback and recompute_token_num stay as they were."""
    s = decode_state(3, bsz=1)
    s["stop_flags"][0] = True
    s["base_model_seq_lens_decoder"][0] = 27
    s["base_model_step_idx"][0] = 9
    s["base_model_seq_lens_this_time"][0] = 3
    s["accept_num"][0] = 1
    s["recompute_token_num"][0] = 2
    s["mask_rollback"][0] = 5
    got = run_op(s, attrs_of(3), device)
    assert not got["stop_flags"][0]
    assert int(got["seq_lens_decoder"][0]) == 24
    assert int(got["step_idx"][0]) == 6
    assert int(got["mask_rollback"][0]) == 5
    assert int(got["recompute_token_num"][0]) == 2
    assert int(got["seq_lens_this_time"][0]) == 1


@pytest.mark.parametrize("device", DEVICES)
def test_a_stop_and_a_prefill_keep_mask_rollback_recompute_token_num_and_is_block_step(device):
    """Lines 201 and 251-256 (a stop) and 204-217 (a prefill) write neither."""
    s = decode_state(3, bsz=2)
    s["base_model_stop_flags"][0] = True
    s["seq_lens_encoder"][1] = 6
    for i in range(2):
        s["mask_rollback"][i] = 4 + i
        s["recompute_token_num"][i] = 1
        s["is_block_step"][i] = True
    got = run_op(s, attrs_of(3), device)
    np.testing.assert_array_equal(got["mask_rollback"].reshape(-1), [4, 5])
    np.testing.assert_array_equal(got["recompute_token_num"].reshape(-1), [1, 1])
    np.testing.assert_array_equal(got["is_block_step"].reshape(-1), [True, True])
    assert bool(got["stop_flags"][0]) and not bool(got["stop_flags"][1])


@pytest.mark.parametrize("device", DEVICES)
def test_requests_past_512_run_too(device):
    """FastDeploy's one block of 512 threads (lines 298, 306, 337) leaves
    requests from 512 on as they were; ours runs them, as it runs every
    request of any batch (docs/contract.md): the first 512 are FastDeploy's."""
    s = states.recompute_state(np.random.default_rng(5), 600, num_model_step=3)
    s["seq_lens_encoder"][:] = 0
    s["stop_flags"][:] = False
    s["base_model_stop_flags"][:] = False
    s["batch_drop"][:] = False
    s["accept_num"][:] = 1
    s["base_model_step_idx"][:] = 5
    s["recompute_token_num"][:] = 2
    got = run_op(s, attrs_of(3), device)
    want = run_fastdeploy(s, attrs_of(3))
    for name in ("seq_lens_decoder", "step_idx", "mask_rollback"):
        np.testing.assert_array_equal(got[name][:512], want[name][:512], err_msg=name)
        np.testing.assert_array_equal(want[name][512:], s[name][512:], err_msg=name)
        np.testing.assert_array_equal(got[name][512:].reshape(-1),
                                      (s[name][512:] + (2 if name == "mask_rollback" else -2)
                                       ).reshape(-1), err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("field,value", [("accept_num", -1), ("accept_num", -3),
                                         ("seq_lens_encoder", -1)])
def test_states_fastdeploy_s_kernel_runs_that_the_other_forms_refuse(device, field, value):
    """A negative accept_num copies no token and becomes seq_lens_this_time
    (lines 242-249); a negative seq_lens_encoder is a decode (line 218). No
    write leaves a row, so the pr5738 form runs them as FastDeploy does
    (the other forms refuse both)."""
    s = decode_state(3, bsz=2)
    s[field][1] = value
    got = run_op(s, attrs_of(3), device)
    assert_states_equal(got, run_fastdeploy(s, attrs_of(3)), field)
    if field == "accept_num":
        assert int(got["seq_lens_this_time"][1]) == value
    else:
        assert int(got["seq_lens_encoder"][1]) == value
        assert int(got["seq_lens_decoder"][1]) == 40 - int(s["recompute_token_num"][1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("base_decoder,base_n,message", [
    (I32_MIN + 1, 2, "seq_lens_decoder: the re-synced value base_model_seq_lens_decoder - "
                     f"base_model_seq_lens_this_time = {I32_MIN + 1} - 2 = {I32_MIN - 1} "
                     "leaves the int32 range"),
    (I32_MAX, -1, "seq_lens_decoder: the re-synced value base_model_seq_lens_decoder - "
                  f"base_model_seq_lens_this_time = {I32_MAX} - -1 = {I32_MAX + 1} leaves the "
                  "int32 range"),
])
def test_a_resync_past_int32_is_refused_unchanged(device, base_decoder, base_n, message):
    """FastDeploy's int subtraction would wrap (line 227); ours refuses."""
    s = decode_state(3, bsz=2)
    s["stop_flags"][1] = True
    s["base_model_seq_lens_decoder"][1] = base_decoder
    s["base_model_seq_lens_this_time"][1] = base_n
    assert_raw_refused(forms.load(FORM).library, SIG, s, attrs_of(3).values(),
                       f"draft_model_preprocess: request 1: {message}", device)


@pytest.mark.parametrize("device", DEVICES)
def test_a_resync_step_past_int64_is_refused_unchanged(device):
    s = decode_state(3, bsz=1)
    s["stop_flags"][0] = True
    s["base_model_step_idx"][0] = I64_MIN + 1
    s["base_model_seq_lens_this_time"][0] = 2
    s["accept_num"][0] = 0
    message = ("step_idx: the re-synced value base_model_step_idx - "
               f"base_model_seq_lens_this_time = {I64_MIN + 1} - 2 leaves the int64 range")
    assert_raw_refused(forms.load(FORM).library, SIG, s, attrs_of(3).values(),
                       f"draft_model_preprocess: request 0: {message}", device)


# ---------------------------------------------------------------------------
# In the loop: FastDeploy 9018ccf74's runner, the tiny model and the oracle


def run_loop(**kw):
    from fastdeploy_mtp.harness import simulate
    from helpers import sim_args

    a = sim_args(**{"steps": 40, "batch": 6, "runner": "fastdeploy", "form": FORM,
                    "draft_model": "tiny", "image_prob": 0.5, "seed": 1, **kw})
    return simulate.run(a, legacy=False, print_rows=False)


@pytest.mark.parametrize("k", [2, 3])
def test_the_loop_is_exact_while_no_draft_resyncs(k):
    """No end token, no block step, no length limit: every decode takes the
    running branch (lines 232-241), which rolls the KV positions and the mask
    cursor back by the same recompute_token_num."""
    t = run_loop(mode="mixed", num_model_steps=k, draft_eos_prob=0.0, block_prob=0.0,
                 max_dec_len=400)
    assert t.model.tokens > 200 and t.rolled_back > 20
    assert t.violations == 0, t.first_violation
    assert t.model.disagreements == 0, t.model.first


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("cause", [dict(block_prob=0.0), dict(draft_eos_prob=0.0)])
def test_a_resync_leaves_the_mask_cursor_behind_the_kv_positions(k, cause):
    """A draft that stopped re-syncs its KV positions from the base model
    (lines 225-231) and leaves mask_rollback as it was: the mask ends run
    ahead of the positions the draft attends, and the draft computes on the
    wrong context (FastDeploy's drift, docs/results.md)."""
    t = run_loop(mode="mixed", num_model_steps=k, **cause)
    assert t.mask_violations > 0, t.first_violation
    assert t.model.disagreements > 0
    assert "mask end" in str(t.model.first)


# ---------------------------------------------------------------------------
# Bad input to the raw op, as FastDeploy's proposer would hand it


