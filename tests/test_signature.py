"""The signature table against the registration, the wrappers and the reference."""

import dataclasses
import inspect
import re
import subprocess
import sys

import numpy as np
import pytest

from fastdeploy_mtp import forms, ops, reference
from fastdeploy_mtp.registration import differences, read_registered
from fastdeploy_mtp.signature import FORMS, OPS, op_name
from fastdeploy_mtp.signature_cpp import GENERATED_HEADERS, cpp_checks, cpp_params, cpp_views
from helpers import preprocess_attrs, to_numpy, to_tensors
from fastdeploy_mtp.harness import states

REPO = __import__("os").path.dirname(__import__("os").path.dirname(__import__("os").path.abspath(__file__)))


@pytest.mark.parametrize("name", sorted(OPS))
def test_registration_matches_table(name):
    assert differences(OPS[name], read_registered(op_name("rollback", OPS[name]))) == []


def test_check_notices_a_drifted_table():
    sig = OPS["draft_model_preprocess"]
    swapped = list(sig.inputs)
    swapped[4], swapped[5] = swapped[5], swapped[4]  # seq_lens_encoder <-> seq_lens_decoder
    drifted = dataclasses.replace(sig, inputs=tuple(swapped))
    diffs = differences(drifted, read_registered(op_name("rollback", sig)))
    assert any(".inputs" in d for d in diffs) and any(".outputs" in d for d in diffs)


@pytest.mark.parametrize("field", ["inputs", "outputs", "attrs", "inplace"])
def test_check_notices_each_field_on_its_own(field):
    """A registration that differs from the table in one field only (one
    entry dropped) is reported, as that field: attributes and in-place pairs
    matter to a FastDeploy runner as much as the tensors' order."""
    sig = OPS["draft_model_preprocess"]
    reg = read_registered(op_name("rollback", sig))
    value = getattr(reg, field)
    assert len(value) >= 2, field
    fewer = dict(list(value.items())[1:]) if field == "inplace" else tuple(value[1:])
    diffs = differences(sig, dataclasses.replace(reg, **{field: fewer}))
    assert [d.split(":")[0] for d in diffs] == [f"{sig.name}.{field}"], diffs


def test_check_command_exits_zero_and_lists_everything():
    r = subprocess.run([sys.executable, "-m", "fastdeploy_mtp", "check"], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    said = re.split(r"== the \w+ form\n", r.stdout)[1:]
    assert re.findall(r"== the (\w+) form\n", r.stdout) == list(FORMS), r.stdout
    assert r.stdout.endswith("registration matches fastdeploy_mtp/signature.py "
                             f"({', '.join(FORMS)})\n"), r.stdout
    for form, out in zip(FORMS, said):
        for sig in FORMS[form].values():
            assert f"{op_name(form, sig)}: OK" in out
            for pair in sig.inplace_map.items():
                assert "%s -> %s" % pair in out


@pytest.mark.parametrize("name", sorted(OPS))
def test_python_signatures_follow_table(name):
    sig = OPS[name]
    params = list(inspect.signature(getattr(ops, name)).parameters.values())
    assert tuple(p.name for p in params) == sig.input_names + sig.attr_names
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)


def _k3(make):
    return lambda rng: make(rng, 6, num_model_step=3)


# (form, op, numpy reference, a valid state of the form's table, the attributes).
REFERENCES = [
    ("rollback", "draft_model_preprocess", reference.draft_model_preprocess,
     _k3(states.preprocess_state), preprocess_attrs(3, v1=True)),
    ("recompute", "draft_model_preprocess", reference.draft_model_preprocess_recompute,
     _k3(states.recompute_state), preprocess_attrs(3, v1=True)),
    ("shadow", "draft_model_preprocess", reference.draft_model_preprocess_shadow,
     _k3(states.shadow_state), dict(num_model_step=3, is_splitwise_prefill=False)),
    ("rollback", "update_attn_mask_offsets", reference.update_attn_mask_offsets,
     lambda rng: states.mask_state(rng, 6), {}),
    ("pr6403", "update_attn_mask_offsets", reference.update_attn_mask_offsets_pr6403,
     lambda rng: states.mask_state(rng, 6), {}),
    ("shadow", "update_attn_mask_offsets", reference.update_attn_mask_offsets_shadow,
     lambda rng: states.shadow_mask_state(rng, 6), {}),
]


