"""FastDeploy's forms of the ops, each a drop-in for that FastDeploy version.

``draft_model_preprocess`` has had more than one signature in FastDeploy
(``fastdeploy_mtp.signature.FORMS``). A process registers one form's library
(Paddle registers an op name once per process); choose it in one line::

    ops = fastdeploy_mtp.forms.load("recompute")
    ops.draft_model_preprocess(*tensors, num_model_step, truncate_first_token,
                               splitwise_prefill, kvcache_scheduler_v1)

or set ``FASTDEPLOY_MTP_FORM=recompute`` before the process starts. Each
wrapper takes the form's inputs in FastDeploy's positional order (or by
keyword), then its attributes, checks them at the boundary as
``fastdeploy_mtp.ops`` does, and raises :class:`ops.BadInputError`, changing
nothing, on bad input.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from . import _build, ops
from .signature import DEFAULT_FORM, FORMS, OpSignature, argument_help


def _parameters(sig: OpSignature) -> inspect.Signature:
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter(t.name, kind, annotation="paddle.Tensor") for t in sig.inputs]
    params += [inspect.Parameter(a.name, kind, annotation=a.type) for a in sig.attrs]
    return inspect.Signature(params)


def _wrapper(sig: OpSignature) -> Callable[..., Any]:
    signature = _parameters(sig)
    n_tensors, n_all = len(sig.inputs), len(sig.inputs) + len(sig.attrs)

    def call(*args, **kwargs):
        if kwargs or len(args) != n_all:
            args = signature.bind(*args, **kwargs).args
        tensors, attrs = args[:n_tensors], args[n_tensors:]
        ops._check_boundary(sig, tensors, attrs)
        attrs = tuple(a.type(v) for a, v in zip(sig.attrs, attrs))
        outs = ops._call(sig, tensors, attrs)
        if sig.fresh_outputs:
            return outs[0] if isinstance(outs, (list, tuple)) else outs
        return None

    call.__name__ = call.__qualname__ = sig.name
    call.__signature__ = signature
    call.__doc__ = (f"``{sig.name}`` as FastDeploy's form registers it "
                    "(``fastdeploy_mtp.signature.FORMS``).\n" + argument_help(sig))
    return call


@dataclass(frozen=True)
class FormOps:
    """One form's ops: typed wrappers made from its signature table."""

    form: str
    draft_model_preprocess: Callable[..., None]
    update_attn_mask_offsets: Callable[..., Any]
    raise_pending_errors: Callable[..., None]

    @property
    def library(self):
        """The registered ops themselves, for positional calls as FastDeploy makes them."""
        return ops.load_library(self.form)


def load(form: str = DEFAULT_FORM) -> FormOps:
    """`form`'s ops, its library loaded (built the first time). Raises if this
    process already registered another form's."""
    _build.check_form(form)
    ops.load_library(form)
    table = FORMS[form]
    return FormOps(form, **{name: _wrapper(sig) for name, sig in table.items()})
