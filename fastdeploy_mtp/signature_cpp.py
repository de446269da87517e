"""The C++ side of the signature table (``fastdeploy_mtp.signature``),
rendered from it: the registered lists, each binding's parameter list,
boundary checks and views of the tensors, the forms' enumeration, every
form's registrations and its FastDeploy-shaped benchmark baselines
(``GENERATED_HEADERS``). ``python -m fastdeploy_mtp signature --write``
writes them; a test fails when a file and the table differ.
"""

from __future__ import annotations

from typing import Callable, Dict, List

import numpy as np

from .signature import (DEFAULT_FORM, FLAG, FLAT, FORMS, LENGTH, MATRIX, R, U, VECTOR, W,
                        OpSignature, TensorArg, mask_form, op_name, preprocess_form,
                        table_owner)


def macro_prefix(form: str, sig: OpSignature) -> str:
    """The C++ macros' prefix of `sig` in `form`: MTP_<OP> where the default
    form's table registers it, else MTP_<FORM>_<OP> of the first form that
    has it (table_owner)."""
    owner = table_owner(sig)
    if owner == DEFAULT_FORM:
        return "MTP_" + sig.name.upper()
    return f"MTP_{owner.upper()}_{sig.name.upper()}"


# The tables in the order their macros are rendered: each form's ops, a table
# shared by several forms once, under its first form's prefix.
def _tables() -> Dict[str, OpSignature]:
    return {macro_prefix(form, sig): sig for form, ops in FORMS.items() for sig in ops.values()}


def _cpp_list(items) -> str:
    return ", ".join(f'"{x}"' for x in items)


_GENERATED = [
    "// Generated from fastdeploy_mtp/signature.py: do not edit; run",
    "// `python -m fastdeploy_mtp signature --write` after changing the table.",
]


def render_cpp_header() -> str:
    """custom_ops/op_signatures.h: the registered lists, for PD_BUILD_OP."""
    lines = _GENERATED + [
        "// Each op's registered inputs, outputs, attributes and in-place pairs, for",
        "// PD_BUILD_OP(...).Inputs({..._INPUTS}) and the like.",
        "#pragma once",
        "",
    ]
    for p, sig in _tables().items():
        lines.append(f"#define {p}_INPUTS {_cpp_list(sig.input_names)}")
        lines.append(f"#define {p}_OUTPUTS {_cpp_list(sig.output_names)}")
        if sig.attrs:
            lines.append(f"#define {p}_ATTRS {_cpp_list(a.registration for a in sig.attrs)}")
        pairs = ", ".join(f'{{"{i}", "{o}"}}' for i, o in sig.inplace_map.items())
        lines.append(f"#define {p}_INPLACE {pairs}")
        lines.append("")
    return "\n".join(lines)


# C++ element type and paddle::DataType of each dtype the table names.
_CPP_DTYPES = {np.int64: ("int64_t", "INT64"), np.int32: ("int32_t", "INT32"),
               np.bool_: ("bool", "BOOL")}


_CPP_ACCESS = {W: "Access::kWritten", R: "Access::kRead", U: "Access::kUnread"}


_WIDTH = 100


def _wrapped(head: str, items: List[str], tail: str, indent: str,
             width: int = _WIDTH) -> List[str]:
    """`head` + the items joined by ", " + `tail`, broken into lines of at
    most `width` columns between items; continuation lines start with `indent`."""
    lines, line = [], head
    for k, item in enumerate(items):
        piece = item + (", " if k + 1 < len(items) else tail)
        if len(line) + len(piece.rstrip()) > width and line.strip():
            lines.append(line.rstrip())
            line = indent
        line += piece
    if not items:
        line += tail
    lines.append(line.rstrip())
    return lines


def _macro(name: str, items: List[str]) -> List[str]:
    body = _wrapped("    ", items, "", "    ", _WIDTH - 2)  # room for " \\"
    return [f"#define {name} \\"] + [ln + " \\" for ln in body[:-1]] + [body[-1]]


