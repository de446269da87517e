"""The op signatures, stated once.

Every other place that needs an op's inputs, outputs, attributes or in-place
pairs -- the Python wrappers, the numpy reference, the registration check and
the tests -- reads them from here or is compared against them. The C++
registration in ``custom_ops/*_op.cc`` is compared against this table by
``python -m fastdeploy_mtp check`` (and by the test suite), so a drifting
name or order fails loudly.

The positional order is the one FastDeploy-style runners call with.

FastDeploy's ``draft_model_preprocess`` has had more than one signature; each
is a *form* here (``FORMS``), with its own table, library and registration:
``rollback`` (the 21-tensor op that carries ``mask_rollback``; the default),
``recompute`` (22 tensors: ``recompute_token_num`` after ``mask_rollback``)
and ``shadow`` (17 tensors: the draft's state derived from the base model,
which it calls the target model, every step; its ``update_attn_mask_offsets``
has 8 tensors and no cursor). A process loads one form
(``fastdeploy_mtp.forms``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

import numpy as np


@dataclass(frozen=True)
class TensorArg:
    name: str
    dtype: type  # numpy scalar type; None means "any dtype" (only the shape is read)
    written: bool  # declared as the in-place output ``<name>_out``
    doc: str


@dataclass(frozen=True)
class AttrArg:
    name: str
    type: type  # int or bool
    doc: str

    @property
    def registration(self) -> str:
        return f"{self.name}: {self.type.__name__}"


@dataclass(frozen=True)
class OpSignature:
    name: str
    inputs: Tuple[TensorArg, ...]
    attrs: Tuple[AttrArg, ...]
    # Outputs that are new tensors (not in place), listed before the in-place ones.
    fresh_outputs: Tuple[str, ...] = ()
    # The written inputs whose in-place outputs come first, in this order (the
    # order FastDeploy registers); the other written inputs' follow in input
    # order. Empty: all in input order.
    written_first: Tuple[str, ...] = ()
    # Written inputs registered as plain inputs, as FastDeploy registers them
    # (the op writes them all the same): no output, no in-place pair.
    undeclared: Tuple[str, ...] = ()

    @property
    def input_names(self) -> Tuple[str, ...]:
        return tuple(t.name for t in self.inputs)

    @property
    def attr_names(self) -> Tuple[str, ...]:
        return tuple(a.name for a in self.attrs)

    @property
    def written(self) -> Tuple[str, ...]:
        return tuple(t.name for t in self.inputs if t.written)

    @property
    def declared(self) -> Tuple[str, ...]:
        """The written inputs registered in place (``<name>_out``)."""
        return tuple(n for n in self.written if n not in self.undeclared)

    @property
    def output_names(self) -> Tuple[str, ...]:
        rest = tuple(n for n in self.declared if n not in self.written_first)
        return self.fresh_outputs + tuple(f"{n}_out" for n in self.written_first + rest)

    @property
    def inplace_map(self) -> Dict[str, str]:
        return {n: f"{n}_out" for n in self.declared}

    @property
    def inplace_index_map(self) -> Dict[int, int]:
        """{output index: input index}, the form Paddle reports through
        ``core.eager._get_custom_operator_inplace_map``."""
        outs = self.output_names
        return {outs.index(o): self.input_names.index(i) for i, o in self.inplace_map.items()}

    def input(self, name: str) -> TensorArg:
        for t in self.inputs:
            if t.name == name:
                return t
        raise KeyError(name)


_i64, _i32, _b = np.int64, np.int32, np.bool_

DRAFT_MODEL_PREPROCESS = OpSignature(
    name="draft_model_preprocess",
    inputs=(
        TensorArg("draft_tokens", _i64, True, "[N, D] draft model's input tokens"),
        TensorArg("input_ids", _i64, True, "[N, L] draft model's prompt buffer"),
        TensorArg("stop_flags", _b, True, "[N] draft stopped"),
        TensorArg("seq_lens_this_time", _i32, True, "[bsz] tokens fed this step; defines bsz"),
        TensorArg("seq_lens_encoder", _i32, True, "[N] prompt tokens still to prefill"),
        TensorArg("seq_lens_decoder", _i32, True, "[N] draft KV positions"),
        TensorArg("step_idx", _i64, True, "[N] draft step index"),
        TensorArg("not_need_stop", _b, True, "[1] some request is running"),
        TensorArg("is_block_step", _b, True, "[N] draft parked by a block step"),
        TensorArg("batch_drop", _b, True, "[N] request dropped"),
        TensorArg("pre_ids", _i64, True, "[N, P] generated tokens"),
        TensorArg("mask_rollback", _i32, True, "[N] pending attention-mask rollback"),
        TensorArg("accept_tokens", _i64, False, "[N, A] tokens the base model accepted"),
        TensorArg("accept_num", _i32, False, "[N] number of accepted tokens"),
        TensorArg("base_model_seq_lens_this_time", _i32, False, "[N] base model"),
        TensorArg("base_model_seq_lens_encoder", _i32, False, "[N] base model"),
        TensorArg("base_model_seq_lens_decoder", _i32, False, "[N] base model KV positions"),
        TensorArg("base_model_step_idx", _i64, False, "[N] base model step index"),
        TensorArg("base_model_stop_flags", _b, False, "[N] base model stopped"),
        TensorArg("base_model_is_block_step", _b, False, "[N] base model in a block step"),
        TensorArg("base_model_draft_tokens", _i64, True, "[N, Db] columns 1.. set to -1"),
    ),
    attrs=(
        AttrArg("num_model_step", int, "draft substeps per engine step, >= 1"),
        AttrArg("truncate_first_token", bool, "place the first token at E-1 instead of E"),
        AttrArg("splitwise_prefill", bool, "prefill node of a PD-split deployment"),
        AttrArg("kvcache_scheduler_v1", bool, "block steps park the request instead of dropping it"),
    ),
)

def _with_recompute_token_num(inputs: Tuple[TensorArg, ...]) -> Tuple[TensorArg, ...]:
    out = []
    for t in inputs:
        if t.name == "base_model_seq_lens_this_time":
            t = TensorArg(t.name, t.dtype, False, "[N] base model; bounds the recomputed tokens")
        out.append(t)
        if t.name == "mask_rollback":
            out.append(TensorArg("recompute_token_num", _i32, True,
                                 "[N] tokens the next decode recomputes (set to num_model_step-1)"))
    return tuple(out)


# FastDeploy's recompute form: a decode rolls back the tokens it recomputes,
# min(recompute_token_num, base_model_seq_lens_this_time - 2). FastDeploy
# registers ten of its fourteen written tensors in place; so do we.
DRAFT_MODEL_PREPROCESS_RECOMPUTE = OpSignature(
    name="draft_model_preprocess",
    inputs=_with_recompute_token_num(DRAFT_MODEL_PREPROCESS.inputs),
    attrs=DRAFT_MODEL_PREPROCESS.attrs,
    undeclared=("is_block_step", "mask_rollback", "recompute_token_num",
                "base_model_draft_tokens"),
)

# FastDeploy's shadow form (develop): the draft's lengths and step are derived
# from the base model's -- the target model's, in its names -- every step, so
# nothing is rolled back and there is no mask_rollback, is_block_step or
# batch_drop. FastDeploy registers the in-place pairs of all its written
# tensors but the target model's draft tokens; so do we.
DRAFT_MODEL_PREPROCESS_SHADOW = OpSignature(
    name="draft_model_preprocess",
    inputs=(
        TensorArg("draft_tokens", _i64, True, "[N, D] draft model's input tokens"),
        TensorArg("input_ids", _i64, True, "[N, L] draft model's prompt buffer"),
        TensorArg("stop_flags", _b, True, "[N] draft skipped this step"),
        TensorArg("seq_lens_this_time", _i32, True, "[bsz] tokens fed this step; defines bsz"),
        TensorArg("seq_lens_encoder", _i32, True, "[N] prompt tokens still to prefill"),
        TensorArg("seq_lens_decoder", _i32, True, "[N] draft KV positions"),
        TensorArg("step_idx", _i64, True, "[N] draft step index"),
        TensorArg("not_need_stop", _b, True, "[1] some request is running"),
        TensorArg("pre_ids", _i64, True, "[N, P] generated tokens"),
        TensorArg("accept_tokens", _i64, False, "[N, A] tokens the target model accepted"),
        TensorArg("accept_num", _i32, False, "[N] number of accepted tokens"),
        TensorArg("target_model_seq_lens_encoder", _i32, False, "[N] target model (not read)"),
        TensorArg("target_model_seq_lens_decoder", _i32, False, "[N] target model KV positions"),
        TensorArg("target_model_step_idx", _i64, False, "[N] target model step index"),
        TensorArg("target_model_stop_flags", _b, False, "[N] target model stopped"),
        TensorArg("max_dec_len", _i64, False, "[N] each request's length limit"),
        TensorArg("target_model_draft_tokens", _i64, True, "[N, Dt] columns 1.. set to -1"),
    ),
    attrs=(
        AttrArg("num_model_step", int, "draft substeps per engine step, >= 1"),
        AttrArg("is_splitwise_prefill", bool, "prefill node of a PD-split deployment: no "
                                              "request is skipped for its length limit"),
    ),
    undeclared=("target_model_draft_tokens",),
)

UPDATE_ATTN_MASK_OFFSETS = OpSignature(
    name="update_attn_mask_offsets",
    inputs=(
        TensorArg("ids_remove_padding", None, False, "[T] only its length is read"),
        TensorArg("seq_lens_this_time", _i32, False, "[bsz] tokens this substep; defines bsz"),
        TensorArg("seq_lens_encoder", _i32, False, "[N]"),
        TensorArg("seq_lens_decoder", _i32, False, "[N]"),
        TensorArg("cu_seqlens_q", _i32, False, "[bsz+1] prefix sums of seq_lens_this_time, or [bsz]"),
        TensorArg("attn_mask_offsets_full", _i32, False, "[N, max_model_len] prompt mask offsets"),
        TensorArg("attn_mask_offsets_decoder", _i32, True, "[N] mask cursor"),
        TensorArg("is_block_step", _b, False, "[N]"),
        TensorArg("decode_states", _i32, True, "[N, Ds] decode states; column 0 == 2 is vision generation"),
        TensorArg("mask_rollback", _i32, True, "[N] pending rollback, consumed here"),
    ),
    attrs=(),
    fresh_outputs=("attn_mask_offsets",),
    # FastDeploy's outputs, in its order; the cursor, which FastDeploy writes
    # without declaring it, is declared too, after them.
    written_first=("decode_states", "mask_rollback"),
)

# The shadow form's: no cursor and no rollback, a decode token's mask end is
# seq_lens_decoder + 1 + j.
UPDATE_ATTN_MASK_OFFSETS_SHADOW = OpSignature(
    name="update_attn_mask_offsets",
    inputs=tuple(t for t in UPDATE_ATTN_MASK_OFFSETS.inputs
                 if t.name not in ("attn_mask_offsets_decoder", "mask_rollback")),
    attrs=(),
    fresh_outputs=("attn_mask_offsets",),
)

# Not a FastDeploy op: the explicit check for errors that asynchronous GPU
# calls left on the device (any tensor on that device names it; unchanged).
RAISE_PENDING_ERRORS = OpSignature(
    name="raise_pending_errors",
    inputs=(TensorArg("x", None, True, "any tensor on the device to check"),),
    attrs=(),
)

DEFAULT_FORM = "rollback"

# Each form's ops by name, in the order they are registered.
FORMS: Dict[str, Dict[str, OpSignature]] = {
    form: {s.name: s for s in (preprocess, mask, RAISE_PENDING_ERRORS)}
    for form, preprocess, mask in (
        ("rollback", DRAFT_MODEL_PREPROCESS, UPDATE_ATTN_MASK_OFFSETS),
        ("recompute", DRAFT_MODEL_PREPROCESS_RECOMPUTE, UPDATE_ATTN_MASK_OFFSETS),
        ("shadow", DRAFT_MODEL_PREPROCESS_SHADOW, UPDATE_ATTN_MASK_OFFSETS_SHADOW))
}

# The default form's ops.
OPS: Dict[str, OpSignature] = FORMS[DEFAULT_FORM]


def macro_prefix(form: str, sig: OpSignature) -> str:
    """The C++ macros' prefix of `sig` in `form`: MTP_<OP> for the default
    form's table, MTP_<FORM>_<OP> where a form has a table of its own."""
    if FORMS[DEFAULT_FORM][sig.name] is sig:
        return "MTP_" + sig.name.upper()
    return f"MTP_{form.upper()}_{sig.name.upper()}"


