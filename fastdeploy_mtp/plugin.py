"""FastDeploy plugin: ``FD_PLUGINS=fastdeploy_mtp`` puts this package's
``draft_model_preprocess`` and ``update_attn_mask_offsets`` in place of
FastDeploy's, in the form FastDeploy's own op has.

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
  at 9018ccf74). Each worker is a process of its own, so each runs
  ``register`` once.

How FastDeploy exposes its ops: ``fastdeploy/model_executor/ops/gpu/__init__.py``
(line 22 at 9018ccf74, 47 at c29e86fc9) copies every member of its compiled
``fastdeploy_ops`` into the module (``fastdeploy/import_ops.py`` lines 24-48).
That holds, per op, the C++ extension's function (``custom_ops/gpu_ops/
cpp_extensions.cc`` lines 1620-1622 and 1682-1684 at 9018ccf74, no Python
parameter names) and Paddle's generated function of the registered op,
``static_op_<name>`` (``custom_ops/gpu_ops/helper.h`` lines 68-70 prefix the
name), whose parameters are the registered inputs then attributes.
``import_ops.py`` lines 66-113 then make ``<name>`` one function that calls the
C++ one in dynamic mode (a one-element list comes back as its element) and the
static one otherwise; it wraps the static one (``functools.wraps``), so
``inspect.signature`` reads the registered names through it.

How the proposer calls them (``fastdeploy/spec_decode/mtp.py``): it imports
both by name at import time (lines 55-68 at 9018ccf74, 57-70 at 7a6c28781,
37-50 at ba915e03e) and calls them positionally: ``draft_model_preprocess``
with 22 tensors and 4 attributes at 9018ccf74 (lines 757-784), 17 tensors and
2 at 7a6c28781 (lines 723-743), 20 tensors and 4 at ba915e03e (lines 685-710),
ignoring what it returns (the C++ function returns nothing); and
``attn_mask_offsets = update_attn_mask_offsets(...)`` with 10 tensors at
9018ccf74 (lines 871-883) and ba915e03e (lines 797-809), 8 at 7a6c28781
(lines 892-904), copying the result into a buffer with ``copy_`` (the last
line of each): one tensor, as the C++ function's one-element list is
unwrapped.

What ``register`` does: it reads FastDeploy's ``draft_model_preprocess``
parameter names (``inspect.signature``; else the C++ function's documented
parameters, else their number), looks them up in ``SIGNATURES`` (our forms'
registered inputs, ``fastdeploy_mtp.signature.FORMS``; FastDeploy's
``update_attn_mask_offsets`` must then be that form's too), loads that form
(``fastdeploy_mtp.forms.load``) and puts its ops in place of FastDeploy's, in
``fastdeploy.model_executor.ops.gpu`` (``<name>`` and ``static_op_<name>``)
and wherever else a module in ``sys.modules`` already holds one of FastDeploy's
op objects (the proposer imported before the plugins ran). ``FASTDEPLOY_MTP_FORM``
names the form instead. It logs one line on the ``fastdeploy_mtp`` logger: the
form and why, or why FastDeploy's ops stay; it never raises, and a second call
does nothing. On XPU FastDeploy's proposer takes its ops from
``fastdeploy.model_executor.ops.xpu`` (``mtp.py`` lines 39-53 at 9018ccf74),
which is left alone: our library is for the CPU and CUDA.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from .ops import FORM_VARIABLE
from .signature import FORMS

__all__ = ["register", "SIGNATURES", "choose", "LOGGER_NAME"]

LOGGER_NAME = "fastdeploy_mtp"
# FastDeploy's module of GPU ops, where its proposer imports them from.
FASTDEPLOY_OPS = "fastdeploy.model_executor.ops.gpu"
PREPROCESS = "draft_model_preprocess"
MASK = "update_attn_mask_offsets"
# The prefix of the name under which FastDeploy's ops module holds Paddle's
# generated function of a registered op (static graphs).
STATIC_PREFIX = "static_op_"

# The forms FastDeploy has shipped, which its signature may select: PR #5738
# as merged (9018ccf74 on develop, dcb0ccede on the release branch) and the
# shadow form. The rollback form is ours alone (FastDeploy never registered
# it) and the recompute form is commit 0956b09a's, on no FastDeploy branch: only
# FASTDEPLOY_MTP_FORM chooses them.
SHIPPED_FORMS = ("pr5738", "shadow")


def _signature_table() -> Dict[Tuple[str, ...], Tuple[str, ...]]:
    table: Dict[Tuple[str, ...], Tuple[str, ...]] = {}
    for form in SHIPPED_FORMS:
        names = FORMS[form][PREPROCESS].input_names
        table[names] = table.get(names, ()) + (form,)
    return table


# The one table: FastDeploy's draft_model_preprocess's registered inputs ->
# the forms that register the same inputs. More than one form under a key is
# told apart by choose().
SIGNATURES: Dict[Tuple[str, ...], Tuple[str, ...]] = _signature_table()

# Per form, a probe that runs FastDeploy's own draft_model_preprocess on a
# state crafted so that the forms sharing its inputs leave different results,
# and says whether it behaved as this form. No two forms share their inputs
# today, so none is needed yet.
PROBES: Dict[str, Callable[[Callable[..., Any]], bool]] = {}


def choose(candidates: Tuple[str, ...], fastdeploy_op: Callable[..., Any]) -> Optional[str]:
    """The form among `candidates` (forms whose registered inputs FastDeploy's
    op shares) that FastDeploy's op is, or None when they cannot be told
    apart: one candidate is that one; several are told apart by their PROBES,
    each run on FastDeploy's op, and exactly one must pass."""
    if len(candidates) == 1:
        return candidates[0]
    passed = [form for form in candidates if form in PROBES and PROBES[form](fastdeploy_op)]
    return passed[0] if len(passed) == 1 else None


