"""The forms that run FastDeploy's own kernels: a form's typed
draft_model_preprocess, and the numpy model of FastDeploy's kernel that
each such form is held to."""

from __future__ import annotations

from fastdeploy_mtp import forms, reference_fastdeploy
from helpers import to_numpy, to_tensors


def run_form_preprocess(form, state, attrs, device):
    """`form`'s draft_model_preprocess (its typed wrapper) on `state` placed on
    `device`; the state after it, in numpy."""
    t = to_tensors(state, device)
    forms.load(form).draft_model_preprocess(**t, **attrs)
    return to_numpy(t)


# The model of FastDeploy's kernel each FastDeploy-kernel form is held to.
FASTDEPLOY_MODELS = {"pr5245": reference_fastdeploy.draft_model_preprocess_pr5245,
                     "pr5738": reference_fastdeploy.draft_model_preprocess_pr5738,
                     "pr6403": reference_fastdeploy.draft_model_preprocess_pr5738,
                     "xpu": reference_fastdeploy.draft_model_preprocess_xpu}


def run_fastdeploy_model(form, state, attrs):
    """FastDeploy's kernel of `form`, as its numpy model runs it, on a copy."""
    s = {k: v.copy() for k, v in state.items()}
    FASTDEPLOY_MODELS[form](s, **attrs)
    return s