# ---------------------------------------------------------------------------
# The C++ registrations read the same table: custom_ops/op_signatures.h is
# rendered from it (``python -m fastdeploy_mtp signature --write``), and a test
# fails when the file and the table differ.

HEADER_PATH = "custom_ops/op_signatures.h"


def _cpp_list(items) -> str:
    return ", ".join(f'"{x}"' for x in items)


def render_cpp_header() -> str:
    lines = [
        "// Generated from fastdeploy_mtp/signature.py: do not edit; run",
        "// `python -m fastdeploy_mtp signature --write` after changing the table.",
        "// Each op's registered inputs, outputs, attributes and in-place pairs, for",
        "// PD_BUILD_OP(...).Inputs({..._INPUTS}) and the like.",
        "#pragma once",
        "",
    ]
    tables = {macro_prefix(form, sig): sig for form, ops in FORMS.items() for sig in ops.values()}
    for p, sig in tables.items():
        lines.append(f"#define {p}_INPUTS {_cpp_list(sig.input_names)}")
        lines.append(f"#define {p}_OUTPUTS {_cpp_list(sig.output_names)}")
        if sig.attrs:
            lines.append(f"#define {p}_ATTRS {_cpp_list(a.registration for a in sig.attrs)}")
        pairs = ", ".join(f'{{"{i}", "{o}"}}' for i, o in sig.inplace_map.items())
        lines.append(f"#define {p}_INPLACE {pairs}")
        lines.append("")
    return "\n".join(lines)


def argument_help(sig: OpSignature) -> str:
    """The table's words on each argument, for the wrappers' docstrings."""
    rows = ["", "Arguments (``fastdeploy_mtp.signature``; W: written in place):", ""]
    for t in sig.inputs:
        dtype = "any dtype" if t.dtype is None else np.dtype(t.dtype).name
        rows.append(f"- ``{t.name}`` ({dtype}{', W' if t.written else ''}): {t.doc}")
    for a in sig.attrs:
        rows.append(f"- ``{a.name}`` ({a.type.__name__}): {a.doc}")
    return "\n".join(rows) + "\n"
