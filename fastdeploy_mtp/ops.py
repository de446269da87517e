"""The ops of the process's form, and what a caller of any op catches.

``draft_model_preprocess``, ``update_attn_mask_offsets`` and
``raise_pending_errors`` here are the typed wrappers
(``fastdeploy_mtp.forms``) of the process's form: ``FASTDEPLOY_MTP_FORM``
names it, else the default (``rollback``); ``fastdeploy_mtp.forms.load(form)``
gives any form's. Each takes the op's inputs in the registered (FastDeploy)
positional order, then its attributes, and is equally callable with keywords.

The op library behind them (``fastdeploy_mtp._library``) is the installed
``fastdeploy_mtp_ops`` module (``python setup_ops.py install``), or is
compiled once on first use into ``~/.cache/fastdeploy_mtp`` (set
``FASTDEPLOY_MTP_CACHE`` to move it); :func:`load_library` loads it. Every
failure to find, build or load it raises ``_build.BuildError``, one line.

Bad input raises :class:`BadInputError` (a ``ValueError``) whose message names
the request, the field and the values; no tensor has changed when it does.
"""

from __future__ import annotations

from . import _build
from ._library import (BadInputError, PaddleMissingError, cached_library, check_form,
                       load_library, raw_op)
from .signature import DEFAULT_FORM, FORMS

__all__ = ["BadInputError", "PaddleMissingError", "cached_library", "check_form",
           "load_library", "process_form", "raw_op"]

FORM_VARIABLE = "FASTDEPLOY_MTP_FORM"


def process_form() -> str:
    """The form ``fastdeploy_mtp.ops``' wrappers and the proposer use:
    FASTDEPLOY_MTP_FORM's, else the default."""
    return _build.setting(FORM_VARIABLE, tuple(FORMS),
                          "the forms here are " + ", ".join(FORMS)
                          + f" (empty or unset: {DEFAULT_FORM})") or DEFAULT_FORM


def __getattr__(name: str):
    # The process's form's typed wrappers (fastdeploy_mtp.forms), looked up
    # at use, so that importing this module reads no setting.
    if name in FORMS[DEFAULT_FORM]:
        from . import forms

        return getattr(forms.load(process_form()), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
