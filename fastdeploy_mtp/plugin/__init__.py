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
  ``FD_PLUGINS`` unset none is loaded (lines 42-46; up to ba915e03e, every
  one of the group is, lines 42-50 there, so that an installed plugin runs
  there unasked); otherwise those whose
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


What it puts in place depends on ``FASTDEPLOY_MTP_MODE``:

- ``corrected`` (the default): the corrected form behind the signature
  FastDeploy's ops have (``CORRECTED_OF``: ``corrected_pr5245`` for the
  20-tensor op, ``corrected_pr5738`` or ``corrected_pr6403`` for the
  22-tensor one, ``shadow`` for the 17-tensor one, whose rules are right
  already), and the patches of FastDeploy's proposer where no op can fix what
  its runner feeds the draft (``patches``; each applied only to the code it
  was written for).
- ``exact``: the form that is FastDeploy's own kernel, bit for bit, and no
  patch.

``FASTDEPLOY_MTP_FORM`` names a form instead of the detection (then no patch
is applied: the form is the user's choice).

The modules: ``detect`` (which form FastDeploy's ops are), ``replace``
(our ops in place of FastDeploy's, chosen at their first call), ``patches``
(the patches of FastDeploy's proposer, one module each), ``log`` (the one
line of each decision).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import List, Tuple

from ..ops import FORM_VARIABLE
from ..signature import FORMS
from . import patches
from .detect import (FASTDEPLOY_OPS, PREPROCESS, fastdeploy_op, fastdeploy_version, forms_of,
                     matches, preprocess_parameters)
from .log import first_line as _first_line, say as _say
from .replace import Deferred, replace_everywhere

__all__ = ["register", "MODE_VARIABLE", "MODES", "CORRECTED_OF", "mode"]

MODE_VARIABLE = "FASTDEPLOY_MTP_MODE"
MODES = ("corrected", "exact")
# The form that corrects each of FastDeploy's shipped forms, behind the same
# registration (docs/contract.md, "The corrected forms"). The shadow form's
# rules keep the draft right already; what its runner gets wrong (a chunk's
# last draft input) the patches fix.
CORRECTED_OF = {"pr5245": "corrected_pr5245", "pr5738": "corrected_pr5738",
                "pr6403": "corrected_pr6403", "shadow": "shadow"}

_lock = threading.Lock()
_done = False


def mode() -> str:
    """FASTDEPLOY_MTP_MODE's value (empty or unset: corrected). Raises
    ValueError, one line, for another value."""
    value = os.environ.get(MODE_VARIABLE, "") or "corrected"
    if value not in MODES:
        raise ValueError(f"{MODE_VARIABLE}={value!r} is none of {', '.join(MODES)}")
    return value


def register() -> None:
    """FastDeploy's entry point (``fastdeploy.model_register_plugins``): puts
    our ops' stand-ins in place of FastDeploy's once per process, and in the
    corrected mode the patches of its proposer, logging a line each. Never
    raises: any failure is a WARNING line, FastDeploy's ops left in place.
    Loads nothing and runs nothing: the first call of an op does."""
    global _done
    with _lock:
        if _done:
            return
        _done = True
        try:
            lines = _register()
        except Exception as e:  # whatever went wrong, FastDeploy runs on with its own ops
            lines = [(logging.WARNING, (
                f"FastDeploy's ops stay in place: {type(e).__name__}: {_first_line(str(e))}"))]
        for level, line in lines:
            _say(level, line)


def _register() -> List[Tuple[int, str]]:
    """Does the work; returns the lines to log and their levels. Raises only
    where something unforeseen fails, having changed nothing."""
    try:
        chosen_mode = mode()
    except ValueError as e:
        return [(logging.WARNING, f"{e}; the plugin does nothing, FastDeploy's ops stay")]
    override = os.environ.get(FORM_VARIABLE, "")
    if override and override not in FORMS:
        return [(logging.WARNING, (
            f"{FORM_VARIABLE}={override!r} is none of our forms ({', '.join(FORMS)}); "
            "FastDeploy's ops stay in place"))]
    import importlib.util

    if importlib.util.find_spec("paddle") is None:
        return [(logging.WARNING, "Paddle is not importable here; the plugin does nothing, "
                                  "FastDeploy's ops stay in place")]
    try:
        __import__(FASTDEPLOY_OPS)
        fd_ops = sys.modules[FASTDEPLOY_OPS]
    except Exception as e:
        return [(logging.WARNING, (
            f"FastDeploy's {FASTDEPLOY_OPS} did not import ({type(e).__name__}: "
            f"{_first_line(str(e), 100)}); FastDeploy's ops stay in place"))]
    theirs = fastdeploy_op(fd_ops, PREPROCESS)
    if theirs is None:
        return [(logging.WARNING, (
            f"FastDeploy's {FASTDEPLOY_OPS} has no {PREPROCESS}; FastDeploy's ops stay in place"))]
    detected, what = forms_of(fd_ops, theirs)
    version = fastdeploy_version()
    use = (lambda form: form)
    if override:
        # Only a form FastDeploy's proposer can call: one of the signature
        # FastDeploy's op has (where several share it, the variable chooses).
        names, count = preprocess_parameters(fd_ops, theirs)
        if (names is not None or count is not None) and \
                not matches(override, PREPROCESS, names, count):
            return [(logging.WARNING, (
                f"{FORM_VARIABLE}={override} names a form FastDeploy's proposer cannot call: "
                f"FastDeploy {version}'s {PREPROCESS} {what}, not the {override} form's "
                f"{len(FORMS[override][PREPROCESS].inputs)} tensors and "
                f"{len(FORMS[override][PREPROCESS].attrs)} attributes; FastDeploy's ops stay "
                "in place"))]
        candidates, said = (override,), f"{FORM_VARIABLE}={override}"
    elif detected is None:
        return [(logging.WARNING, (
            f"FastDeploy {version}'s {PREPROCESS} {what}; FastDeploy's ops stay in place (set "
            f"{FORM_VARIABLE} to choose a form)"))]
    else:
        candidates, said = detected, f"{chosen_mode} mode"
        if chosen_mode == "corrected":
            use = CORRECTED_OF.get
    deferred = Deferred(fd_ops, candidates, use)
    modules = replace_everywhere(deferred.replacements())
    ours = " or ".join(use(c) for c in candidates) + " ops"
    if len(candidates) > 1:
        ours += " (probed at the first mask call)"
    lines = [(logging.INFO, (
        f"{said}, FastDeploy {version}: our {ours} in place of its "
        f"{len(FORMS[candidates[0]][PREPROCESS].inputs)}-tensor ones, in {modules} "
        f"module{'s' if modules != 1 else ''}"))]
    if not override and chosen_mode == "corrected":
        lines += patches.install(candidates)
    return lines
