"""FastDeploy plugin: ``FD_PLUGINS=fastdeploy_mtp`` puts this package's
``draft_model_preprocess`` and ``update_attn_mask_offsets`` in place of
FastDeploy's, in the form FastDeploy's own ops are.

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
both by name at import time (lines 55-68 at 9018ccf74, 57-72 at 2178f2829,
57-70 at 7a6c28781, 37-50 at ba915e03e) and calls them positionally, in
dynamic mode: ``draft_model_preprocess`` with 22 tensors and 4 attributes at
9018ccf74 (lines 757-784) and 2178f2829 (lines 698-725), 17 tensors and 2 at
7a6c28781 (lines 723-743), 20 tensors and 4 at ba915e03e (lines 685-710),
ignoring what it returns (the C++ function returns nothing); and
``attn_mask_offsets = update_attn_mask_offsets(...)`` with 10 tensors at
9018ccf74 (lines 871-883), 2178f2829 (lines 828-842) and ba915e03e (lines
797-809), 8 at 7a6c28781 (lines 892-904), copying the result into a buffer
with ``copy_`` (the last line of each): one tensor, as the C++ function's
one-element list is unwrapped. The mask op runs before the draft model's
forward (``self.model(...)``, 2178f2829 line 888), outside its CUDA graph.

Which form each FastDeploy version gets (``SHIPPED_FORMS``; ``SIGNATURES``
groups them by the registered inputs of their ``draft_model_preprocess``):

- 20 tensors: ``pr5245``. FastDeploy's kernel of that op is the same from
  88d44a2c9 (#3695) to ba915e03e (#5245) (``draft_model_preprocess.cu`` has
  no change between them). The ten-tensor mask op is ba915e03e's (and
  9018ccf74's: ``update_attn_mask_offsets.cu`` has no change between them);
  from 11398790d (#4641) to ba915e03e it did not reset ``mask_rollback``,
  but the proposer of those commits never writes its ``mask_rollback``
  (``mtp.py`` line 452 at ba915e03e^ fills it with 0; line 801 only passes
  it), so ours computes what FastDeploy's did there too.
- 22 tensors: ``pr5738`` (9018ccf74, dcb0ccede) or ``pr6403`` (2178f2829 on).
  Both register the same inputs for both ops, and the same preprocess kernel
  (``draft_model_preprocess.cu`` is unchanged from 9018ccf74 to 2178f2829);
  only the mask op's ``decode_states`` rule differs
  (``update_attn_mask_offsets.cu`` lines 68-77 at 9018ccf74: a decode of more
  than one token rewrites its row; lines 68-75 at 2178f2829: every decode
  does, a 1 among its tokens' columns becoming -1). A probe tells them apart
  (below).
- 17 tensors: ``shadow`` (e87ce4b8c, 7a6c28781).

The rollback form is ours alone (FastDeploy never registered it) and the
recompute form is commit 0956b09a's, on no FastDeploy branch: only
``FASTDEPLOY_MTP_FORM`` chooses them. ``FASTDEPLOY_MTP_FORM`` names the form
instead of the detection, among the forms whose ``draft_model_preprocess``
FastDeploy's proposer can call (for a 22-tensor op: pr5738, pr6403 or
recompute); no probe runs then.

What ``register`` does: it reads FastDeploy's ``draft_model_preprocess``
parameter names (``inspect.signature``; else the C++ function's documented
parameters, else their number) and finds the forms that register them
(``SIGNATURES``; FastDeploy's ``update_attn_mask_offsets`` must then take
those forms' tensors too). It puts a stand-in of ours in place of each of
FastDeploy's op objects, in ``fastdeploy.model_executor.ops.gpu``
(``<name>`` and ``static_op_<name>``) and wherever else a module in
``sys.modules`` already holds one (the proposer imported before the plugins
ran), and logs one line on the ``fastdeploy_mtp`` logger: the form and why,
or why FastDeploy's ops stay. It never raises, and a second call does
nothing. It neither loads our library nor touches a device: FastDeploy's
engine runs it too and never calls the ops, and creating a CUDA context
there, or on a device a worker does not own, would cost memory on it.

What the first call of each op does (once per op and process, under one
lock; its stand-ins then give way, in every module, to the op chosen):

- The first of them loads our library (``fastdeploy_mtp.forms.load``; built
  the first time if no build is installed or cached). Where that fails, one
  WARNING line says why and FastDeploy's two ops stay in use, for that call
  and every later one in the process: the call goes to FastDeploy's op, and
  no later call tries again (a failed build fails again, and each try would
  cost a build's time in the serving loop). Nothing is raised for it:
  FastDeploy's own ops are a working fallback, which a crash of the worker is
  not. Anything else that fails while an op is chosen is one WARNING line
  too, and FastDeploy's op of that name stays in use.
- ``draft_model_preprocess`` is the op of the form whose kernel it runs
  (``signature.preprocess_form``): for a 22-tensor op, pr5738's, whichever
  of pr5738 and pr6403 the mask op turns out to be.
- Where several forms remain (a 22-tensor op), ``update_attn_mask_offsets``
  first runs FastDeploy's own mask op once on a state of its own (``PROBES``:
  one decode request feeding one token, ``decode_states`` ``[[1, 7]]``), on
  the place of the call's ``ids_remove_padding`` (where FastDeploy's kernel
  puts its output and runs: ``update_attn_mask_offsets.cu`` lines 100 and 108
  at 2178f2829, 102 and 110 at 9018ccf74), and reads what it left:
  ``decode_states`` ``[[1, 7]]`` at 9018ccf74, ``[[-1, -1]]`` from 2178f2829
  on. One INFO line says what it found. A probe that cannot run (an
  exception, or a first call in a static graph, where nothing runs eagerly)
  or leaves what neither form leaves is one WARNING line, and FastDeploy's
  mask op stays in use for the process; our ``draft_model_preprocess`` stays,
  since it is the same kernel for both forms.
- Errors of the chosen op itself (a refused input) are raised to the caller,
  as FastDeploy's op raises its own.

On XPU FastDeploy's proposer takes its ops from
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
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from .ops import FORM_VARIABLE
from .signature import FORMS, preprocess_form

__all__ = ["register", "SIGNATURES", "SHIPPED_FORMS", "PROBES", "Probe", "choose", "LOGGER_NAME"]

LOGGER_NAME = "fastdeploy_mtp"
# FastDeploy's module of GPU ops, where its proposer imports them from.
FASTDEPLOY_OPS = "fastdeploy.model_executor.ops.gpu"
PREPROCESS = "draft_model_preprocess"
MASK = "update_attn_mask_offsets"
# The prefix of the name under which FastDeploy's ops module holds Paddle's
# generated function of a registered op (static graphs).
STATIC_PREFIX = "static_op_"

# The forms FastDeploy has shipped, which its signature may select: PR #5245's
# 20-tensor op (ba915e03e), PR #5738 as merged (9018ccf74 on develop, dcb0ccede
# on the release branch), PR #6403's mask rule (2178f2829) and the shadow form.
SHIPPED_FORMS = ("pr5245", "pr5738", "pr6403", "shadow")


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


@dataclass(frozen=True)
class Probe:
    """FastDeploy's op `op`, run once on a state crafted so that the forms it
    tells apart leave different results. `run(fastdeploy_op, place)` builds
    the state on `place`, calls the op positionally as FastDeploy's proposer
    does and returns what it left; `expect` is what each form's op leaves;
    `state` says in words what the state is."""
    op: str
    state: str
    run: Callable[[Callable[..., Any], Any], Tuple[Tuple[int, ...], ...]]
    expect: Dict[str, Tuple[Tuple[int, ...], ...]]
    fields: Tuple[str, ...]

    def words(self, seen) -> str:
        return ", ".join(f"{f} {list(v)}" for f, v in zip(self.fields, seen))


def _ints(tensor) -> Tuple[int, ...]:
    import numpy as np

    return tuple(int(v) for v in np.asarray(tensor.numpy()).reshape(-1))


def _run_mask_probe(fastdeploy_op: Callable[..., Any], place) -> Tuple[Tuple[int, ...], ...]:
    """One decode request feeding one token (seq_lens_decoder 5, the mask
    cursor at 3, nothing to roll back), its decode_states row [1, 7]: the
    decode branch of every version writes the offset 3 + 1 and moves the
    cursor to 4; 9018ccf74's rewrites decode_states only for more than one
    token, 2178f2829's for every decode (1 -> -1, past the token -> -1)."""
    import numpy as np
    import paddle

    def tensor(values, dtype):
        return paddle.to_tensor(np.asarray(values, dtype), place=place)

    i32 = np.int32
    cursor, decode_states, rollback = tensor([3], i32), tensor([[1, 7]], i32), tensor([0], i32)
    out = fastdeploy_op(
        tensor([0], np.int64),           # ids_remove_padding: one token
        tensor([1], i32),                # seq_lens_this_time
        tensor([0], i32),                # seq_lens_encoder
        tensor([5], i32),                # seq_lens_decoder
        tensor([0, 1], i32),             # cu_seqlens_q
        tensor(np.zeros((1, 4)), i32),   # attn_mask_offsets_full
        cursor,                          # attn_mask_offsets_decoder
        tensor([False], np.bool_),       # is_block_step
        decode_states,
        rollback)                        # mask_rollback
    if isinstance(out, (list, tuple)):  # Paddle's generated function: every output
        out = out[0]
    return _ints(decode_states), _ints(out), _ints(cursor), _ints(rollback)