@pytest.mark.parametrize("form,op,fn,make,attrs", REFERENCES,
                         ids=[f"{r[0]}-{r[1]}" for r in REFERENCES])
def test_the_reference_takes_its_forms_state(form, op, fn, make, attrs):
    """The numpy reference takes the state as a dict keyed by the form's
    table, then the op's attributes; a state without one of the table's
    tensors, or with a tensor the table does not name, is refused naming it,
    with nothing changed."""
    sig = FORMS[form][op]
    assert list(inspect.signature(fn).parameters) == ["state", *sig.attr_names]
    s = make(np.random.default_rng(5))
    fn(states.copy_state(s), **attrs)
    for name in sig.input_names:
        lacking = {n: a for n, a in states.copy_state(s).items() if n != name}
        with pytest.raises(TypeError, match=rf"^{op} \({form} form\): the state lacks {name}$"):
            fn(lacking, **attrs)
    extra = dict(states.copy_state(s), recompute_token_num_=np.zeros(6, np.int32))
    with pytest.raises(TypeError, match=r"the state has recompute_token_num_, which"):
        fn(extra, **attrs)
    assert all(np.array_equal(extra[n], s[n]) for n in s)


def test_fastdeploy_positional_call():
    """21 tensors in the table's order, then the 4 attributes, straight to the
    registered op as a FastDeploy-style runner calls it, agrees with the
    keyword call through the wrapper."""
    sig = OPS["draft_model_preprocess"]
    assert len(sig.input_names) == 21 and len(sig.attrs) == 4
    s = states.preprocess_state(np.random.default_rng(7), 40, num_model_step=3)
    attrs = preprocess_attrs(3, truncate=True, v1=True)
    a, b = to_tensors(s), to_tensors(s)
    forms.load("rollback").library.draft_model_preprocess(*[a[n] for n in sig.input_names],
                                              *[attrs[n] for n in sig.attr_names])
    ops.draft_model_preprocess(**b, **attrs)
    for name, arr in to_numpy(b).items():
        np.testing.assert_array_equal(to_numpy(a)[name], arr, err_msg=name)


def test_mask_positional_call():
    sig = OPS["update_attn_mask_offsets"]
    s = states.mask_state(np.random.default_rng(8), 40)
    a, b = to_tensors(s), to_tensors(s)
    out_a = forms.load("rollback").library.update_attn_mask_offsets(*[a[n] for n in sig.input_names])
    out_b = ops.update_attn_mask_offsets(**b)
    np.testing.assert_array_equal(out_a[0].numpy(), out_b.numpy())
    for name, arr in to_numpy(b).items():
        np.testing.assert_array_equal(to_numpy(a)[name], arr, err_msg=name)


@pytest.mark.parametrize("name", ["draft_model_preprocess", "update_attn_mask_offsets"])
def test_written_tensors_are_exactly_the_declared_ones(name):
    """Diff every input before and after: whatever changes must be declared in
    place, and every declared tensor does change on some state."""
    sig = OPS[name]
    changed_somewhere = set()
    for seed in range(30):
        rng = np.random.default_rng(seed)
        if name == "draft_model_preprocess":
            k = 1 + seed % 4
            s = states.preprocess_state(rng, 30, num_model_step=k, splitwise_prefill=seed % 5 == 0)
            t = to_tensors(s)
            ops.draft_model_preprocess(**t, **preprocess_attrs(k, splitwise=seed % 5 == 0,
                                                              v1=seed % 2 == 0))
        else:
            s = states.mask_state(rng, 30)
            t = to_tensors(s)
            ops.update_attn_mask_offsets(**t)
        after = to_numpy(t)
        for n in sig.input_names:
            if not np.array_equal(after[n], s[n]):
                assert n in sig.written, f"{name} changed {n}, which is not declared in place"
                changed_somewhere.add(n)
    assert changed_somewhere == set(sig.written)