_log = logging.getLogger(LOGGER_NAME)
_lock = threading.Lock()
_done = False


def register() -> None:
    """FastDeploy's entry point (``fastdeploy.model_register_plugins``): puts
    our ops in place of FastDeploy's once per process, logging one line.
    Never raises: any failure is that line, FastDeploy's ops left in place."""
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
    theirs = _op(fd_ops, PREPROCESS)
    if theirs is None:
        return logging.WARNING, (
            f"FastDeploy's {FASTDEPLOY_OPS} has no {PREPROCESS}; FastDeploy's ops stay in place")
    detected, what = _detect(fd_ops, theirs)
    if override:
        # Only a form FastDeploy's proposer can call: one of the signature
        # FastDeploy's op has (where several share it, the variable chooses).
        names, count = _preprocess_parameters(fd_ops, theirs)
        if (names is not None or count is not None) and \
                not _matches(override, PREPROCESS, names, count):
            return logging.WARNING, (
                f"{FORM_VARIABLE}={override} names a form FastDeploy's proposer cannot call: "
                f"FastDeploy's {PREPROCESS} {what}, not the {override} form's "
                f"{len(FORMS[override][PREPROCESS].inputs)} tensors and "
                f"{len(FORMS[override][PREPROCESS].attrs)} attributes; FastDeploy's ops stay "
                "in place")
        form, why = override, f"{FORM_VARIABLE}={override}; FastDeploy's {PREPROCESS} {what}"
    elif detected is None:
        return logging.WARNING, (
            f"FastDeploy's {PREPROCESS} {what}; FastDeploy's ops stay in place (set "
            f"{FORM_VARIABLE} to one of {', '.join(FORMS)} to choose a form)")
    else:
        form, why = detected, f"FastDeploy's {PREPROCESS} {what}"
    try:
        from . import forms

        library = forms.load(form).library
        ours = {PREPROCESS: library.draft_model_preprocess, MASK: library.update_attn_mask_offsets}
    except Exception as e:
        return logging.WARNING, (
            f"loading our {form} form failed ({type(e).__name__}: {_first_line(str(e))}); "
            "FastDeploy's ops stay in place")
    modules = _replace(_replacements(fd_ops, form, ours))
    return logging.INFO, (
        f"using our {form} form of {PREPROCESS} and {MASK} in place of FastDeploy's ({why}; "
        f"replaced in {modules} module{'s' if modules != 1 else ''})")