_MASK_PROBE = Probe(
    op=MASK,
    state="one decode of one token, decode_states [1, 7]",
    run=_run_mask_probe,
    expect={"pr5738": ((1, 7), (0, 4), (4,), (0,)),
            "pr6403": ((-1, -1), (0, 4), (4,), (0,))},
    fields=("decode_states", "attn_mask_offsets", "attn_mask_offsets_decoder", "mask_rollback"),
)

# The forms that share a key of SIGNATURES -> the probe that tells them apart.
PROBES: Dict[Tuple[str, ...], Probe] = {("pr5738", "pr6403"): _MASK_PROBE}


def choose(candidates: Tuple[str, ...], fastdeploy_op: Optional[Callable[..., Any]] = None,
           place: Any = None) -> Tuple[Optional[str], str]:
    """(The form among `candidates` (forms whose registered inputs
    FastDeploy's op shares) that FastDeploy's op is, or None where it cannot
    be told; what told it, in words.) One candidate is that one; several are
    told apart by their probe (PROBES), run once on `fastdeploy_op` (the
    FastDeploy op the probe names) on `place`: exactly one form must leave
    what it saw. An exception of the probe is raised."""
    if len(candidates) == 1:
        return candidates[0], f"the one form of FastDeploy's {PREPROCESS}'s signature"
    probe = PROBES.get(tuple(candidates))
    if probe is None:
        return None, f"no probe tells the forms {', '.join(candidates)} apart"
    seen = probe.run(fastdeploy_op, place)
    matching = [form for form in candidates if probe.expect.get(form) == seen]
    what = f"a probe of FastDeploy's {probe.op} ({probe.state}) left {probe.words(seen)}"
    if len(matching) == 1:
        return matching[0], f"{what}, as our {matching[0]} form's does"
    return None, f"{what}, as {'none' if not matching else 'more than one'} of our forms " \
                 f"{', '.join(candidates)} does"


