"""The signature table against the registration, the wrappers and the reference."""

import dataclasses
import inspect
import re
import subprocess
import sys

import numpy as np
import pytest

from fastdeploy_mtp import ops, reference
from fastdeploy_mtp.registration import differences, read_registered
from fastdeploy_mtp.signature import FORMS, OPS
from helpers import preprocess_attrs, to_numpy, to_tensors
from fastdeploy_mtp.harness import states

REPO = __import__("os").path.dirname(__import__("os").path.dirname(__import__("os").path.abspath(__file__)))


@pytest.mark.parametrize("name", sorted(OPS))
def test_registration_matches_table(name):
    assert differences(OPS[name], read_registered(name)) == []


def test_check_notices_a_drifted_table():
    sig = OPS["draft_model_preprocess"]
    swapped = list(sig.inputs)
    swapped[4], swapped[5] = swapped[5], swapped[4]  # seq_lens_encoder <-> seq_lens_decoder
    drifted = dataclasses.replace(sig, inputs=tuple(swapped))
    diffs = differences(drifted, read_registered(sig.name))
    assert any(".inputs" in d for d in diffs) and any(".outputs" in d for d in diffs)


@pytest.mark.parametrize("field", ["inputs", "outputs", "attrs", "inplace"])
def test_check_notices_each_field_on_its_own(field):
    """A registration that differs from the table in one field only (one
    entry dropped) is reported, as that field: attributes and in-place pairs
    matter to a FastDeploy runner as much as the tensors' order."""
    sig = OPS["draft_model_preprocess"]
    reg = read_registered(sig.name)
    value = getattr(reg, field)
    assert len(value) >= 2, field
    fewer = dict(list(value.items())[1:]) if field == "inplace" else tuple(value[1:])
    diffs = differences(sig, dataclasses.replace(reg, **{field: fewer}))
    assert [d.split(":")[0] for d in diffs] == [f"{sig.name}.{field}"], diffs


def test_check_command_exits_zero_and_lists_everything():
    r = subprocess.run([sys.executable, "-m", "fastdeploy_mtp", "check"], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    said = re.split(r"== the (?:recompute|shadow) form", r.stdout)
    assert len(said) == 3 and "== the rollback form" in said[0], r.stdout
    assert r.stdout.index("== the recompute form") < r.stdout.index("== the shadow form")
    for form, out in zip(("rollback", "recompute", "shadow"), said):
        assert f"registration matches fastdeploy_mtp/signature.py (the {form} form)" in out
        for sig in FORMS[form].values():
            assert f"{sig.name}: OK" in out
            for pair in sig.inplace_map.items():
                assert "%s -> %s" % pair in out


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("impl", [ops, reference], ids=["wrapper", "reference"])
def test_python_signatures_follow_table(name, impl):
    if impl is reference and name == "raise_pending_errors":
        pytest.skip("a GPU utility, with nothing to model in numpy")
    sig = OPS[name]
    params = list(inspect.signature(getattr(impl, name)).parameters.values())
    assert tuple(p.name for p in params) == sig.input_names + sig.attr_names
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)


def test_fastdeploy_positional_call():
    """21 tensors in the table's order, then the 4 attributes, straight to the
    registered op as a FastDeploy-style runner calls it, agrees with the
    keyword call through the wrapper."""
    sig = OPS["draft_model_preprocess"]
    assert len(sig.input_names) == 21 and len(sig.attrs) == 4
    s = states.preprocess_state(np.random.default_rng(7), 40, num_model_step=3)
    attrs = preprocess_attrs(3, truncate=True, v1=True)
    a, b = to_tensors(s), to_tensors(s)
    ops.load_library().draft_model_preprocess(*[a[n] for n in sig.input_names],
                                              *[attrs[n] for n in sig.attr_names])
    ops.draft_model_preprocess(**b, **attrs)
    for name, arr in to_numpy(b).items():
        np.testing.assert_array_equal(to_numpy(a)[name], arr, err_msg=name)


