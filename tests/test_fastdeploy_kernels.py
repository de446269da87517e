"""The forms that are FastDeploy's own draft_model_preprocess kernels, each
held to its numpy model (fastdeploy_mtp/reference_fastdeploy.py) the same
way: pr5245 (ba915e03e), pr5738 (9018ccf74), pr6403 (2178f2829, whose
preprocess is 9018ccf74's) and xpu (FastDeploy's XPU op at c29e86fc9). Each
form's own rules, case by case with their lines, are in its
tests/test_form_<form>.py."""

from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastdeploy_mtp import forms
from fastdeploy_mtp.harness import states
from fastdeploy_mtp.signature import FORMS
import guarded
from helpers import DEVICES, assert_states_equal, preprocess_attrs, to_numpy, to_tensors
from case_states import recompute_decode_state
from fastdeploy_forms import FASTDEPLOY_MODELS, run_fastdeploy_model, run_form_preprocess
from raw_op import (assert_raw_alias_refused, assert_raw_refused, call_raw, raw_refusal_cases,
                    same_kind_pairs)

KERNELS = list(FASTDEPLOY_MODELS)


def sig_of(form):
    return FORMS[form]["draft_model_preprocess"]


# The attributes FastDeploy's proposer passes (kvcache_scheduler_v1 on).
attrs_of = partial(preprocess_attrs, v1=True)


def ours(form, s):
    """`form`'s tensors of a 22-tensor state."""
    return {n: s[n] for n in sig_of(form).input_names}


def random_state(form, seed, bsz, k):
    return ours(form, states.recompute_state(np.random.default_rng(seed), bsz, num_model_step=k))


def decode_state(form, k=3, bsz=2):
    return ours(form, recompute_decode_state(k, bsz))


def test_every_fastdeploy_kernel_form_has_a_model():
    """The forms whose preprocess is FastDeploy's own kernel: every form but
    ours (rollback and the corrected ones, held to reference.py), commit
    0956b09a's (recompute, held to reference.py) and the shadow form (held to
    reference.py)."""
    ours = {f for f in FORMS if f.startswith("corrected_")}
    assert ours and set(KERNELS) == set(FORMS) - {"rollback", "recompute", "shadow"} - ours


@pytest.mark.parametrize("form", KERNELS)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_the_raw_op_called_positionally_as_fastdeploy_s_proposer_does(form, device, k):
    """Its tensors, then the 4 attributes, by position (mtp.py lines 685-709
    at ba915e03e, 757-784 at 9018ccf74, 766-793 at c29e86fc9)."""
    s = random_state(form, k, 24, k)
    t = to_tensors(s, device)
    call_raw(forms.load(form).library, sig_of(form), t, (k, False, False, True))
    assert_states_equal(to_numpy(t), run_fastdeploy_model(form, s, attrs_of(k)), f"{form} k={k}")


@pytest.mark.parametrize("form", KERNELS)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("truncate", [False, True])
@pytest.mark.parametrize("splitwise", [False, True])
@pytest.mark.parametrize("v1", [False, True])
def test_matches_fastdeploy_s_kernel(form, device, k, truncate, splitwise, v1):
    s = random_state(form, 10 * k + 2 * truncate + splitwise, 40, k)
    attrs = preprocess_attrs(k, truncate, splitwise, v1)
    assert_states_equal(run_form_preprocess(form, s, attrs, device), run_fastdeploy_model(form, s, attrs), str(attrs))


@pytest.mark.parametrize("form", KERNELS)
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("splitwise", [False, True])
def test_the_guarded_driver_matches_fastdeploy_s_kernel(form, k, splitwise):
    """Between guard pages (tests/guarded.py): no read or write outside a tensor."""
    s = random_state(form, k + 7 * splitwise, 20, k)
    attrs = attrs_of(k, splitwise=splitwise)
    got = {n: a.copy() for n, a in s.items()}
    guarded.call(sig_of(form), got, attrs, form=form)
    assert_states_equal(got, run_fastdeploy_model(form, s, attrs), str(attrs))


@settings(max_examples=40, deadline=None)
@given(form=st.sampled_from(KERNELS), seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 40),
       k=st.integers(1, 5), v1=st.booleans(), truncate=st.booleans(), splitwise=st.booleans(),
       stopped=st.floats(0, 1), recompute=st.booleans())
def test_property_matches_fastdeploy_s_kernel(form, seed, bsz, k, v1, truncate, splitwise,
                                              stopped, recompute):
    """Random states, a share of the drafts stopped (re-synced) and, where
    the form has it, recompute_token_num anywhere in [0, k]."""
    rng = np.random.default_rng(seed)
    s = ours(form, states.recompute_state(rng, bsz, num_model_step=k))
    s["stop_flags"][:] = rng.random(bsz) < stopped
    if recompute and "recompute_token_num" in s:
        s["recompute_token_num"][:] = rng.integers(0, k + 1, bsz).reshape(
            s["recompute_token_num"].shape)
    attrs = preprocess_attrs(k, truncate, splitwise, v1)
    assert_states_equal(run_form_preprocess(form, s, attrs, "cpu"), run_fastdeploy_model(form, s, attrs), str(attrs))


@pytest.mark.parametrize("form", KERNELS)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [0, -1])
def test_the_raw_op_refuses_num_model_step_below_1_unchanged(form, device, k):
    assert_raw_refused(forms.load(form).library, sig_of(form), decode_state(form),
                       attrs_of(k).values(), f"num_model_step must be >= 1, got {k}", device)


RAW_CASES = [(form, case, s, message) for form in KERNELS
             for case, s, message in raw_refusal_cases(sig_of(form), decode_state(form))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form,case", [(f, c) for f, c, _, _ in RAW_CASES])
def test_the_raw_op_refuses_a_wrong_dtype_or_too_few_rows_unchanged(device, form, case):
    _, _, s, message = next(c for c in RAW_CASES if c[:2] == (form, case))
    assert_raw_refused(forms.load(form).library, sig_of(form), s, attrs_of(3).values(), message,
                       device)


ALIASES = [(form, w, o) for form in KERNELS
           for w, o in same_kind_pairs(sig_of(form), decode_state(form, bsz=1),
                                       not_read=[t.name for t in sig_of(form).inputs
                                                 if t.access == "U"])]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form,written,other", ALIASES)
def test_the_raw_op_refuses_a_written_tensor_passed_twice_unchanged(device, form, written, other):
    assert_raw_alias_refused(forms.load(form).library, sig_of(form), decode_state(form, bsz=1),
                             written, other, attrs_of(3).values(), device)