def _op(module, name: str) -> Optional[Callable[..., Any]]:
    """FastDeploy's op `name` in its ops module: the one its callers import,
    else its static-graph function."""
    for key in (name, STATIC_PREFIX + name):
        op = module.__dict__.get(key)
        if op is not None:
            return op
    return None


# --- Reading FastDeploy's signature -----------------------------------------

_PLACEHOLDER = re.compile(r"arg\d+")


def _parameters(op) -> Tuple[Optional[Tuple[str, ...]], Optional[int]]:
    """(parameter names, or None where they are not known; their number, or
    None). Paddle's generated function carries the registered names; the C++
    extension's function states its parameters only in its docstring's first
    line, ``name(arg0: type, ...) -> type``, where unnamed ones are argN."""
    try:
        sig = inspect.signature(op)
        if all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in sig.parameters.values()):
            return tuple(sig.parameters), len(sig.parameters)
    except (TypeError, ValueError):
        pass
    names = _documented_parameters(getattr(op, "__doc__", None) or "")
    if names is None:
        return None, None
    if all(_PLACEHOLDER.fullmatch(n) for n in names):
        return None, len(names)
    return names, len(names)


def _documented_parameters(doc: str) -> Optional[Tuple[str, ...]]:
    head = doc.strip().splitlines()[0] if doc.strip() else ""
    m = re.match(r"\s*[A-Za-z_]\w*\((.*)\)\s*(->.*)?$", head)
    if m is None:
        return None
    params, depth, piece = [], 0, ""
    for ch in m.group(1):
        if ch in "<[(":
            depth += 1
        elif ch in ">])":
            depth -= 1
        if ch == "," and depth == 0:
            params.append(piece)
            piece = ""
        else:
            piece += ch
    if piece.strip():
        params.append(piece)
    names = tuple(p.split(":")[0].split("=")[0].strip() for p in params)
    return names if all(n.isidentifier() for n in names) else None


def _matches(form: str, op: str, names, count) -> bool:
    """FastDeploy's `op` with these parameters (names, else their count) takes
    `form`'s tensors in its order and as many attributes."""
    sig = FORMS[form][op]
    if names is not None:
        return (names[:len(sig.inputs)] == sig.input_names
                and len(names) == len(sig.inputs) + len(sig.attrs))
    return count == len(sig.inputs) + len(sig.attrs)


def _preprocess_parameters(fd_ops, theirs):
    """FastDeploy's draft_model_preprocess's parameters: (names or None,
    count or None), from its function, else from its static-graph one."""
    names, count = _parameters(theirs)
    if names is None and count is None:
        static = fd_ops.__dict__.get(STATIC_PREFIX + PREPROCESS)
        if static is not None:
            names, count = _parameters(static)
    return names, count


def _detect(fd_ops, theirs) -> Tuple[Optional[str], str]:
    """(the form FastDeploy's ops are, or None; words on what was read)."""
    names, count = _preprocess_parameters(fd_ops, theirs)
    if names is None and count is None:
        return None, "states no parameters"
    # Its registered inputs are a key of SIGNATURES, then as many attributes
    # as the form has; without names, only the number of parameters can match.
    def attrs(form):
        return len(FORMS[form][PREPROCESS].attrs)

    if names is not None:
        candidates = tuple(f for key, forms in SIGNATURES.items() if names[:len(key)] == key
                           for f in forms if len(names) == len(key) + attrs(f))
        what = f"takes {len(names)} parameters ({', '.join(names)})"
    else:
        candidates = tuple(f for key, forms in SIGNATURES.items() for f in forms
                           if count == len(key) + attrs(f))
        what = f"takes {count} unnamed parameters"
    if not candidates:
        known = "; ".join(f"{f}: {len(FORMS[f][PREPROCESS].inputs)} tensors and "
                          f"{len(FORMS[f][PREPROCESS].attrs)} attributes" for f in SHIPPED_FORMS)
        return None, f"{what}, as none of our forms does ({known})"
    form = choose(candidates, theirs)
    if form is None:
        return None, f"{what}, as the forms {', '.join(candidates)} do, and no probe tells which"
    mask = _op(fd_ops, MASK)
    if mask is not None:
        mask_names, mask_count = _parameters(mask)
        if (mask_names is not None or mask_count is not None) and \
                not _matches(form, MASK, mask_names, mask_count):
            return None, (f"is the {form} form's but its {MASK} takes "
                          f"{mask_count} parameters ({', '.join(mask_names or ())}), "
                          f"not that form's {len(FORMS[form][MASK].inputs)} tensors")
    sig = FORMS[form][PREPROCESS]
    how = "registered inputs" if names is not None else "number of parameters"
    return form, (f"has the {form} form's {how}: {len(sig.inputs)} tensors, "
                  f"{len(sig.attrs)} attributes")


