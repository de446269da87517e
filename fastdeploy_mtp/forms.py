"""Each form's ops as typed wrappers, made from its signature table.

``draft_model_preprocess`` has had more than one signature in FastDeploy
(``fastdeploy_mtp.signature.FORMS``); one library registers every form's ops,
so any form is a call away in any process::

    ops = fastdeploy_mtp.forms.load("recompute")
    ops.draft_model_preprocess(*tensors, num_model_step, truncate_first_token,
                               splitwise_prefill, kvcache_scheduler_v1)

Each wrapper takes the form's inputs in FastDeploy's positional order (or by
keyword), then its attributes, checks at the boundary what the C++ side
cannot see, and raises :class:`fastdeploy_mtp.ops.BadInputError`, changing nothing, on bad
input. ``load(form).library`` holds the registered ops themselves under
FastDeploy's op names, for positional calls as FastDeploy's proposer makes
them. ``fastdeploy_mtp.ops``' wrappers are the process's form's.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

from . import _library
from .signature import DEFAULT_FORM, FORMS, OpSignature, argument_help, op_name


def _parameters(sig: OpSignature) -> inspect.Signature:
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter(t.name, kind, annotation="paddle.Tensor") for t in sig.inputs]
    params += [inspect.Parameter(a.name, kind, annotation=a.type) for a in sig.attrs]
    return inspect.Signature(params, return_annotation="paddle.Tensor" if sig.fresh_outputs
                             else None)


def _wrapper(form: str, sig: OpSignature) -> Callable[..., Any]:
    signature = _parameters(sig)
    n_tensors, n_all = len(sig.inputs), len(sig.inputs) + len(sig.attrs)
    registered = op_name(form, sig)

    def call(*args, **kwargs):
        if kwargs or len(args) != n_all:
            args = signature.bind(*args, **kwargs).args
        tensors, attrs = args[:n_tensors], args[n_tensors:]
        _library._check_boundary(sig, tensors, attrs)
        attrs = tuple(a.type(v) for a, v in zip(sig.attrs, attrs))
        outs = _library._call(registered, sig, tensors, attrs)
        if sig.fresh_outputs:
            return outs[0] if isinstance(outs, (list, tuple)) else outs
        return None

    call.__name__ = call.__qualname__ = sig.name
    call.__signature__ = signature
    call.__doc__ = (f"{sig.doc}\n\nThe {form} form's, registered as ``{registered}``. "
                    f"Writes the {len(sig.written)} tensors marked written (W) below; reads "
                    "the rest. Raises :class:`fastdeploy_mtp.ops.BadInputError`, changing "
                    "nothing, on bad input.\n" + argument_help(sig))
    return call


@dataclass(frozen=True)
class FormOps:
    """One form's ops: typed wrappers made from its signature table."""

    form: str
    draft_model_preprocess: Callable[..., None]
    update_attn_mask_offsets: Callable[..., Any]
    raise_pending_errors: Callable[..., None]

    @property
    def library(self) -> SimpleNamespace:
        """The registered ops themselves under FastDeploy's op names, for
        positional calls as FastDeploy makes them (the library loaded, built
        the first time)."""
        return SimpleNamespace(**{name: _library.raw_op(self.form, name) for name in FORMS[self.form]})


@functools.lru_cache(maxsize=None)
def load(form: str = DEFAULT_FORM) -> FormOps:
    """`form`'s typed wrappers. The library loads at the first call."""
    _library.check_form(form)
    return FormOps(form, **{name: _wrapper(form, sig) for name, sig in FORMS[form].items()})
