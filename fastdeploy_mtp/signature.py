"""The op signatures, stated once.

Every other place that needs an op's inputs, outputs, attributes or in-place
pairs -- the Python wrappers, the numpy reference, the registration check, the
C++ bindings and the tests -- reads them from here or is compared against
them. The C++ side is rendered from this table (``signature_cpp.GENERATED_HEADERS``): the
registered lists, and each binding's parameter list, boundary checks and
views of the tensors; ``python -m fastdeploy_mtp check`` compares what Paddle
registered with the table, so a drifting name or order fails loudly.

The positional order is the one FastDeploy-style runners call with.

FastDeploy's two ops have had more than one signature and more than one set of
rules; each version is a *form* here (``FORMS``, with the FastDeploy code each
follows in ``docs/contract.md``), with its own table and its ops registered
under their own names in the one library: ``rollback`` (our own 21-tensor op
that carries ``mask_rollback``; the default), ``recompute`` and ``pr5738`` (22
tensors: ``recompute_token_num`` after ``mask_rollback``), ``pr5245`` (20
tensors, no ``mask_rollback``), ``pr6403`` (``pr5738``'s preprocess, another
``decode_states`` rule), ``xpu`` (FastDeploy's XPU op: the 22-tensor
registration with ``pr5245``'s rules) and ``shadow`` (17 tensors: the draft's state derived
from the base model, which it calls the target model, every step; its
``update_attn_mask_offsets`` has 8 tensors and no cursor).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple

import numpy as np

# How an op uses a tensor: W written, R read, U never read (only its shape is
# checked, so its memory may alias anything). The C++ binding's overlap check
# takes it (tensor_checks.h's Access).
W, R, U = "W", "R", "U"

# The boundary check a tensor gets in C++ (tensor_checks.h's ArgChecker).
VECTOR = "vector"  # [N] or [N, 1], N >= the batch size
MATRIX = "matrix"  # [N, columns], N >= the batch size, columns >= min_cols
FLAT = "flat"      # any rank >= 1, at least batch-size elements
LENGTH = "length"  # any dtype, rank >= 1: only its length is read
FLAG = "flag"      # bool, >= 1 element, on the others' device or on the host; written
ANY = "any"        # nothing (raise_pending_errors' tensor: any tensor on the device)


@dataclass(frozen=True)
class View:
    """The fields of the rules' views (``PreprocessTensors`` or ``MaskTensors``
    in custom_ops/mtp_bookkeeping.h) a tensor fills: its data pointer, its
    column count (shape[1]), its length (shape[0]), its element count."""
    data: Optional[str] = None
    cols: Optional[str] = None
    rows: Optional[str] = None
    numel: Optional[str] = None

    def fields(self) -> Tuple[Tuple[str, str], ...]:
        """(field, what it holds) for each field filled: data, cols, rows or numel."""
        return tuple((getattr(self, k), k) for k in ("data", "cols", "rows", "numel")
                     if getattr(self, k) is not None)


@dataclass(frozen=True)
class TensorArg:
    name: str
    dtype: Optional[type]  # numpy scalar type; None means "any dtype" (only the shape is read)
    access: str  # W, R or U (above)
    doc: str
    check: str = VECTOR  # its boundary check (above)
    min_cols: int = 0  # a MATRIX's fewest columns
    view: View = View()  # the views' fields it fills; none: the rules never read it

    @property
    def written(self) -> bool:
        """Written by the op: declared as the in-place output ``<name>_out``
        unless the table lists it among its ``undeclared``."""
        return self.access == W


@dataclass(frozen=True)
class AttrArg:
    name: str
    type: type  # int or bool
    doc: str
    minimum: Optional[int] = None  # the raw op refuses a smaller value
    field: Optional[str] = None  # the attributes' struct's field it fills; None: `name`

    @property
    def registration(self) -> str:
        return f"{self.name}: {self.type.__name__}"

    @property
    def struct_field(self) -> str:
        return self.field or self.name


@dataclass(frozen=True)
class FreshOutput:
    """An output that is a new tensor: `per_row` elements of `dtype` for each
    row (shape[0]) of the input `rows_of`."""
    name: str
    dtype: type
    rows_of: str
    per_row: int


@dataclass(frozen=True)
class OpSignature:
    name: str
    inputs: Tuple[TensorArg, ...]
    attrs: Tuple[AttrArg, ...]
    # Outputs that are new tensors (not in place), listed before the in-place ones.
    fresh_outputs: Tuple[FreshOutput, ...] = ()
    # The written inputs whose in-place outputs come first, in this order (the
    # order FastDeploy registers); the other written inputs' follow in input
    # order. Empty: all in input order.
    written_first: Tuple[str, ...] = ()
    # Written inputs registered as plain inputs, as FastDeploy registers them
    # (the op writes them all the same): no output, no in-place pair.
    undeclared: Tuple[str, ...] = ()
    # The C++ binding rendered from the table: the struct of the rules' views
    # its tensors fill ("": no binding is rendered), the struct its attributes
    # fill, the tensor whose length is the batch size, and the fields of the
    # attributes' struct this form has no attribute for, with the value they
    # always have in it (a C++ literal).
    views: str = ""
    attrs_struct: str = ""
    batch: str = ""
    fixed_attrs: Tuple[Tuple[str, str], ...] = ()
    # What the op does, in a few sentences (the wrappers' docstrings).
    doc: str = ""

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
        return (tuple(o.name for o in self.fresh_outputs)
                + tuple(f"{n}_out" for n in self.written_first + rest))

    @property
    def inplace_map(self) -> Dict[str, str]:
        return {n: f"{n}_out" for n in self.declared}

    @property
    def inplace_index_map(self) -> Dict[int, int]:
        """{output index: input index}, the form Paddle reports through
        ``core.eager._get_custom_operator_inplace_map``."""
        outs = self.output_names
        return {outs.index(o): self.input_names.index(i) for i, o in self.inplace_map.items()}

    @property
    def check_order(self) -> Tuple[str, ...]:
        """The order the C++ binding checks the tensors in: the table's, but
        the batch tensor is checked (its length, then as itself) just before
        the first check that needs the batch size, and the flag last (it is
        compared with the device the others share)."""
        order: List[str] = []
        for t in self.inputs:
            if t.check in (FLAG, ANY) or t.name == self.batch:
                continue
            if t.check != LENGTH and self.batch not in order:
                order.append(self.batch)
            order.append(t.name)
        return tuple(order) + tuple(t.name for t in self.inputs if t.check == FLAG)

    def input(self, name: str) -> TensorArg:
        for t in self.inputs:
            if t.name == name:
                return t
        raise KeyError(name)


_i64, _i32, _b = np.int64, np.int32, np.bool_

DRAFT_MODEL_PREPROCESS = OpSignature(
    name="draft_model_preprocess",
    inputs=(
        TensorArg("draft_tokens", _i64, W, "[N, D] draft model's input tokens", MATRIX,
                  view=View("draft_tokens", cols="draft_cols")),
        TensorArg("input_ids", _i64, W, "[N, L] draft model's prompt buffer", MATRIX,
                  view=View("input_ids", cols="input_cols")),
        TensorArg("stop_flags", _b, W, "[N] draft stopped", view=View("stop_flags")),
        TensorArg("seq_lens_this_time", _i32, W, "[bsz] tokens fed this step; defines bsz",
                  view=View("seq_lens_this_time")),
        TensorArg("seq_lens_encoder", _i32, W, "[N] prompt tokens still to prefill",
                  view=View("seq_lens_encoder")),
        TensorArg("seq_lens_decoder", _i32, W, "[N] draft KV positions",
                  view=View("seq_lens_decoder")),
        TensorArg("step_idx", _i64, W, "[N] draft step index", view=View("step_idx")),
        TensorArg("not_need_stop", _b, W, "[1] some request is running", FLAG),
        TensorArg("is_block_step", _b, W, "[N] draft parked by a block step",
                  view=View("is_block_step")),
        TensorArg("batch_drop", _b, W, "[N] request dropped", view=View("batch_drop")),
        TensorArg("pre_ids", _i64, W, "[N, P] generated tokens", MATRIX,
                  view=View("pre_ids", cols="pre_cols")),
        TensorArg("mask_rollback", _i32, W, "[N] pending attention-mask rollback",
                  view=View("mask_rollback")),
        TensorArg("accept_tokens", _i64, R, "[N, A] tokens the base model accepted", MATRIX,
                  view=View("accept_tokens", cols="accept_cols")),
        TensorArg("accept_num", _i32, R, "[N] number of accepted tokens",
                  view=View("accept_num")),
        TensorArg("base_model_seq_lens_this_time", _i32, U, "[N] base model"),
        TensorArg("base_model_seq_lens_encoder", _i32, U, "[N] base model"),
        TensorArg("base_model_seq_lens_decoder", _i32, R, "[N] base model KV positions",
                  view=View("base_seq_lens_decoder")),
        TensorArg("base_model_step_idx", _i64, R, "[N] base model step index",
                  view=View("base_step_idx")),
        TensorArg("base_model_stop_flags", _b, R, "[N] base model stopped",
                  view=View("base_stop_flags")),
        TensorArg("base_model_is_block_step", _b, R, "[N] base model in a block step",
                  view=View("base_is_block_step")),
        TensorArg("base_model_draft_tokens", _i64, W, "[N, Db] columns 1.. set to -1", MATRIX,
                  view=View("base_draft_tokens", cols="base_draft_cols")),
    ),
    attrs=(
        AttrArg("num_model_step", int, "draft substeps per engine step, >= 1", minimum=1),
        AttrArg("truncate_first_token", bool, "place the first token at E-1 instead of E"),
        AttrArg("splitwise_prefill", bool, "prefill node of a PD-split deployment"),
        AttrArg("kvcache_scheduler_v1", bool, "block steps park the request instead of dropping it"),
    ),
    views="PreprocessTensors",
    attrs_struct="PreprocessAttrs",
    batch="seq_lens_this_time",
    doc="Prepare the draft model's state at the start of an engine step, in place: per "
        "request, place a prefill's first token, or roll the draft back by num_model_step - 1 "
        "positions and re-feed the accepted tokens, re-sync a stopped draft from the base "
        "model, park or drop it on a block step, and add the change of seq_lens_decoder to "
        "mask_rollback (a prefill sets it to 0). not_need_stop[0] becomes whether any request "
        "runs; with not_need_stop on the CPU the call returns once the flag is there.",
)

def _with_recompute_token_num(inputs: Tuple[TensorArg, ...]) -> Tuple[TensorArg, ...]:
    out = []
    for t in inputs:
        if t.name == "base_model_seq_lens_this_time":
            t = replace(t, access=R, doc="[N] base model; bounds the recomputed tokens",
                        view=View("base_seq_lens_this_time"))
        out.append(t)
        if t.name == "mask_rollback":
            out.append(TensorArg("recompute_token_num", _i32, W,
                                 "[N] tokens the next decode recomputes (set to num_model_step-1)",
                                 view=View("recompute_token_num")))
    return tuple(out)


# The recompute form (FastDeploy commit 0956b09a's rules): a decode rolls back
# the tokens it recomputes, min(recompute_token_num,
# base_model_seq_lens_this_time - 2), so it reads base_model_seq_lens_this_time,
# which the rollback form never reads.
# FastDeploy registers ten of its fourteen written tensors in place; so do we.
DRAFT_MODEL_PREPROCESS_RECOMPUTE = replace(
    DRAFT_MODEL_PREPROCESS,
    inputs=_with_recompute_token_num(DRAFT_MODEL_PREPROCESS.inputs),
    undeclared=("is_block_step", "mask_rollback", "recompute_token_num",
                "base_model_draft_tokens"),
    doc="Prepare the draft model's state at the start of an engine step, in place, with "
        "FastDeploy's 22-tensor registration: as the rollback form, but a running decode rolls "
        "back min(recompute_token_num, max(base_model_seq_lens_this_time - 2, 0)) positions, "
        "adds that to mask_rollback and sets recompute_token_num to num_model_step - 1.",
)

# PR #5738 as FastDeploy merged it (9018ccf74, cherry-picked to its release
# branch as dcb0ccede): the recompute form's registration, its own rules
# (mtp_bookkeeping.h: a running decode rolls back recompute_token_num
# unclamped; a re-sync takes base_model_seq_lens_this_time and leaves
# mask_rollback and recompute_token_num alone).
DRAFT_MODEL_PREPROCESS_PR5738 = replace(
    DRAFT_MODEL_PREPROCESS_RECOMPUTE,
    doc="Prepare the draft model's state at the start of an engine step, in place, as "
        "FastDeploy's PR #5738 merged it (9018ccf74): a running decode rolls back "
        "recompute_token_num positions, unclamped, adds them to mask_rollback and sets "
        "recompute_token_num to num_model_step - 1; a draft that stopped while the base model "
        "went on takes the base model's seq_lens_decoder and step_idx less "
        "base_model_seq_lens_this_time and keeps mask_rollback and recompute_token_num.",
)

# PR #5245 (ba915e03e): FastDeploy's 20-tensor op, which its PR #5738 later
# widened. No mask_rollback and no recompute_token_num: a running decode rolls
# back num_model_step - 1 and nothing tells the mask op; a re-sync takes
# base_model_seq_lens_this_time, as PR #5738 merged keeps it. Ten of its
# twelve written tensors are registered in place.
DRAFT_MODEL_PREPROCESS_PR5245 = replace(
    DRAFT_MODEL_PREPROCESS,
    inputs=tuple(
        replace(t, access=R, doc="[N] base model; a re-synced draft goes back by it",
                view=View("base_seq_lens_this_time"))
        if t.name == "base_model_seq_lens_this_time" else t
        for t in DRAFT_MODEL_PREPROCESS.inputs if t.name != "mask_rollback"),
    undeclared=("is_block_step", "base_model_draft_tokens"),
    doc="Prepare the draft model's state at the start of an engine step, in place, as "
        "FastDeploy's PR #5245 left it (ba915e03e; 20 tensors): a running decode rolls back "
        "num_model_step - 1 positions and re-feeds the accepted tokens; a draft that stopped "
        "while the base model went on takes the base model's seq_lens_decoder and step_idx "
        "less base_model_seq_lens_this_time. No mask_rollback: the mask op's cursor is not "
        "told of either.",
)

def _unread(inputs: Tuple[TensorArg, ...], **docs: str) -> Tuple[TensorArg, ...]:
    """`inputs`, the tensors `docs` names passed and never read or written
    (access U, no view), each with its words."""
    return tuple(replace(t, access=U, view=View(), doc=docs[t.name]) if t.name in docs else t
                 for t in inputs)


# FastDeploy's XPU op at develop (c29e86fc9,
# custom_ops/xpu_ops/src/ops/mtp/draft_model_preprocess.cc lines 107-159): the
# 22-tensor registration, with PR #5245's rules
# (custom_ops/xpu_ops/src/plugin/src/wrapper/mtp_wrapper/draft_model_preprocess.cpp
# lines 166-177): its kernel never reads or writes mask_rollback or
# recompute_token_num.
DRAFT_MODEL_PREPROCESS_XPU = replace(
    DRAFT_MODEL_PREPROCESS_RECOMPUTE,
    inputs=_unread(DRAFT_MODEL_PREPROCESS_RECOMPUTE.inputs,
                   mask_rollback="[N] passed, never read or written",
                   recompute_token_num="[N] passed, never read or written"),
    undeclared=("is_block_step", "base_model_draft_tokens"),
    doc="Prepare the draft model's state at the start of an engine step, in place, as "
        "FastDeploy's XPU op at develop does (c29e86fc9): the 22-tensor registration with "
        "PR #5245's rules; mask_rollback and recompute_token_num are passed and never read or "
        "written.",
)

# FastDeploy's shadow form (develop): the draft's lengths and step are derived
# from the base model's -- the target model's, in its names -- every step, so
# nothing is rolled back and there is no mask_rollback, is_block_step or
# batch_drop. FastDeploy registers the in-place pairs of all its written
# tensors but the target model's draft tokens; so do we.
def _shadow_inputs(inputs: Tuple[TensorArg, ...]) -> Tuple[TensorArg, ...]:
    """The shadow form's tensors: the rollback form's it keeps, in FastDeploy's
    order, the base model's named the target model's, and max_dec_len."""
    by_name = {t.name: t for t in inputs}
    docs = {"stop_flags": "[N] draft skipped this step",
            "accept_tokens": "[N, A] tokens the target model accepted",
            "base_model_seq_lens_encoder": "[N] target model (not read)",
            "base_model_draft_tokens": "[N, Dt] columns 1.. set to -1"}
    out = []
    for name in ("draft_tokens", "input_ids", "stop_flags", "seq_lens_this_time",
                 "seq_lens_encoder", "seq_lens_decoder", "step_idx", "not_need_stop", "pre_ids",
                 "accept_tokens", "accept_num", "base_model_seq_lens_encoder",
                 "base_model_seq_lens_decoder", "base_model_step_idx", "base_model_stop_flags",
                 "max_dec_len", "base_model_draft_tokens"):
        if name == "max_dec_len":
            out.append(TensorArg("max_dec_len", _i64, R, "[N] each request's length limit",
                                 view=View("max_dec_len")))
            continue
        t = by_name[name]
        doc = docs.get(name, t.doc.replace("base model", "target model"))
        out.append(replace(t, name=name.replace("base_model_", "target_model_"), doc=doc))
    return tuple(out)


DRAFT_MODEL_PREPROCESS_SHADOW = OpSignature(
    name="draft_model_preprocess",
    inputs=_shadow_inputs(DRAFT_MODEL_PREPROCESS.inputs),
    attrs=(
        AttrArg("num_model_step", int, "draft substeps per engine step, >= 1", minimum=1),
        AttrArg("is_splitwise_prefill", bool, "prefill node of a PD-split deployment: no "
                                              "request is skipped for its length limit",
                field="splitwise_prefill"),
    ),
    undeclared=("target_model_draft_tokens",),
    views="PreprocessTensors",
    attrs_struct="PreprocessAttrs",
    batch="seq_lens_this_time",
    # No truncate_first_token: its first token goes to E - 1. No
    # kvcache_scheduler_v1: nothing is parked or dropped.
    fixed_attrs=(("truncate_first_token", "true"), ("kvcache_scheduler_v1", "false")),
    doc="Prepare the draft model's state at the start of an engine step, in place, with "
        "FastDeploy's 17-tensor op: every decode takes seq_lens_decoder and step_idx from the "
        "target model less accept_num and re-feeds the accepted tokens; a prefill places its "
        "first token at E - 1; a request whose target model stopped or reaches max_dec_len "
        "is skipped.",
)

# The corrected forms: FastDeploy's registrations (20 and 22 tensors) with
# rules that keep the draft right in every FastDeploy runner. A running decode
# takes seq_lens_decoder and step_idx from the base model less accept_num every
# step (the shadow form's rule, and the rollback form's re-sync), whatever the
# draft's own state says: FastDeploy's inserts and stops differ by version, the
# base model's lengths do not. The change of seq_lens_decoder is added to
# mask_rollback where the form has it, and a prefill starts a new mask
# history. recompute_token_num and base_model_seq_lens_this_time are passed
# and never read or written.
DRAFT_MODEL_PREPROCESS_CORRECTED_PR5245 = replace(
    DRAFT_MODEL_PREPROCESS,
    inputs=tuple(t for t in DRAFT_MODEL_PREPROCESS.inputs if t.name != "mask_rollback"),
    undeclared=("is_block_step", "base_model_draft_tokens"),
    doc="Prepare the draft model's state at the start of an engine step, in place, with "
        "FastDeploy's 20-tensor registration (ba915e03e) and the corrected rules: a running "
        "decode takes seq_lens_decoder and step_idx from the base model less accept_num and "
        "re-feeds the accepted tokens; a prefill places its first token; a block step parks "
        "or drops the draft.",
)

DRAFT_MODEL_PREPROCESS_CORRECTED_PR5738 = replace(
    DRAFT_MODEL_PREPROCESS_RECOMPUTE,
    inputs=_unread(DRAFT_MODEL_PREPROCESS_RECOMPUTE.inputs,
                   recompute_token_num="[N] passed, never read or written",
                   base_model_seq_lens_this_time="[N] base model (not read)"),
    undeclared=("is_block_step", "mask_rollback", "base_model_draft_tokens"),
    doc="Prepare the draft model's state at the start of an engine step, in place, with "
        "FastDeploy's 22-tensor registration (9018ccf74) and the corrected rules: a running "
        "decode takes seq_lens_decoder and step_idx from the base model less accept_num, "
        "re-feeds the accepted tokens and adds the change of seq_lens_decoder to mask_rollback; "
        "a prefill places its first token and sets mask_rollback to 0; recompute_token_num is "
        "never read or written.",
)

UPDATE_ATTN_MASK_OFFSETS = OpSignature(
    name="update_attn_mask_offsets",
    inputs=(
        TensorArg("ids_remove_padding", None, U, "[T] only its length is read", LENGTH,
                  view=View(rows="num_tokens")),
        TensorArg("seq_lens_this_time", _i32, R, "[bsz] tokens this substep; defines bsz",
                  view=View("seq_lens_this_time")),
        TensorArg("seq_lens_encoder", _i32, R, "[N]", view=View("seq_lens_encoder")),
        TensorArg("seq_lens_decoder", _i32, R, "[N]", view=View("seq_lens_decoder")),
        TensorArg("cu_seqlens_q", _i32, R, "[bsz+1] prefix sums of seq_lens_this_time, or [bsz]",
                  FLAT, view=View("cu_seqlens_q", numel="cu_entries")),
        TensorArg("attn_mask_offsets_full", _i32, R, "[N, max_model_len] prompt mask offsets",
                  MATRIX, view=View("mask_full", cols="mask_full_cols")),
        TensorArg("attn_mask_offsets_decoder", _i32, W, "[N] mask cursor",
                  view=View("mask_decoder")),
        TensorArg("is_block_step", _b, R, "[N]", view=View("is_block_step")),
        # Column 0 is read for every prompt request: at least one column.
        TensorArg("decode_states", _i32, W, "[N, Ds] decode states; column 0 == 2 is vision generation",
                  MATRIX, min_cols=1, view=View("decode_states", cols="decode_states_cols")),
        TensorArg("mask_rollback", _i32, W, "[N] pending rollback, consumed here",
                  view=View("mask_rollback")),
    ),
    attrs=(),
    fresh_outputs=(FreshOutput("attn_mask_offsets", _i32, rows_of="ids_remove_padding",
                               per_row=2),),
    # FastDeploy's outputs, in its order; the cursor, which FastDeploy writes
    # without declaring it, is declared too, after them.
    written_first=("decode_states", "mask_rollback"),
    views="MaskTensors",
    batch="seq_lens_this_time",
    doc="Write the attention-mask offsets of this substep's tokens and return them, int32 "
        "[2 * T]: the odd entry of each token of a prompt request is attn_mask_offsets_full[i, "
        "j] + 1 (seq_lens_decoder + n in vision generation); a decode request first consumes "
        "mask_rollback from its cursor attn_mask_offsets_decoder, then numbers its tokens from "
        "it; a decode of more than one token rewrites its row of decode_states (0 for each of "
        "its tokens' columns, -1 after them); all other entries are 0. The raw op returns "
        "[attn_mask_offsets, decode_states, mask_rollback, attn_mask_offsets_decoder].",
)

# The shadow form's: no cursor and no rollback, a decode token's mask end is
# seq_lens_decoder + 1 + j.
UPDATE_ATTN_MASK_OFFSETS_SHADOW = replace(
    UPDATE_ATTN_MASK_OFFSETS,
    inputs=tuple(t for t in UPDATE_ATTN_MASK_OFFSETS.inputs
                 if t.name not in ("attn_mask_offsets_decoder", "mask_rollback")),
    written_first=(),
    doc="Write the attention-mask offsets of this substep's tokens and return them, int32 "
        "[2 * T], with FastDeploy's eight-tensor op: a decode token's mask end is "
        "seq_lens_decoder + 1 + j, and every decode rewrites its row of decode_states (0 for "
        "its tokens' columns that do not hold 1, -1 elsewhere).",
)

# FastDeploy's PR #6403 (2178f2829): the ten-tensor op with the decode_states
# rule of the shadow form's op (every decode; a 1 among its tokens' columns
# becomes -1). Its registration is the rollback form's.
UPDATE_ATTN_MASK_OFFSETS_PR6403 = replace(
    UPDATE_ATTN_MASK_OFFSETS,
    doc=UPDATE_ATTN_MASK_OFFSETS.doc.replace(
        "a decode of more than one token rewrites its row of decode_states (0 for each of "
        "its tokens' columns, -1 after them)",
        "every decode rewrites its row of decode_states (0 for its tokens' columns that do "
        "not hold 1, -1 elsewhere), as FastDeploy's PR #6403 (2178f2829) does"),
)

# The corrected forms' ten-tensor op: a decode token's mask end is numbered
# from its KV position, seq_lens_decoder + 1 + j, as the shadow form's is, so it
# holds whatever the runner did to the cursor; the cursor is then written as
# seq_lens_decoder + n and mask_rollback as 0, which keeps them true for
# whoever reads them. decode_states by FastDeploy 9018ccf74's rule, or, in the
# corrected_pr6403 form, by 2178f2829's.
UPDATE_ATTN_MASK_OFFSETS_CORRECTED = replace(
    UPDATE_ATTN_MASK_OFFSETS,
    doc="Write the attention-mask offsets of this substep's tokens and return them, int32 "
        "[2 * T], with FastDeploy's ten-tensor registration and the corrected rule: the odd "
        "entry of each token of a prompt request is attn_mask_offsets_full[i, j] + 1 "
        "(seq_lens_decoder + n in vision generation); a decode token's is seq_lens_decoder + 1 "
        "+ j, and the decode leaves attn_mask_offsets_decoder = seq_lens_decoder + n and "
        "mask_rollback = 0; a decode of more than one token rewrites its row of decode_states "
        "(0 for each of its tokens' columns, -1 after them); all other entries are 0.",
)
UPDATE_ATTN_MASK_OFFSETS_CORRECTED_PR6403 = replace(
    UPDATE_ATTN_MASK_OFFSETS_CORRECTED,
    doc=UPDATE_ATTN_MASK_OFFSETS_CORRECTED.doc.replace(
        "a decode of more than one token rewrites its row of decode_states (0 for each of its "
        "tokens' columns, -1 after them)",
        "every decode rewrites its row of decode_states (0 for its tokens' columns that do "
        "not hold 1, -1 elsewhere), as FastDeploy's PR #6403 (2178f2829) does"),
)

# Not a FastDeploy op: the explicit check for errors that asynchronous GPU
# calls left on the device (any tensor on that device names it; unchanged).
RAISE_PENDING_ERRORS = OpSignature(
    name="raise_pending_errors",
    inputs=(TensorArg("x", None, W, "any tensor on the device to check", ANY),),
    attrs=(),
    doc="Raise the error an asynchronous call left on x's GPU, if any (draft_model_preprocess "
        "with not_need_stop on the GPU; update_attn_mask_offsets while a CUDA graph is captured "
        "or with FASTDEPLOY_MTP_ASYNC_MASK=1): a refused batch is left unchanged and its error "
        "waits on the device. Waits for x's stream; does nothing for a CPU tensor.",
)

DEFAULT_FORM = "rollback"

# Each form's ops by name, in the order they are registered.
FORMS: Dict[str, Dict[str, OpSignature]] = {
    form: {s.name: s for s in (preprocess, mask, RAISE_PENDING_ERRORS)}
    for form, preprocess, mask in (
        ("rollback", DRAFT_MODEL_PREPROCESS, UPDATE_ATTN_MASK_OFFSETS),
        ("recompute", DRAFT_MODEL_PREPROCESS_RECOMPUTE, UPDATE_ATTN_MASK_OFFSETS),
        ("pr5245", DRAFT_MODEL_PREPROCESS_PR5245, UPDATE_ATTN_MASK_OFFSETS),
        ("pr5738", DRAFT_MODEL_PREPROCESS_PR5738, UPDATE_ATTN_MASK_OFFSETS),
        ("pr6403", DRAFT_MODEL_PREPROCESS_PR5738, UPDATE_ATTN_MASK_OFFSETS_PR6403),
        ("xpu", DRAFT_MODEL_PREPROCESS_XPU, UPDATE_ATTN_MASK_OFFSETS),
        ("shadow", DRAFT_MODEL_PREPROCESS_SHADOW, UPDATE_ATTN_MASK_OFFSETS_SHADOW),
        ("corrected_pr5245", DRAFT_MODEL_PREPROCESS_CORRECTED_PR5245,
         UPDATE_ATTN_MASK_OFFSETS_CORRECTED),
        ("corrected_pr5738", DRAFT_MODEL_PREPROCESS_CORRECTED_PR5738,
         UPDATE_ATTN_MASK_OFFSETS_CORRECTED),
        ("corrected_pr6403", DRAFT_MODEL_PREPROCESS_CORRECTED_PR5738,
         UPDATE_ATTN_MASK_OFFSETS_CORRECTED_PR6403))
}

# Whose rules each form's ops run, where they are another form's: a FastDeploy
# version that changed one op of the pair runs the other op as the version
# before it (its kernel is instantiated once, under that form). A form not
# named runs its own rules (for a mask op: the rules of the first form with
# its registration, table_owner).
PREPROCESS_RULES_OF = {"pr6403": "pr5738", "xpu": "pr5245",
                       "corrected_pr6403": "corrected_pr5738"}
MASK_RULES_OF = {"pr6403": "pr6403", "corrected_pr5245": "corrected_pr5738",
                 "corrected_pr5738": "corrected_pr5738", "corrected_pr6403": "corrected_pr6403"}

# The default form's ops.
OPS: Dict[str, OpSignature] = FORMS[DEFAULT_FORM]


def same_registration(a: OpSignature, b: OpSignature) -> bool:
    """Whether two tables register and bind alike (their words may differ)."""
    return a is b or replace(a, doc="") == replace(b, doc="")


def table_owner(sig: OpSignature) -> str:
    """The first form whose table of `sig`'s op registers and binds as `sig`
    does: forms that share a registration share its C++ (macros, checks,
    views)."""
    return next(f for f, ops in FORMS.items() if same_registration(ops[sig.name], sig))




def mask_form(form: str) -> str:
    """The form whose mask kernel `form`'s mask op runs: MASK_RULES_OF's, else
    the first form that has the same mask table (forms that share the op
    share its kernel)."""
    return MASK_RULES_OF.get(form) or table_owner(FORMS[form][UPDATE_ATTN_MASK_OFFSETS.name])


def preprocess_form(form: str) -> str:
    """The form whose preprocess kernel `form`'s preprocess op runs."""
    return PREPROCESS_RULES_OF.get(form, form)


def op_name(form: str, sig: OpSignature) -> str:
    """The name `form`'s op `sig` is registered under in our library:
    <op>_<form>, so that every form's ops live in one library and none
    clashes with FastDeploy's own (<op>) in the same process; an op every
    form shares (raise_pending_errors) keeps its name."""
    return f"{sig.name}_{form}" if sig.views else sig.name


def argument_help(sig: OpSignature) -> str:
    """The table's words on each argument, for the wrappers' docstrings."""
    rows = ["", "Arguments (``fastdeploy_mtp.signature``; W: written in place):", ""]
    for t in sig.inputs:
        dtype = "any dtype" if t.dtype is None else np.dtype(t.dtype).name
        rows.append(f"- ``{t.name}`` ({dtype}{', W' if t.written else ''}): {t.doc}")
    for a in sig.attrs:
        rows.append(f"- ``{a.name}`` ({a.type.__name__}): {a.doc}")
    return "\n".join(rows) + "\n"