# --- Putting ours in place ---------------------------------------------------

def _as_fastdeploy_returns(raw: Callable[..., Any], form: str, keep_first: bool):
    """`raw` (our registered op, Paddle's generated function) returning what
    FastDeploy's op of the same name returns: in dynamic mode FastDeploy's
    calls its C++ function, whose result is nothing (draft_model_preprocess)
    or one tensor (update_attn_mask_offsets; its one-element list unwrapped);
    ours returns every output, so the first or none is kept. In a static graph
    both return the registered op's outputs, FastDeploy's first in its order."""
    import functools

    import paddle

    in_dynamic_mode = paddle.in_dynamic_mode

    @functools.wraps(raw)
    def op(*args, **kwargs):
        outs = raw(*args, **kwargs)
        if not in_dynamic_mode():
            return outs
        if not keep_first:
            return None
        return outs[0] if isinstance(outs, (list, tuple)) else outs

    op.fastdeploy_mtp_form = form
    try:  # as FastDeploy marks its own: already unified, not to be transformed again
        from paddle.jit.marker import unified

        op = unified(op)
    except Exception:
        pass
    return op


def _replacements(fd_ops, form: str,
                  ours: Dict[str, Callable[..., Any]]) -> Dict[int, Tuple[Any, Any]]:
    """{id(FastDeploy's op object): (that object, ours)} for each op object
    FastDeploy's ops module holds under ``<name>`` (the name its callers
    import: our op returning what FastDeploy's returns) or ``static_op_<name>``
    (Paddle's generated function: ours as registered)."""
    out: Dict[int, Tuple[Any, Any]] = {}
    for name, raw in ours.items():
        new = {name: _as_fastdeploy_returns(raw, form, keep_first=name == MASK),
               STATIC_PREFIX + name: raw}
        for key, op in new.items():
            old = fd_ops.__dict__.get(key)
            if old is not None and id(old) not in out:
                out[id(old)] = (old, op)
    return out


def _replace(mapping: Dict[int, Tuple[Any, Any]]) -> int:
    """Every module in sys.modules that holds one of FastDeploy's op objects
    (mapping's, by identity) gets ours under the same name; all or nothing.
    Returns the number of modules changed."""
    done: List[Tuple[Any, str, Any]] = []
    try:
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict):
                continue
            for name, value in list(namespace.items()):
                entry = mapping.get(id(value))
                if entry is not None and entry[0] is value:
                    setattr(module, name, entry[1])
                    done.append((module, name, value))
    except BaseException:
        for module, name, value in reversed(done):
            setattr(module, name, value)
        raise
    return len({id(m) for m, _, _ in done})


# --- The one line ------------------------------------------------------------

def _say(level: int, line: str) -> None:
    """Logs `line` on the fastdeploy_mtp logger. FastDeploy configures only
    its own ``fastdeploy`` logger; importing Paddle gives the root logger a
    stderr handler. Where no handler at all would take the line, one on
    stderr is added to ours, so that it is seen."""
    if not _log.hasHandlers():
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        _log.addHandler(handler)
        if _log.getEffectiveLevel() > logging.INFO:
            _log.setLevel(logging.INFO)
    _log.log(level, line)


def _first_line(text: str, limit: int = 300) -> str:
    lines = text.strip().splitlines()
    line = lines[0] if lines else "no message"
    return line if len(line) <= limit else line[:limit] + " ..."
