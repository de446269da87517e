"""What the signature table (fastdeploy_mtp/signature.py) makes the raw ops
refuse, seen by behaviour in every form: the table renders the C++ bindings'
checks (custom_ops/op_bindings.h), so a changed access letter, check kind or
attribute minimum changes what a raw op takes, and these tests see that
change after the bindings are rendered again (not only as a generated file
that no longer matches its table).

What each test expects comes from other facts than the field it guards: a
tensor the rules read is one whose pointer fills the rules' views (its View),
whatever its access letter; a per-request vector is one its doc gives as
"[N]" or "[bsz]", whatever its check; the least num_model_step is 1 in every
form (each rolls back num_model_step - 1 tokens)."""

import re

import pytest

from fastdeploy_mtp import forms
from fastdeploy_mtp.signature import FORMS, W
from helpers import DEVICES
from raw_op import assert_raw_alias_refused, assert_raw_refused
from test_form_limits import attrs_of, decode_state, mask_state

OPS = ("draft_model_preprocess", "update_attn_mask_offsets")


def state_of(form, op):
    return decode_state(form) if op == "draft_model_preprocess" else mask_state(form)


def raw_attrs(form, op):
    return tuple(attrs_of(form).values()) if op == "draft_model_preprocess" else ()


def per_request(sig):
    return [t.name for t in sig.inputs if re.match(r"\[(N|bsz)\]( |$)", t.doc)]


def read_by_the_rules(sig):
    """The inputs whose data the rules read and never write."""
    return [t.name for t in sig.inputs if t.view.data is not None and t.access != W]


def alias_cases():
    """(form, op, a tensor the rules read, a written tensor of its dtype and
    shape in the form's state)."""
    cases = []
    for form in FORMS:
        for op in OPS:
            sig, s = FORMS[form][op], state_of(form, op)
            for r in read_by_the_rules(sig):
                w = next((t.name for t in sig.inputs if t.written and t.name != r
                          and s[t.name].dtype == s[r].dtype and s[t.name].shape == s[r].shape),
                         None)
                if w is not None:
                    cases.append((form, op, r, w))
    return cases


ALIASES = alias_cases()


def test_every_form_has_alias_cases():
    assert {f for f, *_ in ALIASES} == set(FORMS)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form,op,read,written", ALIASES)
def test_a_tensor_the_rules_read_passed_as_a_written_one_is_refused(device, form, op, read,
                                                                    written):
    """The op would read what it writes in the same call: refused, naming
    both, nothing changed."""
    sig = FORMS[form][op]
    assert_raw_alias_refused(forms.load(form).library, sig, state_of(form, op), written, read,
                             raw_attrs(form, op), device)


VECTORS = [(form, op, name) for form in FORMS for op in OPS
           for name in per_request(FORMS[form][op])]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form,op,name", VECTORS)
def test_a_per_request_vector_of_two_columns_is_refused_in_every_form(device, form, op, name):
    """[N, 2] read as [N] would give every second value: refused, naming it."""
    s = state_of(form, op)
    s[name] = s[name].reshape(-1, 1).repeat(2, axis=1)
    assert_raw_refused(forms.load(form).library, FORMS[form][op], s, raw_attrs(form, op),
                       f"{name} must have shape [N] or [N, 1]", device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("k", [0, -1])
def test_every_form_s_raw_op_refuses_num_model_step_below_1(device, form, k):
    attrs = dict(attrs_of(form), num_model_step=k)
    assert_raw_refused(forms.load(form).library, FORMS[form]["draft_model_preprocess"],
                       decode_state(form), tuple(attrs.values()),
                       f"num_model_step must be >= 1, got {k}", device)