def cpp_params(sig: OpSignature, named=None, const_all: bool = False) -> List[str]:
    """The kernel function's parameters: each tensor by reference, non-const
    exactly where the op declares it written in place (Paddle hands every
    other input by const reference, FastDeploy's undeclared written ones
    too), then the attributes. `named`: the names to spell (None: all; the
    others are left unnamed); `const_all`: every tensor by const reference."""
    out = []
    for t in sig.inputs:
        const = "" if t.name in sig.declared and not const_all else "const "
        name = t.name if named is None or t.name in named else ""
        out.append(f"{const}paddle::Tensor& {name}".rstrip())
    for a in sig.attrs:
        name = a.name if named is None or a.name in named else ""
        out.append(f"{a.type.__name__} {name}".rstrip())
    return out


def cpp_check(sig: OpSignature, t: TensorArg) -> str:
    """The C++ boundary check of tensor `t` (tensor_checks.h's ArgChecker `c`)."""
    head = f'{t.name}, "{t.name}"'
    if t.check == LENGTH:
        return f"c.length_only({head});"
    if t.check == FLAG:
        return f"c.host_or_device_flag({head});"
    args = f"{head}, paddle::DataType::{_CPP_DTYPES[t.dtype][1]}, bsz, {_CPP_ACCESS[t.access]}"
    if t.check == MATRIX:
        return f"c.matrix({args}{f', {t.min_cols}' if t.min_cols else ''});"
    if t.check in (VECTOR, FLAT):
        return f"c.{t.check}({args});"
    raise ValueError(f"{sig.name}: {t.name} has no boundary check of kind {t.check!r}")


def cpp_checks(sig: OpSignature) -> List[str]:
    """The binding's checks, in order: each attribute's minimum, then each
    tensor in sig.check_order (the batch size first taken from the batch
    tensor's length), then the overlap check."""
    lines = [f'MTP_CHECK({a.name} >= {a.minimum}, "{sig.name}", ": {a.name} must be >= '
             f'{a.minimum}, got ", {a.name});' for a in sig.attrs if a.minimum is not None]
    for name in sig.check_order:
        if name == sig.batch:
            lines.append(f'const int64_t bsz = c.length_only({name}, "{name}");')
        lines.append(cpp_check(sig, sig.input(name)))
    return lines + ["c.no_overlap();"]


def cpp_views(sig: OpSignature) -> List[str]:
    """The statements filling `v`, the binding's OpViews (tensor_views.h): the
    batch size, the tensor that gives it (a tensor on the op's device), the
    flag, each tensor's fields of the rules' views and the attributes."""
    def ref(t: TensorArg) -> str:  # the tensor, writable where the op writes it
        if t.name in sig.declared:
            return f"&{t.name}"
        return f"const_cast<paddle::Tensor*>(&{t.name})" if t.written else f"&{t.name}"

    lines = [f"v.bsz = {sig.batch}.shape()[0];", f"v.device_tensor = &{sig.batch};"]
    lines += [f"v.flag = {ref(t)};" for t in sig.inputs if t.check == FLAG]
    for t in sig.inputs:
        for field, what in t.view.fields():
            if what == "data":
                ctype = _CPP_DTYPES[t.dtype][0]
                value = f"{t.name}.data<{ctype}>()"
                if t.written and t.name not in sig.declared:
                    value = f"const_cast<{ctype}*>({value})"
            else:
                value = {"cols": f"{t.name}.shape()[1]", "rows": f"{t.name}.shape()[0]",
                         "numel": f"{t.name}.numel()"}[what]
            lines.append(f"v.t.{field} = {value};")
    lines += [f"v.attrs.{a.struct_field} = {a.name};" for a in sig.attrs]
    lines += [f"v.attrs.{field} = {value};" for field, value in sig.fixed_attrs]
    return lines


def _viewed(sig: OpSignature) -> set:
    """The arguments cpp_views reads."""
    return ({sig.batch} | {t.name for t in sig.inputs if t.check == FLAG or t.view.fields()}
            | set(sig.attr_names))


def _function(head: str, params: List[str], body: List[str]) -> List[str]:
    return _wrapped(head + "(", params, ") {", "    ") + [f"  {b}" for b in body] + ["}"]


