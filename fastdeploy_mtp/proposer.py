"""MTPProposer: the draft model's state for a FastDeploy-style runner.

The proposer owns the draft buffers of ``max_num_seqs`` slots
(``buffers.draft_buffers``), inserts requests as its role says
(``slots.write_new_request`` / ``slots.write_handed_over``), and invokes the
ops with the base model's buffers, which the runner holds in a dict keyed as
FastDeploy-style runners key them (``buffers.BASE_KEYS``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional

import numpy as np

from . import forms, ops
from .buffers import (BASE_KEYS, SLOT_FIELDS, base_buffer_problems, draft_buffers,
                      make_base_buffers, read, write)
from .signature import DRAFT_MODEL_PREPROCESS
from .slots import (RELEASED, ProposerError, Request, check_request, decode_mask_rollback,
                    is_int, write_handed_over, write_new_request)

ROLES = ("mixed", "prefill", "decode")
# How the forms name the base model's buffers: base_model_X, or target_model_X
# (the shadow form's); either is the runner's base[X].
_BASE_PREFIXES = ("base_model_", "target_model_")
_MAX_LEN = 2**31 - 1


@dataclass(frozen=True)
class ProposerConfig:
    """A proposer's sizes, role and FastDeploy settings."""

    num_model_steps: int
    max_model_len: int
    max_num_seqs: int
    max_draft_tokens: Optional[int] = None  # default: num_model_steps
    role: str = "mixed"
    kvcache_scheduler_v1: bool = True
    truncate_first_token: bool = True

    def __post_init__(self):
        def need(cond, msg):
            if not cond:
                raise ProposerError(f"ProposerConfig: {msg}")

        for name, low in (("num_model_steps", 1), ("max_num_seqs", 1), ("max_model_len", 2)):
            v = getattr(self, name)
            need(is_int(v) and low <= v <= _MAX_LEN,
                 f"{name} must be an int in [{low}, {_MAX_LEN}], got {v!r}")
        need(self.max_draft_tokens is None or is_int(self.max_draft_tokens),
             f"max_draft_tokens must be None or an int, got {self.max_draft_tokens!r}")
        for name in ("kvcache_scheduler_v1", "truncate_first_token"):
            need(isinstance(getattr(self, name), (bool, np.bool_)),
                 f"{name} must be a bool, got {getattr(self, name)!r}")
        need(self.role in ROLES, f"role must be one of {ROLES}, got {self.role!r}")
        need(self.draft_width >= self.num_model_steps,
             f"max_draft_tokens ({self.max_draft_tokens}) must be >= num_model_steps "
             f"({self.num_model_steps}): the base model may accept k+1 tokens")
        need(self.max_prompt >= 1,
             f"max_model_len {self.max_model_len} leaves no room for a prompt: a "
             f"{self.role} node needs max_model_len >= {self.max_model_len - self.max_prompt + 1}")

    @property
    def draft_width(self) -> int:
        return self.num_model_steps if self.max_draft_tokens is None else self.max_draft_tokens

    @property
    def substeps(self) -> int:
        """Draft substeps per engine step: one on a prefill node."""
        return 1 if self.role == "prefill" else self.num_model_steps

    @property
    def max_prompt(self) -> int:
        """Room for the first token (and, on a decode node, the k-1 draft positions)."""
        return self.max_model_len - (self.num_model_steps if self.role == "decode" else 1)


def bind_preprocess_inputs(state: Dict[str, object], base: Dict[str, object],
                           form: Optional[str] = None) -> Dict[str, object]:
    """Map each registered input name of draft_model_preprocess to a buffer:
    the draft's own, else the base model's (``base_model_X`` is ``base[X]``).

    The registration is compared with the signature table of `form` (the
    process's form when None) first, so a library or wrapper whose names drifted fails here,
    loudly, instead of silently swapping two arguments at the first step. A
    form's input the proposer does not own (the recompute form's
    recompute_token_num, the shadow form's max_dec_len) is left for its
    runner to pass; the shadow form's ``target_model_X`` is ``base[X]`` too.
    """
    from .registration import differences, read_registered
    from .signature import FORMS

    from .signature import op_name

    form = ops.process_form() if form is None else form
    ops.check_form(form)
    ops.load_library()
    sig = FORMS[form][DRAFT_MODEL_PREPROCESS.name]
    registered = read_registered(op_name(form, sig))
    drift = differences(sig, registered)
    if drift:
        raise ProposerError("MTPProposer: draft_model_preprocess does not match the "
                            "signature table: " + "; ".join(drift))
    bound = {}
    for name in registered.inputs:
        base_name = next((name[len(p):] for p in _BASE_PREFIXES if name.startswith(p)), name)
        if name in state:
            bound[name] = state[name]
        elif base_name in base:
            bound[name] = base[base_name]
        elif name not in DRAFT_MODEL_PREPROCESS.input_names:
            continue  # another form's own input
        else:
            raise ProposerError(f"MTPProposer: no buffer for the op's input {name!r}")
    return bound