def test_mask_positional_call():
    sig = OPS["update_attn_mask_offsets"]
    s = states.mask_state(np.random.default_rng(8), 40)
    a, b = to_tensors(s), to_tensors(s)
    out_a = ops.load_library().update_attn_mask_offsets(*[a[n] for n in sig.input_names])
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
    assert "update_attn_mask_offsets: DIFFERS" in out and "DIFFERENCE" in out


def test_cpp_header_is_rendered_from_the_table():
    """custom_ops/op_signatures.h, which every PD_BUILD_OP reads, is the table."""
    from fastdeploy_mtp.signature import HEADER_PATH, render_cpp_header

    with open(f"{REPO}/{HEADER_PATH}") as f:
        assert f.read() == render_cpp_header(), "run `python -m fastdeploy_mtp signature --write`"
    r = subprocess.run([sys.executable, "-m", "fastdeploy_mtp", "signature"], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "matches" in r.stdout, r.stdout + r.stderr


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


# -- the C++ side: every parameter list typed in C++ against the table -------------------

def _cpp_params(text, opener):
    """The parameters of the C++ function or macro that starts at `opener`
    (its text up to the opening parenthesis, or a #define's name): a list of
    (written, name or None, type) in order."""
    import re

    if opener.startswith("#define "):
        start = text.index(opener) + len(opener)
        end = start
        while True:  # the macro runs to the first line that does not end in a backslash
            nl = text.index("\n", end)
            if not text[:nl].rstrip().endswith("\\"):
                break
            end = nl + 1
        body = text[start:nl].replace("\\\n", " ")
    else:
        start = text.index(opener + "(") + len(opener) + 1
        depth, end = 1, start
        while depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        body = text[start:end - 1]
    params = []
    for p in (x.strip() for x in body.split(",")):
        m = re.fullmatch(r"(const\s+)?paddle::Tensor\s*&\s*(\w+)?", p)
        if m:
            params.append((m.group(1) is None, m.group(2), "tensor"))
            continue
        m = re.fullmatch(r"(int|bool)(?:\s+(\w+))?", p)
        assert m, f"{opener}: unexpected parameter {p!r}"
        params.append((None, m.group(2), m.group(1)))
    return params


def _read(path):
    with open(f"{REPO}/{path}") as f:
        return f.read()


# (file, the function or macro, the op, whether constness must say what is written)
CPP_SIGNATURES = [
    ("custom_ops/draft_model_preprocess_op.cc", "void DraftModelPreprocess",
     "draft_model_preprocess", True),
    ("custom_ops/update_attn_mask_offsets_op.cc", "std::vector<paddle::Tensor> UpdateAttnMaskOffsets",
     "update_attn_mask_offsets", True),
    ("custom_ops/pending_errors_op.cc", "void RaisePendingErrors", "raise_pending_errors", True),
    ("custom_ops/bench/bench_ops.cc", "void BenchBaselinePreprocess", "draft_model_preprocess",
     True),
    ("custom_ops/bench/bench_ops.cc", "std::vector<paddle::Tensor> BenchBaselineMask",
     "update_attn_mask_offsets", True),
    ("custom_ops/bench/bench_ops.cc", "#define PREPROCESS_PARAMS", "draft_model_preprocess", False),
    ("custom_ops/bench/bench_ops.cc", "#define MASK_PARAMS", "update_attn_mask_offsets", False),
    ("custom_ops/draft_model_preprocess_op.cc", "void DraftModelPreprocessRecompute",
     "recompute:draft_model_preprocess", True),
    ("custom_ops/bench/bench_ops.cc", "void BenchBaselinePreprocessRecompute",
     "recompute:draft_model_preprocess", True),
    ("custom_ops/draft_model_preprocess_op.cc", "void DraftModelPreprocessShadow",
     "shadow:draft_model_preprocess", True),
    ("custom_ops/update_attn_mask_offsets_op.cc",
     "std::vector<paddle::Tensor> UpdateAttnMaskOffsetsShadow", "shadow:update_attn_mask_offsets",
     True),
    ("custom_ops/bench/bench_ops.cc", "void BenchBaselinePreprocessShadow",
     "shadow:draft_model_preprocess", True),
    ("custom_ops/bench/bench_ops.cc", "std::vector<paddle::Tensor> BenchBaselineMaskShadow",
     "shadow:update_attn_mask_offsets", True),
]


@pytest.mark.parametrize("path,opener,name,constness", CPP_SIGNATURES,
                         ids=[f"{p.split('/')[-1]}:{o.split()[-1]}" for p, o, _, _ in CPP_SIGNATURES])
def test_cpp_parameters_follow_table(path, opener, name, constness):
    """A binding's C++ parameters are the table's inputs then its attributes,
    in order, by name (an unnamed one is one the function does not read), and
    exactly the inputs written in place are non-const references (a form's
    undeclared written ones come by const reference, as Paddle passes them)."""
    form, _, name = name.rpartition(":")
    sig = FORMS[form or "rollback"][name]
    params = _cpp_params(_read(path), opener)
    tensors = [p for p in params if p[2] == "tensor"]
    attrs = [p for p in params if p[2] != "tensor"]
    assert len(tensors) == len(sig.inputs), (opener, len(tensors))
    for (written, pname, _), t in zip(tensors, sig.inputs):
        assert pname in (None, t.name), (opener, pname, t.name)
        if constness:
            assert written == (t.name in sig.declared), (opener, t.name)
    assert [ty for _, _, ty in attrs] == [a.type.__name__ for a in sig.attrs], opener
    for (_, pname, _), a in zip(attrs, sig.attrs):
        assert pname in (None, a.name), (opener, pname, a.name)


@pytest.mark.parametrize("form,opener", [("rollback", "inline PreprocessTensors preprocess_views"),
                                         ("recompute", "inline PreprocessTensors recompute_views"),
                                         ("shadow", "inline PreprocessTensors shadow_views")])
def test_the_views_take_the_tables_tensors_in_its_order(form, opener):
    """tensor_views.h's views of a form take the tensors the rules read, a
    subsequence of that form's inputs, non-const exactly where the table
    declares the tensor written in place."""
    sig = FORMS[form]["draft_model_preprocess"]
    params = _cpp_params(_read("custom_ops/tensor_views.h"), opener)
    names = [n for _, n, _ in params]
    assert names == [n for n in sig.input_names if n in names]
    for written, n, _ in params:
        assert written == (n in sig.declared), n
    # and a field is filled from each of them (the recompute form's through
    # preprocess_views, but its own two)
    text = _read("custom_ops/tensor_views.h")
    for n in names:
        assert f"{n}.data<" in text, n


@pytest.mark.parametrize("path", ["custom_ops/draft_model_preprocess_op.cc",
                                  "custom_ops/update_attn_mask_offsets_op.cc"])
def test_each_boundary_check_names_its_own_tensor(path):
    """c.vector(x, "x", ...): the name in a refusal is the tensor checked, and
    every input of the table is checked."""
    import re

    text = _read(path)
    name = "draft_model_preprocess" if "preprocess" in path else "update_attn_mask_offsets"
    checked = re.findall(r"c\.\w+\((\w+), \"(\w+)\"", text)
    assert checked and all(var == said for var, said in checked), checked
    # Every form's inputs (the preprocess binding holds each form's).
    assert {v for v, _ in checked} == {n for ops in FORMS.values() for n in ops[name].input_names}


def test_the_wrappers_pass_the_tables_tensors_in_its_order():
    """ops.py hands the op its tensors in one tuple; it lists the table's inputs."""
    import ast

    tree = ast.parse(_read("fastdeploy_mtp/ops.py"))
    seen = 0
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in OPS):
        for node in ast.walk(fn):
            if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id == "tensors" and isinstance(node.value, ast.Tuple)):
                assert [e.id for e in node.value.elts] == list(OPS[fn.name].input_names)
                seen += 1
    assert seen >= 2