def test_raise_pending_errors_is_a_no_op_on_the_cpu():
    x = to_tensors({"x": np.arange(4)})["x"]
    ops.raise_pending_errors(x)
    np.testing.assert_array_equal(x.numpy(), np.arange(4))


def test_check_command_fails_on_a_drifted_table(monkeypatch, capsys):
    from fastdeploy_mtp import __main__ as cli, registration as reg_mod

    sig = OPS["update_attn_mask_offsets"]
    drifted = dataclasses.replace(sig, inputs=sig.inputs[::-1])
    monkeypatch.setitem(reg_mod.FORMS, "rollback", {sig.name: drifted})
    assert cli.main(["check", "--form", "rollback"]) == 1
    out = capsys.readouterr().out
    assert "update_attn_mask_offsets_rollback: DIFFERS" in out and "DIFFERENCE" in out


def test_no_registration_spells_names_itself():
    """Every PD_BUILD_OP takes its lists from op_signatures.h."""
    import glob
    import re

    for path in glob.glob(f"{REPO}/custom_ops/**/*.cc", recursive=True):
        text = open(path).read()
        for call in re.findall(r"\.(?:Inputs|Outputs|Attrs|SetInplaceMap)\(([^)]*)\)", text):
            assert '"' not in call, f"{path}: {call}"


@pytest.mark.parametrize("name", ["draft_model_preprocess", "update_attn_mask_offsets"])
def test_wrapper_help_shows_the_table(name):
    sig = OPS[name]
    doc = getattr(ops, name).__doc__
    for t in sig.inputs:
        assert f"``{t.name}``" in doc and t.doc in doc
    for a in sig.attrs:
        assert f"``{a.name}`` ({a.type.__name__}): {a.doc}" in doc


@pytest.mark.parametrize("name", sorted(OPS))
def test_table_dtypes_are_the_ones_the_op_checks(name):
    """The op refuses any other dtype with a message naming the table's."""
    if name == "raise_pending_errors":
        pytest.skip("takes any tensor")
    sig = OPS[name]
    k = 2
    base = (states.preprocess_state(np.random.default_rng(0), 4, num_model_step=k)
            if name == "draft_model_preprocess" else states.mask_state(np.random.default_rng(0), 4))
    attrs = preprocess_attrs(k) if name == "draft_model_preprocess" else {}
    for t in sig.inputs:
        if t.dtype is None:
            continue
        s = {n: v.copy() for n, v in base.items()}
        other = np.float32 if t.dtype is not np.float32 else np.int32
        s[t.name] = s[t.name].astype(other)
        want = np.dtype(t.dtype).name
        with pytest.raises(ops.BadInputError, match=f"{t.name} must be {want}, got float32"):
            getattr(ops, name)(**to_tensors(s), **attrs)


# -- the C++ side: rendered from the table --------------------------------------------

# Every table with a rendered binding, as (form, op), and its table.
BOUND = [(form, name) for form, ops in FORMS.items() for name, sig in ops.items() if sig.views]


def _sig(form_op):
    form, name = form_op
    return FORMS[form][name]


def _read(path):
    with open(f"{REPO}/{path}") as f:
        return f.read()


@pytest.mark.parametrize("path", sorted(GENERATED_HEADERS))
def test_generated_headers_are_the_tables(path):
    """custom_ops/op_signatures.h (every PD_BUILD_OP's lists) and op_bindings.h
    (every binding's parameters, checks and views) are what the table renders."""
    assert _read(path) == GENERATED_HEADERS[path](), \
        "run `python -m fastdeploy_mtp signature --write`"


