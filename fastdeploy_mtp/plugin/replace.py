"""Putting our ops in place of FastDeploy's, and choosing at the first call.

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
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..signature import FORMS, preprocess_form
from .detect import MASK, PREPROCESS, PROBES, STATIC_PREFIX, choose
from .log import first_line as _first_line, say as _say

def as_fastdeploy_returns(raw: Callable[..., Any], form: str, keep_first: bool):
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


class Deferred:
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
                        ops[key] = as_fastdeploy_returns(raw, form, keep_first=name == MASK)
                    else:
                        ops[key] = raw
                self.chosen.update(ops)
                replace_everywhere({id(self.stand_ins[key]): (self.stand_ins[key], op)
                          for key, op in ops.items()})
            return self.chosen

    def _library(self, form: str, name: str):
        """`form`'s registered ops (``forms.load(form).library``), or None
        where our library cannot be loaded; the first failure is one line,
        and none is tried again."""
        if self.library_failed:
            return None
        try:
            from .. import forms

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
            place = call_place(args, kwargs)
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


def call_place(args, kwargs):
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


def replace_everywhere(mapping: Dict[int, Tuple[Any, Any]]) -> int:
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

