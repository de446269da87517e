"""FastDeploy plugin: ``FD_PLUGINS=fastdeploy_mtp`` puts this package's
``draft_model_preprocess`` and ``update_attn_mask_offsets`` in place of
FastDeploy's.

How FastDeploy runs it (FastDeploy's code; the same at c29e86fc9 and 9018ccf74
unless a line says otherwise):

- ``fastdeploy/plugins/model_register/__init__.py`` lines 19-34: the entry-point
  group is ``fastdeploy.model_register_plugins``; each loaded entry point's
  object is called with no arguments (line 34), once per process (a module
  flag, lines 20 and 27-29), and an exception it raises is not caught there.
- ``fastdeploy/plugins/utils.py`` lines 23-58: the entry points of the group
  come from ``importlib.metadata.entry_points(group=...)`` (line 33); with
  ``FD_PLUGINS`` unset none is loaded (lines 42-46); otherwise those whose
  entry-point *name* is in the list are (line 50): ``FD_PLUGINS`` is split at
  commas, with no trimming (``fastdeploy/envs.py`` line 114 at c29e86fc9, line
  88 at 9018ccf74). An exception while importing the target is logged and the
  plugin skipped (lines 52-56). So the variable names the entry point,
  ``fastdeploy_mtp``, not the distribution.
- ``fastdeploy/model_executor/models/__init__.py`` lines 24 and 68: the loading
  runs when ``fastdeploy.model_executor.models`` is first imported. The
  workers import it through their model runner
  (``fastdeploy/worker/gpu_model_runner.py`` line 54 imports the model loader,
  whose ``default_loader.py`` line 29 at c29e86fc9 imports
  ``models.model_base``), and so does any process that asks
  ``ModelConfig.registry`` (``fastdeploy/config.py`` line 350 at c29e86fc9, 302
  at 9018ccf74), the engine's included. Each worker is a process of its own,
  so each runs ``register`` once; the engine runs it too but never calls the
  ops.


The modules: ``detect`` (which form FastDeploy's ops are), ``replace``
(our ops in place of FastDeploy's, chosen at their first call), ``log``
(the one line of each decision).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Tuple

from ..ops import FORM_VARIABLE
from ..signature import FORMS
from .detect import (FASTDEPLOY_OPS, MASK, PREPROCESS, fastdeploy_op, forms_of, matches,
                     preprocess_parameters)
from .log import first_line as _first_line, say as _say
from .replace import Deferred, replace_everywhere

__all__ = ["register"]

_lock = threading.Lock()
_done = False


def register() -> None:
    """FastDeploy's entry point (``fastdeploy.model_register_plugins``): puts
    our ops' stand-ins in place of FastDeploy's once per process, logging one
    line. Never raises: any failure is that line, FastDeploy's ops left in
    place. Loads nothing and runs nothing: the first call of an op does."""
    global _done
    with _lock:
        if _done:
            return
        _done = True
        try:
            level, line = _register()
        except Exception as e:  # whatever went wrong, FastDeploy runs on with its own ops
            level, line = logging.WARNING, (
                f"FastDeploy's ops stay in place: {type(e).__name__}: {_first_line(str(e))}")
        _say(level, line)


def _register() -> Tuple[int, str]:
    """Does the work; returns the line to log and its level. Raises only
    where something unforeseen fails, having changed nothing."""
    override = os.environ.get(FORM_VARIABLE, "")
    if override and override not in FORMS:
        return logging.WARNING, (
            f"{FORM_VARIABLE}={override!r} is none of our forms ({', '.join(FORMS)}); "
            "FastDeploy's ops stay in place")
    try:
        __import__(FASTDEPLOY_OPS)
        fd_ops = sys.modules[FASTDEPLOY_OPS]
    except Exception as e:
        return logging.WARNING, (
            f"FastDeploy's {FASTDEPLOY_OPS} did not import ({type(e).__name__}: "
            f"{_first_line(str(e))}); FastDeploy's ops stay in place")
    theirs = fastdeploy_op(fd_ops, PREPROCESS)
    if theirs is None:
        return logging.WARNING, (
            f"FastDeploy's {FASTDEPLOY_OPS} has no {PREPROCESS}; FastDeploy's ops stay in place")
    detected, what = forms_of(fd_ops, theirs)
    if override:
        # Only a form FastDeploy's proposer can call: one of the signature
        # FastDeploy's op has (where several share it, the variable chooses).
        names, count = preprocess_parameters(fd_ops, theirs)
        if (names is not None or count is not None) and \
                not matches(override, PREPROCESS, names, count):
            return logging.WARNING, (
                f"{FORM_VARIABLE}={override} names a form FastDeploy's proposer cannot call: "
                f"FastDeploy's {PREPROCESS} {what}, not the {override} form's "
                f"{len(FORMS[override][PREPROCESS].inputs)} tensors and "
                f"{len(FORMS[override][PREPROCESS].attrs)} attributes; FastDeploy's ops stay "
                "in place")
        candidates = (override,)
        why = f"{FORM_VARIABLE}={override}; FastDeploy's {PREPROCESS} {what}"
    elif detected is None:
        return logging.WARNING, (
            f"FastDeploy's {PREPROCESS} {what}; FastDeploy's ops stay in place (set "
            f"{FORM_VARIABLE} to one of {', '.join(FORMS)} to choose a form)")
    else:
        candidates, why = detected, f"FastDeploy's {PREPROCESS} {what}"
    deferred = Deferred(fd_ops, candidates)
    modules = replace_everywhere(deferred.replacements())
    where = f"replaced in {modules} module{'s' if modules != 1 else ''}; our library loads " \
            "at their first call"
    if len(candidates) == 1:
        return logging.INFO, (
            f"using our {candidates[0]} form of {PREPROCESS} and {MASK} in place of "
            f"FastDeploy's ({why}; {where})")
    return logging.INFO, (
        f"using our {deferred.preprocess} form's {PREPROCESS} (the kernel of the "
        f"{' and '.join(candidates)} forms) and, as a probe of FastDeploy's own {MASK} tells "
        f"at its first call, the {' or '.join(candidates)} form's {MASK} in place of "
        f"FastDeploy's ({why}; {where})")

