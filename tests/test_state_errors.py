"""Errors that name everything wrong with a state handed to a numpy model:
the reference (fastdeploy_mtp/reference.py) names every tensor a state lacks
and every one its table does not name, in one line; the models of
FastDeploy's kernels (fastdeploy_mtp/reference_fastdeploy.py) refuse a tensor
of the wrong dtype, read or written, naming it. Each with nothing changed."""

import numpy as np
import pytest

from fastdeploy_mtp import reference_fastdeploy
from fastdeploy_mtp.harness import states
from fastdeploy_mtp.signature import FORMS
from case_states import recompute_decode_state
from helpers import preprocess_attrs
from test_signature import REFERENCES

IDS = [f"{r[0]}-{r[1]}" for r in REFERENCES]


def _message(fn, state, attrs):
    with pytest.raises(TypeError) as info:
        fn(state, **attrs)
    text = str(info.value)
    assert "\n" not in text, text
    return text


@pytest.mark.parametrize("form,op,fn,make,attrs", REFERENCES, ids=IDS)
def test_the_reference_names_every_missing_tensor(form, op, fn, make, attrs):
    """Each pair of the table's tensors taken out (the first and last, and
    two side by side): both named, in the table's order."""
    s = make(np.random.default_rng(5))
    names = FORMS[form][op].input_names
    for gone in ([names[0], names[-1]], names[1:3], list(names)):
        lacking = {n: a for n, a in states.copy_state(s).items() if n not in gone}
        text = _message(fn, lacking, attrs)
        assert text == f"{op} ({form} form): the state lacks {', '.join(gone)}", text


@pytest.mark.parametrize("form,op,fn,make,attrs", REFERENCES, ids=IDS)
def test_the_reference_names_every_unknown_tensor(form, op, fn, make, attrs):
    s = make(np.random.default_rng(5))
    extra = dict(states.copy_state(s), seq_lens_encoder_=np.zeros(6, np.int32),
                 mask_rollback_=np.zeros(6, np.int32))
    text = _message(fn, extra, attrs)
    assert text == (f"{op} ({form} form): the state has seq_lens_encoder_, mask_rollback_, "
                    "which its table does not name"), text
    assert all(np.array_equal(extra[n], s[n]) for n in s)


@pytest.mark.parametrize("form,op,fn,make,attrs", REFERENCES, ids=IDS)
def test_the_reference_names_missing_and_unknown_tensors_together(form, op, fn, make, attrs):
    """A state of another version of the table (one tensor renamed): both
    sides of the rename in one line."""
    s = make(np.random.default_rng(5))
    names = FORMS[form][op].input_names
    renamed = dict(states.copy_state(s))
    renamed[names[1] + "_old"] = renamed.pop(names[1])
    del renamed[names[-1]]
    text = _message(fn, renamed, attrs)
    assert text == (f"{op} ({form} form): the state lacks {names[1]}, {names[-1]}; it has "
                    f"{names[1]}_old, which its table does not name"), text


# ---------------------------------------------------------------------------
# The models of FastDeploy's kernels

MODELS = {"pr5245": reference_fastdeploy.draft_model_preprocess_pr5245,
          "pr5738": reference_fastdeploy.draft_model_preprocess_pr5738,
          "xpu": reference_fastdeploy.draft_model_preprocess_xpu}
ATTRS = preprocess_attrs(3, v1=True)


def kernel_state(form):
    s = recompute_decode_state(3, bsz=2)
    return {n: s[n] for n in FORMS[form]["draft_model_preprocess"].input_names}


def _wrong(dtype):
    """A dtype of the same kind that is not `dtype` (int32 for int64 and the
    other way round; uint8 for bool, the same size)."""
    return {np.dtype(np.int64): np.int32, np.dtype(np.int32): np.int64,
            np.dtype(bool): np.uint8}[np.dtype(dtype)]


@pytest.mark.parametrize("form,name", [(f, t.name) for f in MODELS
                                       for t in FORMS[f]["draft_model_preprocess"].inputs])
def test_a_kernel_model_refuses_any_tensor_of_the_wrong_dtype(form, name):
    """Read or written: a read tensor of another dtype is read as other
    numbers than FastDeploy's kernel reads (an int32 step_idx, a uint8
    flag)."""
    s = kernel_state(form)
    sig = FORMS[form]["draft_model_preprocess"]
    t = next(t for t in sig.inputs if t.name == name)
    s[name] = s[name].astype(_wrong(t.dtype))
    before = {n: a.copy() for n, a in s.items()}
    with pytest.raises(ValueError) as info:
        MODELS[form](s, **ATTRS)
    assert str(info.value) == (f"draft_model_preprocess: {name} is {s[name].dtype}, "
                               f"not {np.dtype(t.dtype)}")
    assert all(a.dtype == before[n].dtype and a.tobytes() == before[n].tobytes()
               for n, a in s.items())


@pytest.mark.parametrize("form", sorted(MODELS))
def test_a_kernel_model_names_every_missing_tensor(form):
    s = kernel_state(form)
    names = FORMS[form]["draft_model_preprocess"].input_names
    for n in (names[0], names[-1]):
        del s[n]
    with pytest.raises(ValueError) as info:
        MODELS[form](s, **ATTRS)
    assert str(info.value) == f"draft_model_preprocess: state lacks {names[0]}, {names[-1]}"