def _render_functions(sig: OpSignature) -> List[str]:
    views_type = f"OpViews<{sig.views}{', ' + sig.attrs_struct if sig.attrs_struct else ''}>"
    lines = ["// The boundary checks, in the table's order; throws the first refusal."]
    lines += _function(f"inline void {sig.name}_checks", ["ArgChecker& c"] + cpp_params(
        sig, named={t.name for t in sig.inputs} | {a.name for a in sig.attrs
                                                    if a.minimum is not None},
        const_all=True), cpp_checks(sig))
    lines.append("// The checked tensors and attributes as the rules and the dispatch take them.")
    lines += _function(f"inline {views_type} {sig.name}_views", cpp_params(sig, _viewed(sig)),
                       [f"{views_type} v;"] + cpp_views(sig) + ["return v;"])
    for kind, ret, param in (("shape", "std::vector<std::vector<int64_t>>",
                              "const std::vector<int64_t>&"),
                             ("dtype", "std::vector<paddle::DataType>", "const paddle::DataType&")):
        if not sig.fresh_outputs:
            continue
        rows_of = {o.rows_of for o in sig.fresh_outputs} if kind == "shape" else set()
        params = [f"{param} {t.name}" if t.name in rows_of else param for t in sig.inputs]
        if kind == "shape":
            lines.append("// The fresh outputs' shapes (-1 where unknown), for Paddle's graph.")
            body = [f"const int64_t {o.name}_rows = {o.rows_of}.empty() ? -1 : {o.rows_of}[0];"
                    for o in sig.fresh_outputs]
            body.append("return {" + ", ".join(
                f"{{{o.name}_rows < 0 ? -1 : {o.per_row} * {o.name}_rows}}"
                for o in sig.fresh_outputs) + "};")
        else:
            lines.append("// The fresh outputs' dtypes.")
            body = ["return {" + ", ".join(f"paddle::DataType::{_CPP_DTYPES[o.dtype][1]}"
                                           for o in sig.fresh_outputs) + "};"]
        lines += _function(f"inline {ret} {sig.name}_{kind}", params, body)
    return lines


def render_bindings_header() -> str:
    """custom_ops/op_bindings.h: each op's C++ binding as the table states it."""
    lines = _GENERATED + [
        "// Each op's Paddle binding as the table states it. Per table (the prefixes",
        "// of op_signatures.h): <PREFIX>_PARAMS, the kernel function's parameters (the",
        "// tensors the op declares written in place by reference, every other one --",
        "// FastDeploy's undeclared written ones too -- by const reference, then the",
        "// attributes); <PREFIX>_ARGS, the same as arguments; <PREFIX>_BATCH, the tensor",
        "// whose length is the batch size; <PREFIX>_<OUTPUT>_ROWS_OF, the tensor whose",
        "// length sizes a fresh output. Per form, in namespace mtp::<form>:",
        "// <op>_checks(c, args...), the boundary checks (tensor_checks.h) with the",
        "// table's names, dtypes and access; <op>_views(args...), the checked tensors",
        "// and attributes as the rules read them (tensor_views.h's OpViews); and for",
        "// an op with fresh outputs <op>_shape and <op>_dtype, for Paddle's graph.",
        "// op_registrations.cc registers each form's ops with these.",
        "#pragma once",
        "",
        "#include <cstdint>",
        "#include <vector>",
        "",
        '#include "op_signatures.h"',
        '#include "tensor_checks.h"',
        '#include "tensor_views.h"',
        "",
    ]
    for p, sig in _tables().items():
        if not sig.views:
            continue
        lines += _macro(f"{p}_PARAMS", cpp_params(sig))
        lines += _macro(f"{p}_ARGS", list(sig.input_names + sig.attr_names))
        lines.append(f"#define {p}_BATCH {sig.batch}")
        lines += [f"#define {p}_{o.name.upper()}_ROWS_OF {o.rows_of}" for o in sig.fresh_outputs]
        lines.append("")
    lines.append("namespace mtp {")
    rendered: Dict[str, str] = {}  # prefix -> the form whose namespace holds its functions
    for form, ops in FORMS.items():
        lines += ["", f"namespace {form} {{"]
        for sig in (s for s in ops.values() if s.views):
            p = macro_prefix(form, sig)
            if p in rendered:
                names = [f"{sig.name}_{k}" for k in ("checks", "views", "shape", "dtype")
                         if k in ("checks", "views") or sig.fresh_outputs]
                lines += [f"using {rendered[p]}::{n};" for n in names]
                continue
            rendered[p] = form
            lines += ["", f"// {sig.name}, the {form} form's ({p}_...)."]
            lines += _render_functions(sig)
        lines += ["", f"}}  // namespace {form}"]
    lines += ["", "}  // namespace mtp", ""]
    return "\n".join(lines)