class MTPProposer:
    """Owns the draft state of `config.max_num_seqs` slots on `place`.

    ``base`` is the runner's dict of base-model buffers (see BASE_KEYS), each
    with ``max_num_seqs`` rows, on the same place. A slot holds one request
    from its insert until its release. ``form`` is the form of the ops it
    calls (``fastdeploy_mtp.signature.FORMS``); None: the process's
    (``ops.process_form``).
    """

    def __init__(self, config: ProposerConfig, base: Dict[str, object], place=None,
                 form: Optional[str] = None):
        problems = base_buffer_problems(base, config.max_num_seqs, config.num_model_steps)
        if problems:
            raise ProposerError("MTPProposer: " + "; ".join(problems))
        self.config = config
        self.base = base
        self.state = draft_buffers(config.max_num_seqs, config.max_model_len,
                                   config.draft_width, place)
        self.place = self.state["draft_tokens"].place
        self.occupied: set = set()
        self.form = ops.process_form() if form is None else form
        self._preprocess_args = bind_preprocess_inputs(self.state, base, self.form)
        self.form_ops = forms.load(self.form)

    def decode_mask_rollback(self) -> int:
        """The preset of a handed-over request."""
        return decode_mask_rollback(self.config.num_model_steps)

    def insert(self, requests: Iterable[Request]) -> None:
        """Insert a batch of requests into free slots; all or nothing (ProposerError)."""
        cfg = self.config
        checked = [check_request(r, cfg.max_num_seqs, cfg.max_prompt, cfg.role == "decode")
                   for r in requests]
        slots = [r.slot for r in checked]
        if len(set(slots)) != len(slots):
            twice = next(s for s in slots if slots.count(s) > 1)
            raise ProposerError(f"MTPProposer.insert: slot {twice}: inserted twice in one batch")
        busy = sorted(self.occupied.intersection(slots))
        if busy:
            raise ProposerError(f"MTPProposer.insert: slot {busy[0]} holds a request: release "
                                f"it first")
        if not checked:
            return
        a = {n: read(self.state[n]) for n in SLOT_FIELDS}
        for r in checked:
            if cfg.role == "decode":
                write_handed_over(a, r, cfg.num_model_steps, self.decode_mask_rollback())
            else:
                write_new_request(a, r)
        for name in SLOT_FIELDS:
            write(self.state[name], a[name])
        self.occupied.update(slots)

    def release(self, slots: Iterable[int]) -> None:
        """Forget finished or preempted slots: stopped, empty, no pending rollback."""
        slots = list(slots)
        for s in slots:
            if not is_int(s) or not 0 <= s < self.config.max_num_seqs:
                raise ProposerError(f"MTPProposer.release: slot {s!r} is not an int in "
                                    f"[0, {self.config.max_num_seqs})")
        slots = sorted(set(int(s) for s in slots))
        if not slots:
            return
        for name, value in RELEASED.items():
            arr = read(self.state[name])
            arr[slots] = value
            write(self.state[name], arr)
        self.occupied.difference_update(slots)

    def preprocess_arguments(self, not_need_stop=None) -> dict:
        """draft_model_preprocess's arguments for this node, by name.

        A prefill node runs it with splitwise_prefill and num_model_step 1.
        ``not_need_stop``, if given, stands for the proposer's host flag: a
        [1] bool tensor on the GPU makes the call asynchronous, so that a
        runner can capture it in a CUDA graph (``captured.CapturedDraft``).
        """
        cfg = self.config
        prefill_node = cfg.role == "prefill"
        args = dict(self._preprocess_args,
                    num_model_step=1 if prefill_node else cfg.num_model_steps,
                    truncate_first_token=bool(cfg.truncate_first_token),
                    splitwise_prefill=prefill_node,
                    kvcache_scheduler_v1=bool(cfg.kvcache_scheduler_v1))
        if not_need_stop is not None:
            args["not_need_stop"] = not_need_stop
        return args

    @contextlib.contextmanager
    def preprocess_effects(self):
        """Around a run of draft_model_preprocess (eager or replayed): nothing
        here; the simulator's replay without the fix
        (``harness.without_fix.ProposerWithoutFix``) undoes the op's update of
        mask_rollback in it."""
        yield

    def prepare_inputs(self) -> bool:
        """draft_model_preprocess for this engine step; returns not_need_stop."""
        with self.preprocess_effects():
            self.form_ops.draft_model_preprocess(**self.preprocess_arguments())
        return bool(self.state["not_need_stop"].numpy()[0])

    def cu_seqlens_q(self):
        """Prefix sums of the draft's seq_lens_this_time, as the op wants them."""
        import paddle

        n = read(self.state["seq_lens_this_time"])
        cu = np.zeros(n.shape[0] + 1, np.int32)
        cu[1:] = np.cumsum(n)
        return paddle.to_tensor(cu, place=self.place)

    def update_attn_mask_offsets(self, ids_remove_padding, cu_seqlens_q=None):
        """update_attn_mask_offsets for one draft substep; returns the offsets."""
        s = self.state
        return self.form_ops.update_attn_mask_offsets(
            ids_remove_padding=ids_remove_padding,
            seq_lens_this_time=s["seq_lens_this_time"],
            seq_lens_encoder=s["seq_lens_encoder"],
            seq_lens_decoder=s["seq_lens_decoder"],
            cu_seqlens_q=cu_seqlens_q if cu_seqlens_q is not None else self.cu_seqlens_q(),
            attn_mask_offsets_full=s["attn_mask_offsets_full"],
            attn_mask_offsets_decoder=s["attn_mask_offsets_decoder"],
            is_block_step=s["is_block_step"],
            decode_states=s["decode_states"],
            mask_rollback=s["mask_rollback"],
        )


__all__: List[str] = ["MTPProposer", "ProposerConfig", "ProposerError", "Request",
                      "make_base_buffers", "BASE_KEYS", "ROLES"]