_log = logging.getLogger(LOGGER_NAME)
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
        candidates = (override,)
        why = f"{FORM_VARIABLE}={override}; FastDeploy's {PREPROCESS} {what}"
    elif detected is None:
        return logging.WARNING, (
            f"FastDeploy's {PREPROCESS} {what}; FastDeploy's ops stay in place (set "
            f"{FORM_VARIABLE} to one of {', '.join(FORMS)} to choose a form)")
    else:
        candidates, why = detected, f"FastDeploy's {PREPROCESS} {what}"
    deferred = _Deferred(fd_ops, candidates)
    modules = _replace(deferred.replacements())
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


def _detect(fd_ops, theirs) -> Tuple[Optional[Tuple[str, ...]], str]:
    """(the forms FastDeploy's ops may be, each of the signature they have, or
    None where none is or a probe could not tell them apart; words on what
    was read)."""
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
        known = "; ".join(f"{' and '.join(fs)}: {len(FORMS[fs[0]][PREPROCESS].inputs)} tensors "
                          f"and {len(FORMS[fs[0]][PREPROCESS].attrs)} attributes"
                          for fs in SIGNATURES.values())
        return None, f"{what}, as none of our forms does ({known})"
    forms_words = (f"the {candidates[0]} form's" if len(candidates) == 1 else
                   f"the {' and '.join(candidates)} forms'")
    if len(candidates) > 1 and (tuple(candidates) not in PROBES
                                or len({preprocess_form(f) for f in candidates}) != 1):
        return None, f"{what}, as the forms {', '.join(candidates)} do, and no probe tells which"
    mask = _op(fd_ops, MASK)
    if mask is not None:
        mask_names, mask_count = _parameters(mask)
        if (mask_names is not None or mask_count is not None) and \
                not all(_matches(form, MASK, mask_names, mask_count) for form in candidates):
            return None, (f"is {forms_words} but its {MASK} takes "
                          f"{mask_count} parameters ({', '.join(mask_names or ())}), "
                          f"not {forms_words} {len(FORMS[candidates[0]][MASK].inputs)} tensors")
    sig = FORMS[candidates[0]][PREPROCESS]
    how = "registered inputs" if names is not None else "number of parameters"
    return candidates, (f"has {forms_words} {how}: {len(sig.inputs)} tensors, "
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
    return _unified(op)


def _unified(op):
    """As FastDeploy marks its own ``<name>`` functions: already unified, not
    to be transformed again by Paddle's dynamic-to-static."""
    try:
        from paddle.jit.marker import unified

        return unified(op)
    except Exception:
        return op


def _signature(form: str, name: str) -> inspect.Signature:
    """`form`'s op `name` as Paddle's generated function states it: the
    registered inputs, then the attributes."""
    sig = FORMS[form][name]
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature([inspect.Parameter(n, kind)
                              for n in sig.input_names + sig.attr_names])


class _Deferred:
    """What register() put in place of FastDeploy's op objects: a stand-in
    per object, which at the first call of its op (either name) chooses the
    op to run, ours or FastDeploy's, for the rest of the process, puts it in
    place of the stand-ins in every module, and calls it. `candidates`: the
    forms FastDeploy's ops may be; several are told apart by their probe of
    FastDeploy's mask op."""

    def __init__(self, fd_ops, candidates: Tuple[str, ...]):
        self.candidates = candidates
        self.preprocess = preprocess_form(candidates[0])  # the one kernel of the candidates
        # FastDeploy's op objects by their key in its ops module (<name>, static_op_<name>).
        self.fastdeploy = {key: fd_ops.__dict__[key] for name in (PREPROCESS, MASK)
                           for key in (name, STATIC_PREFIX + name)
                           if fd_ops.__dict__.get(key) is not None}
        self.stand_ins = {key: self._stand_in(key) for key in self.fastdeploy}
        self.chosen: Dict[str, Callable[..., Any]] = {}  # key -> the op its stand-in calls
        self.library_failed = False
        self.lock = threading.Lock()

    def replacements(self) -> Dict[int, Tuple[Any, Any]]:
        """{id(FastDeploy's op object): (that object, its stand-in)}."""
        return {id(self.fastdeploy[key]): (self.fastdeploy[key], self.stand_ins[key])
                for key in self.fastdeploy}

    def _stand_in(self, key: str) -> Callable[..., Any]:
        name = key[len(STATIC_PREFIX):] if key.startswith(STATIC_PREFIX) else key
        chosen = None

        def op(*args, **kwargs):
            nonlocal chosen
            if chosen is None:
                chosen = self.choose(name, args, kwargs)[key]
            return chosen(*args, **kwargs)

        op.__name__ = op.__qualname__ = key
        op.__signature__ = _signature(self.candidates[0], name)
        op.__doc__ = (f"FastDeploy's {key}, replaced by fastdeploy_mtp: its first call loads "
                      f"our library and chooses our {' or '.join(self.candidates)} form's op "
                      "(FastDeploy's where ours cannot run) for the process.")
        op.fastdeploy_mtp_deferred = True
        return op if key.startswith(STATIC_PREFIX) else _unified(op)

    def choose(self, name: str, args, kwargs) -> Dict[str, Callable[..., Any]]:
        """The ops op `name`'s stand-ins call, by key; chosen at the first
        call of either of their keys, from that call's arguments."""
        with self.lock:
            if not any(key in self.chosen for key in (name, STATIC_PREFIX + name)):
                try:
                    form = self._form(name, args, kwargs)
                    library = None if form is None else self._library(form, name)
                    raw = None if library is None else getattr(library, name)
                except Exception as e:  # never a crash at a call FastDeploy's op can serve
                    _say(logging.WARNING, (
                        f"choosing our {name} failed ({type(e).__name__}: "
                        f"{_first_line(str(e))}); FastDeploy's stays in use in this process"))
                    form = raw = None
                ops = {}
                for key in (name, STATIC_PREFIX + name):
                    if key not in self.fastdeploy:
                        continue
                    if raw is None:
                        ops[key] = self.fastdeploy[key]
                    elif key == name:
                        ops[key] = _as_fastdeploy_returns(raw, form, keep_first=name == MASK)
                    else:
                        ops[key] = raw
                self.chosen.update(ops)
                _replace({id(self.stand_ins[key]): (self.stand_ins[key], op)
                          for key, op in ops.items()})
            return self.chosen

    def _library(self, form: str, name: str):
        """`form`'s registered ops (``forms.load(form).library``), or None
        where our library cannot be loaded; the first failure is one line,
        and none is tried again."""
        if self.library_failed:
            return None
        try:
            from . import forms

            return forms.load(form).library
        except Exception as e:  # a build problem is FastDeploy's ops for the process, not a crash
            self.library_failed = True
            _say(logging.WARNING, (
                f"loading our op library at the first call of {name} failed "
                f"({type(e).__name__}: {_first_line(str(e))}); FastDeploy's {PREPROCESS} and "
                f"{MASK} stay in use in this process"))
            return None

    def _form(self, name: str, args, kwargs) -> Optional[str]:
        """The form whose op `name` is ours, or None for FastDeploy's."""
        if name == PREPROCESS:
            return self.preprocess
        if len(self.candidates) == 1:
            return self.candidates[0]
        # The probe matters only where ours can run: load first.
        if self._library(self.candidates[0], name) is None:
            return None
        try:
            place = _call_place(args, kwargs)
            form, what = choose(self.candidates, self.fastdeploy.get(MASK)
                                or self.fastdeploy[STATIC_PREFIX + MASK], place)
        except Exception as e:
            _say(logging.WARNING, (
                f"a probe of FastDeploy's {MASK} ({PROBES[self.candidates].state}) could not "
                f"run ({type(e).__name__}: {_first_line(str(e))}); FastDeploy's {MASK} stays in "
                f"use in this process, beside our {self.preprocess} form's {PREPROCESS}"))
            return None
        if form is None:
            _say(logging.WARNING, (
                f"{what}; FastDeploy's {MASK} stays in use in this process, beside our "
                f"{self.preprocess} form's {PREPROCESS}"))
            return None
        _say(logging.INFO, f"{what}: using our {form} form's {MASK}")
        return form


def _call_place(args, kwargs):
    """The place of a mask-op call's ids_remove_padding (its first input),
    where FastDeploy's kernel puts its output and runs. Raises where the call
    is not an eager one on tensors (a static graph runs nothing at the call)."""
    import paddle

    if not paddle.in_dynamic_mode():
        raise RuntimeError("the first call is in a static graph, where nothing runs eagerly")
    first = args[0] if args else kwargs.get("ids_remove_padding")
    if not isinstance(first, paddle.Tensor):
        raise TypeError(f"ids_remove_padding is {type(first).__name__}, not a paddle.Tensor")
    return first.place


def _replace(mapping: Dict[int, Tuple[Any, Any]]) -> int:
    """Every module in sys.modules that holds one of the objects of mapping
    (by identity) gets its replacement under the same name; all or nothing.
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