def cpp_form(form: str) -> str:
    """`form`'s enumerator of mtp::Form (forms.h): k<Form> in CamelCase."""
    return "Form::k" + "".join(w.capitalize() for w in form.split("_"))


def render_forms_header() -> str:
    """custom_ops/forms.h: the forms, for the rules' template parameter."""
    lines = _GENERATED + [
        "// The forms of the table (fastdeploy_mtp.signature.FORMS) as the C++ side",
        "// names them: mtp::Form, a template parameter of the rules and the kernels;",
        "// MTP_FOR_EACH_FORM(X), MTP_FOR_EACH_PREPROCESS_FORM(X) and",
        "// MTP_FOR_EACH_MASK_FORM(X), X(Form::k...) for every form, every form with a",
        "// preprocess kernel and every one with a mask kernel of its own (for explicit",
        "// instantiations); kForms, how many;",
        "// preprocess_form(f) and mask_form(f), the kernels a form's ops run.",
        "#pragma once",
        "",
        "#include <cstdint>",
        "",
        "namespace mtp {",
        "",
        "enum class Form : int32_t {",
    ]
    lines += [f"  {cpp_form(f)[len('Form::'):]} = {k}," for k, f in enumerate(FORMS)]
    lines += ["};", f"constexpr int kForms = {len(FORMS)};", "",
              "#define MTP_FOR_EACH_FORM(X) \\\n  " + " ".join(f"X({cpp_form(f)})" for f in FORMS)]
    for kind, of in (("PREPROCESS", preprocess_form), ("MASK", mask_form)):
        own = " ".join(f"X({cpp_form(f)})" for f in FORMS if of(f) == f)
        lines.append(f"#define MTP_FOR_EACH_{kind}_FORM(X) \\\n  {own}")
    for kind, of in (("preprocess", preprocess_form), ("mask", mask_form)):
        lines += ["", f"constexpr Form {kind}_form(Form f) {{"]
        lines += [f"  if (f == {cpp_form(f)}) return {cpp_form(of(f))};"
                  for f in FORMS if of(f) != f]
        lines += ["  return f;", "}"]
    lines += ["", "}  // namespace mtp", ""]
    return "\n".join(lines)


def _kernel_function(form: str, sig: OpSignature) -> str:
    return "".join(w.capitalize() for w in op_name(form, sig).split("_"))