def test_signature_command_checks_every_generated_header():
    r = subprocess.run([sys.executable, "-m", "fastdeploy_mtp", "signature"], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    for path in GENERATED_HEADERS:
        assert f"{path} matches fastdeploy_mtp/signature.py" in r.stdout, r.stdout


def test_signature_command_fails_on_a_stale_header(monkeypatch, capsys):
    from fastdeploy_mtp import __main__ as cli

    path = "custom_ops/op_bindings.h"
    monkeypatch.setitem(GENERATED_HEADERS, path, lambda: "// another table\n")
    assert cli.main(["signature"]) == 1
    out = capsys.readouterr().out
    assert f"{path} DIFFERS" in out and "op_signatures.h matches" in out, out


@pytest.mark.parametrize("form_op", BOUND, ids=[f"{f}:{n}" for f, n in BOUND])
def test_kernel_parameters_are_the_tables(form_op):
    """The kernel function's parameters: the table's inputs then its
    attributes, in order, by name; exactly the inputs declared in place by
    non-const reference (a form's undeclared written ones come by const
    reference, as Paddle passes them)."""
    sig = _sig(form_op)
    params = cpp_params(sig)
    assert len(params) == len(sig.inputs) + len(sig.attrs)
    for p, t in zip(params, sig.inputs):
        want = "paddle::Tensor& " if t.name in sig.declared else "const paddle::Tensor& "
        assert p == want + t.name, p
    assert params[len(sig.inputs):] == [f"{a.type.__name__} {a.name}" for a in sig.attrs]
    undeclared = [p for p, t in zip(params, sig.inputs) if t.written and t.name in sig.undeclared]
    assert all(p.startswith("const ") for p in undeclared)


def _check_calls(sig):
    """(method, tensor variable, the name it reports, the rest of its arguments)
    of each ArgChecker call the rendered checks make, in order."""
    calls = []
    for line in cpp_checks(sig):
        m = re.match(r'(?:const int64_t bsz = )?c\.(\w+)\((?:(\w+), "(\w+)")?(.*)\);$', line)
        if m:
            calls.append(m.groups())
    return calls


@pytest.mark.parametrize("form_op", BOUND, ids=[f"{f}:{n}" for f, n in BOUND])
def test_checks_list_every_input_once_in_order(form_op):
    """Each tensor is checked once (the batch tensor also for its length, first),
    each under its own name, in the table's check order, then the overlap check."""
    sig = _sig(form_op)
    calls = _check_calls(sig)
    assert calls[-1][0] == "no_overlap"
    calls = calls[:-1]
    assert all(var == said for _, var, said, _ in calls), calls
    names = [var for _, var, _, _ in calls]
    length_of_batch = names.index(sig.batch)
    assert calls[length_of_batch][0] == "length_only"
    del names[length_of_batch]
    assert names == list(sig.check_order)
    assert sorted(names) == sorted(sig.input_names)


def test_the_check_order_is_the_bindings():
    """The order the refusal tests see: the preprocess op checks
    seq_lens_this_time (the batch size) first and not_need_stop (compared with
    the others' device) last, the rest in input order; the mask op checks in
    input order."""
    for form, ops in FORMS.items():
        pre, mask = ops["draft_model_preprocess"], ops["update_attn_mask_offsets"]
        middle = tuple(n for n in pre.input_names if n not in ("seq_lens_this_time",
                                                                "not_need_stop"))
        assert pre.check_order == ("seq_lens_this_time",) + middle + ("not_need_stop",), form
        assert mask.check_order == mask.input_names, form
    assert _check_calls(OPS["update_attn_mask_offsets"])[0][:2] == ("length_only",
                                                                    "ids_remove_padding")


_DTYPES = {np.int64: "INT64", np.int32: "INT32", np.bool_: "BOOL"}
CTYPES = {np.int64: "int64_t", np.int32: "int32_t", np.bool_: "bool"}
_ACCESS = {"W": "Access::kWritten", "R": "Access::kRead", "U": "Access::kUnread"}


@pytest.mark.parametrize("form_op", BOUND, ids=[f"{f}:{n}" for f, n in BOUND])
def test_checks_use_the_tables_kind_dtype_and_access(form_op):
    sig = _sig(form_op)
    for method, var, _, rest in _check_calls(sig)[:-1]:
        t = sig.input(var)
        if method == "length_only":
            assert t.check == "length" or var == sig.batch, var
            continue
        if method == "host_or_device_flag":  # bool, written: checked in tensor_checks.h
            assert (t.check, t.dtype, t.access) == ("flag", np.bool_, "W"), var
            continue
        assert method == t.check, var
        args = [a.strip() for a in rest.split(",")[1:]]
        assert args[:3] == [f"paddle::DataType::{_DTYPES[t.dtype]}", "bsz", _ACCESS[t.access]], var
        assert args[3:] == ([str(t.min_cols)] if t.min_cols else []), var


def _form_state(form, rng, k):
    """A valid draft_model_preprocess state of `form`'s table."""
    if form == "shadow":
        return states.shadow_state(rng, 12, num_model_step=k)
    if form == "rollback":
        return states.preprocess_state(rng, 12, num_model_step=k)
    s = states.recompute_state(rng, 12, num_model_step=k)
    return {n: s[n] for n in FORMS[form]["draft_model_preprocess"].input_names}


@pytest.mark.parametrize("form", list(FORMS))
def test_a_tensor_the_table_says_is_unread_changes_nothing(form):
    """Each preprocess input the form's table marks unread (the rollback
    form's base_model_seq_lens_this_time, the xpu form's mask_rollback and
    recompute_token_num, ...) may hold anything: the op leaves every other
    tensor as it does with the tensor's own values, and leaves it as it was."""
    sig = FORMS[form]["draft_model_preprocess"]
    unread = [t.name for t in sig.inputs if t.access == "U"]
    assert unread, form
    for seed in range(6):
        rng = np.random.default_rng(seed)
        k = 1 + seed % 3
        s = _form_state(form, rng, k)
        attrs = ({"num_model_step": k, "is_splitwise_prefill": seed % 3 == 0} if form == "shadow"
                 else preprocess_attrs(k, truncate=seed % 2 == 0, v1=seed < 3))
        t = to_tensors(s)
        forms.load(form).draft_model_preprocess(**t, **attrs)
        want = to_numpy(t)
        for name in unread:
            info = np.iinfo(s[name].dtype)
            garbage = rng.integers(info.min, info.max, s[name].shape, dtype=s[name].dtype,
                                   endpoint=True)
            t = to_tensors(dict(s, **{name: garbage}))
            forms.load(form).draft_model_preprocess(**t, **attrs)
            got = to_numpy(t)
            np.testing.assert_array_equal(got[name], garbage, err_msg=f"{form}: {name} written")
            for n in s:
                if n != name:
                    np.testing.assert_array_equal(got[n], want[n],
                                                  err_msg=f"{form}: {name} changed {n}")


def test_a_tensor_the_rules_read_has_a_view_and_one_never_read_has_none():
    for form in FORMS:
        sig = FORMS[form]["draft_model_preprocess"]
        assert all(bool(t.view.fields()) == (t.access != "U") for t in sig.inputs
                   if t.check != "flag"), form


def test_the_attribute_minimum_is_checked_first():
    for form in FORMS:
        lines = cpp_checks(FORMS[form]["draft_model_preprocess"])
        assert lines[0] == ('MTP_CHECK(num_model_step >= 1, "draft_model_preprocess", '
                            '": num_model_step must be >= 1, got ", num_model_step);'), form


def _struct_fields(name):
    """The fields of struct `name` of custom_ops/mtp_bookkeeping.h."""
    text = _read("custom_ops/mtp_bookkeeping.h")
    body = text[text.index(f"struct {name} {{"):]
    body = re.sub(r"//[^\n]*", "", body[:body.index("};")])
    return set(re.findall(r"(\w+)\s*;", body))


def _view_lines(sig):
    """{field of the views: the statement that fills it} of the rendered views."""
    out = {}
    for line in cpp_views(sig):
        m = re.match(r"v\.t\.(\w+) = (.*);$", line)
        if m:
            assert m.group(1) not in out, f"{m.group(1)} filled twice"
            out[m.group(1)] = m.group(2)
    return out


@pytest.mark.parametrize("form_op", BOUND, ids=[f"{f}:{n}" for f, n in BOUND])
def test_views_fill_each_field_from_its_tensor(form_op):
    """Each tensor the rules read fills its fields of the views from itself,
    once (its data as the table's dtype, its columns, length or element
    count); a written tensor Paddle hands by const reference is written
    through a const_cast, and only such a one."""
    sig = _sig(form_op)
    lines = _view_lines(sig)
    assert set(lines) <= _struct_fields(sig.views)
    for t in sig.inputs:
        for field, what in t.view.fields():
            value = lines.pop(field)
            if what == "data":
                plain = f"{t.name}.data<{CTYPES[t.dtype]}>()"
                writable = t.written and t.name not in sig.declared
                assert value == (f"const_cast<{CTYPES[t.dtype]}*>({plain})" if writable
                                 else plain), value
            else:
                assert value == {"cols": f"{t.name}.shape()[1]", "rows": f"{t.name}.shape()[0]",
                                 "numel": f"{t.name}.numel()"}[what], (field, value)
    assert lines == {}
    rendered = cpp_views(sig)
    assert f"v.bsz = {sig.batch}.shape()[0];" in rendered
    flags = [t.name for t in sig.inputs if t.check == "flag"]
    assert [ln for ln in rendered if ln.startswith("v.flag")] == [f"v.flag = &{n};" for n in flags]


@pytest.mark.parametrize("views", ["PreprocessTensors", "MaskTensors"])
def test_every_field_of_the_views_is_some_forms(views):
    """A field no form fills would be null in every form (the mask op's
    output is the binding's, made after the checks)."""
    filled = {f for form_op in BOUND if _sig(form_op).views == views
              for f in _view_lines(_sig(form_op))}
    assert _struct_fields(views) - filled == ({"out"} if views == "MaskTensors" else set())


def test_the_shadow_forms_fixed_attributes():
    """The shadow form has no truncate_first_token (its first token goes to
    E - 1) and no kvcache_scheduler_v1 (nothing is parked or dropped)."""
    lines = cpp_views(FORMS["shadow"]["draft_model_preprocess"])
    assert [ln for ln in lines if ln.startswith("v.attrs.")] == [
        "v.attrs.num_model_step = num_model_step;",
        "v.attrs.splitwise_prefill = is_splitwise_prefill;",
        "v.attrs.truncate_first_token = true;", "v.attrs.kvcache_scheduler_v1 = false;"]


# The hand-written C++ files of the binding layer: the forms' tensors reach
# them only through the generated files' macros and functions.
HAND_WRITTEN = ["custom_ops/op_dispatch.h", "custom_ops/pending_errors_op.cc",
                "custom_ops/tensor_views.h", "custom_ops/tensor_checks.h",
                "custom_ops/bench/bench_ops.cc"]


def _code(text):
    """C++ source without its comments and string literals."""
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"', " ", text, flags=re.S)


@pytest.mark.parametrize("path", HAND_WRITTEN)
def test_no_hand_written_binding_names_a_tensor(path):
    names = {t.name for form_op in BOUND for t in _sig(form_op).inputs}
    spelled = {m.group(1) for m in re.finditer(r"(?<![.>\w])(\w+)\b", _code(_read(path)))}
    assert spelled & names == set(), f"{path} spells {sorted(spelled & names)}"


def test_no_hand_written_binding_names_a_tensor_catches_one():
    code = _code('c.vector(seq_lens_this_time, "seq_lens_this_time"); // draft_tokens\n'
                 "v.t.draft_tokens = 0;")
    found = {m.group(1) for m in re.finditer(r"(?<![.>\w])(\w+)\b", code)}
    assert "seq_lens_this_time" in found and "draft_tokens" not in found