def render_registrations() -> str:
    """custom_ops/op_registrations.cc: every form's ops, registered under
    op_name, each its form's checks, views and dispatch (op_dispatch.h)."""
    lines = _GENERATED + [
        "// Every form's ops in one library, each registered as <op>_<form>",
        "// (signature.op_name): its boundary checks and views (op_bindings.h), then",
        "// the dispatch of op_dispatch.h instantiated for its form.",
        '#include "op_bindings.h"',
        '#include "op_dispatch.h"',
        "",
    ]
    for form, ops in FORMS.items():
        for sig in (s for s in ops.values() if s.views):
            p, name = macro_prefix(form, sig), op_name(form, sig)
            fn = _kernel_function(form, sig)
            ns = f"mtp::{form}::{sig.name}"
            if sig.fresh_outputs:
                head = f"std::vector<paddle::Tensor> {fn}({p}_PARAMS) {{"
                run = f"  return mtp::run_{sig.name}<mtp::{cpp_form(mask_form(form))}>(c, v);"
            else:
                head = f"void {fn}({p}_PARAMS) {{"
                run = f"  mtp::run_{sig.name}<mtp::{cpp_form(preprocess_form(form))}>(c, v);"
            lines += [f"// {sig.name}, the {form} form's.", head,
                      f'  mtp::ArgChecker c("{sig.name}");', f"  {ns}_checks(c, {p}_ARGS);",
                      f"  const auto v = {ns}_views({p}_ARGS);", run, "}", f"PD_BUILD_OP({name})", f"    .Inputs({{{p}_INPUTS}})",
                      f"    .Outputs({{{p}_OUTPUTS}})"]
            if sig.attrs:
                lines.append(f"    .Attrs({{{p}_ATTRS}})")
            lines.append(f"    .SetInplaceMap({{{p}_INPLACE}})")
            tail = [f"    .SetKernelFn(PD_KERNEL({fn}))"]
            if sig.fresh_outputs:
                tail += [f"    .SetInferShapeFn(PD_INFER_SHAPE({ns}_shape))",
                         f"    .SetInferDtypeFn(PD_INFER_DTYPE({ns}_dtype))"]
            tail[-1] += ";"
            lines += tail + [""]
    return "\n".join(lines)


# The threads of the one block FastDeploy launches each form's
# draft_model_preprocess with: 512 (draft_model_preprocess.cu line 298 at
# 9018ccf74, the DISPATCH_BLOCKSIZE of ba915e03e), the shadow form's 1024
# (kBlockSize, line 164 at 7a6c28781). The benchmark's FastDeploy-shaped baselines
# launch so.
FASTDEPLOY_THREADS = {"shadow": 1024}


def render_bench_baselines() -> str:
    """custom_ops/bench/bench_baselines.cc: each form's FastDeploy-shaped
    baselines (bench_baseline.h), registered as bench_baseline_<op>_<form>
    with the form's own signature."""
    lines = _GENERATED + [
        "// Each form's FastDeploy-shaped baselines (bench_baseline.h): its rules, nothing",
        "// checked, launched as FastDeploy launches its kernel; registered as",
        "// bench_baseline_preprocess_<form> and bench_baseline_mask_<form> with the",
        "// form's own signature.",
        '#include "bench_baseline.h"',
        "",
    ]
    for form, ops in FORMS.items():
        for sig in (s for s in ops.values() if s.views):
            p = macro_prefix(form, sig)
            kind = "mask" if sig.fresh_outputs else "preprocess"
            name = f"bench_baseline_{kind}_{form}"
            fn = "".join(w.capitalize() for w in name.split("_"))
            views = f"mtp::{form}::{sig.name}_views({p}_ARGS)"
            if sig.fresh_outputs:
                head = f"std::vector<paddle::Tensor> {fn}({p}_PARAMS) {{"
                run = (f"  return mtp_bench::run_baseline_mask<mtp::{cpp_form(mask_form(form))}>(\n"
                       f"      {views});")
            else:
                head = f"void {fn}({p}_PARAMS) {{"
                run = (f"  mtp_bench::run_baseline_preprocess<mtp::"
                       f"{cpp_form(preprocess_form(form))}>(\n      {views},\n"
                       f"      {FASTDEPLOY_THREADS.get(form, 512)});")
            lines += [head, run, "}", f"PD_BUILD_OP({name})", f"    .Inputs({{{p}_INPUTS}})",
                      f"    .Outputs({{{p}_OUTPUTS}})"]
            if sig.attrs:
                lines.append(f"    .Attrs({{{p}_ATTRS}})")
            lines += [f"    .SetInplaceMap({{{p}_INPLACE}})", f"    .SetKernelFn(PD_KERNEL({fn}));",
                      ""]
    return "\n".join(lines)


# Each generated header (its path in a checkout) and its renderer.
GENERATED_HEADERS: Dict[str, Callable[[], str]] = {
    "custom_ops/bench/bench_baselines.cc": render_bench_baselines,
    "custom_ops/forms.h": render_forms_header,
    "custom_ops/op_signatures.h": render_cpp_header,
    "custom_ops/op_bindings.h": render_bindings_header,
    "custom_ops/op_registrations.cc": render_registrations,
}
