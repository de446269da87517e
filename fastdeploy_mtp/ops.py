"""Typed Python wrappers of the custom ops.

Each wrapper takes the op's inputs in the registered (FastDeploy) positional
order, then its attributes, and is equally callable with keywords. Parameter
names come from ``fastdeploy_mtp.signature`` and a test keeps them equal.

The op library is the installed ``fastdeploy_mtp_ops`` module
(``python setup_ops.py install``); without one (or, in a source checkout,
without an up-to-date one), it is compiled once on first use, from the
checkout's ``custom_ops/`` or the copy an installed package carries, into
``~/.cache/fastdeploy_mtp`` (set ``FASTDEPLOY_MTP_CACHE`` to move it).
Processes that start together (tensor-parallel ranks, test workers) build it
once: one compiles, the others wait for it (``_build.cached_build``). Every
failure to find, build or load it raises :class:`_build.BuildError`, one line.

Bad input raises :class:`BadInputError` (a ``ValueError``) whose message names
the request, the field and the values; no tensor has changed when it does.

A process uses one of FastDeploy's forms of ``draft_model_preprocess``
(``fastdeploy_mtp.signature.FORMS``): ``FASTDEPLOY_MTP_FORM`` names it, else
the first ``load_library(form)``, else the default (``rollback``). The typed
``draft_model_preprocess`` below is the default form's;
``fastdeploy_mtp.forms.load(form)`` gives any form's wrappers.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
from typing import Any

import numpy as np

from . import _build
from .signature import (DEFAULT_FORM, DRAFT_MODEL_PREPROCESS, FORMS, RAISE_PENDING_ERRORS,
                        UPDATE_ATTN_MASK_OFFSETS, argument_help)

Tensor = Any  # paddle.Tensor; kept loose so importing this module needs no Paddle

__all__ = [
    "BadInputError",
    "draft_model_preprocess",
    "update_attn_mask_offsets",
    "raise_pending_errors",
    "load_library",
]


class BadInputError(ValueError):
    """An op refused its input; every tensor is as it was before the call."""


_say = _build.say


def _installed_is_current(form: str = DEFAULT_FORM) -> bool:
    if form != DEFAULT_FORM:
        return False  # `setup_ops.py install` installs the default form; others build
    spec = importlib.util.find_spec(_build.MODULE_NAME)
    if spec is None:
        return False
    if not _build.in_source_checkout() or spec.origin is None:
        return True
    # In a checkout, use the install only if this checkout's `setup_ops.py
    # install` built it from these very sources, flags and Paddle (the stamp is
    # the same hash that names the build cache); anything else may be stale.
    if _build.read_install_stamp() == _build.source_hash(_build.with_cuda()):
        return True
    _say(f"the installed {_build.MODULE_NAME} was not built from this checkout's current "
         "sources and flags; using a fresh build")
    return False


def _import_installed():
    spec = importlib.util.find_spec(_build.MODULE_NAME)
    try:
        if spec.origin and spec.origin.endswith(".so"):
            # Paddle 2.6 with current setuptools installs the bare library, which
            # is no Python module: register its ops the way cpp_extension.load does.
            with _quiet_paddle():
                from paddle.utils.cpp_extension.extension_utils import _import_module_from_library

                return _import_module_from_library(_build.MODULE_NAME,
                                                   os.path.dirname(spec.origin))
        return importlib.import_module(_build.MODULE_NAME)
    except Exception as e:
        raise _build.BuildError(
            f"loading the installed {_build.MODULE_NAME} ({spec.origin}) failed: "
            f"{_first_line(str(e))}; reinstall it (python setup_ops.py install) or set "
            "FASTDEPLOY_MTP_BUILD=1 to build one from source") from e


@contextlib.contextmanager
def _quiet_paddle():
    """Paddle's build chatter (a ccache warning in this process and in the
    build's own, "Compiling user custom op", "using custom operator only")
    says nothing to our users: keep it off the terminal. Compiler errors still
    reach it (the compiler writes to the file descriptors, not to sys.stdout),
    and a failed build still raises."""
    import logging
    import warnings

    saved_env = os.environ.get("PYTHONWARNINGS")
    os.environ["PYTHONWARNINGS"] = "ignore:No ccache found"
    loggers = [lg for lg in map(logging.getLogger, list(logging.root.manager.loggerDict))
               if "paddle" in lg.name.lower() or "extension" in lg.name.lower()]
    levels = [lg.level for lg in loggers]
    try:
        with warnings.catch_warnings(), open(os.devnull, "w") as null, \
                contextlib.redirect_stdout(null):
            warnings.filterwarnings("ignore", message="No ccache found")
            for lg in loggers:
                lg.setLevel(logging.WARNING)
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
        if saved_env is None:
            os.environ.pop("PYTHONWARNINGS", None)
        else:
            os.environ["PYTHONWARNINGS"] = saved_env


def _build_from_source(form: str = DEFAULT_FORM):
    """`form`'s library from the build cache, compiled there the first time."""
    with _quiet_paddle():
        cuda = _build.with_cuda()  # the first import of Paddle warns of ccache
    flags = _build.compile_flags(cuda)
    flags["cxx"] = flags["cxx"] + _build.form_flags(form)
    if "nvcc" in flags:  # the kernels are compiled for the form too (mtp_bookkeeping.h)
        flags["nvcc"] = flags["nvcc"] + _build.form_flags(form)
    return cached_library(_build.source_hash(cuda, form=form), _build.module_name(form),
                          f"the {'CPU and CUDA' if cuda else 'CPU'} op library of the {form} form",
                          _build.sources(cuda), flags, _build.link_flags(cuda))


def cached_library(key: str, name: str, what: str, sources, flags, ldflags):
    """The library `name` compiled from `sources` with `flags` ({"cxx": [...],
    "nvcc": [...]}) and `ldflags` into the build cache under `key`, once
    however many processes ask at once (_build.cached_build), and loaded.
    The op library and the benchmark's reference library are both built so."""
    def build(folder):
        problem = _build.missing_compiler()
        if problem:
            raise _build.BuildError(problem)
        return _compile(name, folder, sources, flags, ldflags, what)

    return _build.cached_build(key, name, what, build, lambda folder: _load_built(name, folder))


def _compile(name: str, folder, sources, flags, ldflags, what: str):
    """Compiles `name` into `folder` with Paddle's builder and loads it."""
    with _quiet_paddle():
        from paddle.utils.cpp_extension import load
    try:
        with _quiet_paddle():
            module = load(
                name=name,
                sources=list(sources),
                extra_cxx_cflags=flags["cxx"],
                extra_cuda_cflags=flags.get("nvcc", []),
                extra_ldflags=ldflags,
                build_directory=str(folder),
                verbose=False,
            )
    except Exception as e:
        text = str(e)
        # The builder runs the compiler in a process of its own, whose
        # messages reach the terminal; its exception only repeats the command.
        cause = ("the compiler or linker failed (its messages are above)"
                 if "non-zero exit status" in text else _first_line(text))
        raise _build.BuildError(f"building {what} failed: {cause}") from e
    # The builder loaded the ops through a Python file it wrote beside the
    # library; the module is made, and every later process writes its own.
    for api in (folder / name).glob(f"{name}_*.py"):
        api.unlink()
    return module


def _load_built(name: str, folder):
    """Registers the ops of the finished build `folder/<name>.so`."""
    try:
        with _quiet_paddle():
            from paddle.utils.cpp_extension.extension_utils import _import_module_from_library

            return _import_module_from_library(name, str(folder))
    except Exception as e:
        raise _build.BuildError(f"loading {folder / (name + '.so')} failed: {_first_line(str(e))}; "
                                f"remove {folder.parent} to build it afresh") from e


def _first_line(text: str, limit: int = 300) -> str:
    lines = text.strip().splitlines()
    line = lines[0] if lines else "no message"
    return line if len(line) <= limit else line[:limit] + " ..."


FORM_VARIABLE = "FASTDEPLOY_MTP_FORM"
_loaded_form = None  # the form this process registered, once it has
_loaded_module = None  # and its library


def process_form() -> str:
    """The form this process uses: the one loaded, else FASTDEPLOY_MTP_FORM's,
    else the default."""
    if _loaded_form is not None:
        return _loaded_form
    return _build.setting(FORM_VARIABLE, _build.FORM_NAMES,
                          "FastDeploy's forms here are " + ", ".join(_build.FORM_NAMES)
                          + f" (empty or unset: {DEFAULT_FORM})") or DEFAULT_FORM


def load_library(form: "str | None" = None):
    """The module whose functions are the registered ops of `form` (default:
    the process's form, ``process_form()``), built if need be. Paddle
    registers an op name once per process, so a process loads one form;
    asking for another then raises."""
    current = process_form()
    form = current if form is None else form
    _build.check_form(form)
    if _loaded_form is not None and form != _loaded_form:
        raise RuntimeError(
            f"this process registered the {_loaded_form} form's ops; Paddle registers an op "
            f"name once per process, so the {form} form needs a process of its own "
            f"(set {FORM_VARIABLE}={form} before it starts)")
    return _load_form(form)


@functools.lru_cache(maxsize=None)
def _load_form(form: str):
    global _loaded_form, _loaded_module
    if not _build.force_build() and _installed_is_current(form):
        module = _import_installed()
    elif not _build.sources_available():
        raise _build.BuildError(
            f"{_build.module_name(form)} is not installed and its sources are not in "
            f"{_build.SOURCE_DIR} to build it: reinstall fastdeploy_mtp (pip install .) or "
            "run `python setup_ops.py install` in a fastdeploy_mtp checkout"
        )
    else:
        module = _build_from_source(form)
    _loaded_form, _loaded_module = form, module
    return module


INT32_MAX = 2**31 - 1


def _refuse_tensor(sig, arg, t) -> None:
    if not isinstance(t, _paddle_facts()[0]):
        raise BadInputError(f"{sig.name}: {arg.name} must be a paddle.Tensor, got "
                            f"{type(t).__name__}")
    if not arg.written:
        return
    if hasattr(t, "is_contiguous") and not t.is_contiguous():
        raise BadInputError(f"{sig.name}: {arg.name} is written in place but is a "
                            "non-contiguous view: Paddle would hand the op a copy and the "
                            "writes would be lost; pass a contiguous tensor")
    if not t.stop_gradient:
        raise BadInputError(f"{sig.name}: {arg.name} is written in place but requires "
                            "grad (stop_gradient=False); the op is not differentiable")


def _refuse_tensors(sig, tensors) -> None:
    for arg, t in zip(sig.inputs, tensors):
        _refuse_tensor(sig, arg, t)


def _refuse_attr(sig, arg, value) -> None:
    if arg.type is bool:
        if not isinstance(value, (bool, np.bool_)):
            raise BadInputError(f"{sig.name}: {arg.name} must be a bool, got {value!r}")
    elif isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise BadInputError(f"{sig.name}: {arg.name} must be an int, got {value!r}")
    elif not 1 <= int(value) <= INT32_MAX:
        raise BadInputError(f"{sig.name}: {arg.name} must be in [1, {INT32_MAX}], got "
                            f"{int(value)}")


@functools.lru_cache(maxsize=None)
def _paddle_facts() -> tuple:
    """(paddle.Tensor, whether this Paddle has strided views that can be
    non-contiguous: Paddle 2.6 has none). Asked once; importing this module
    needs no Paddle."""
    import paddle

    return paddle.Tensor, hasattr(paddle.Tensor, "is_contiguous")


# Positions of each table's written inputs (an OpSignature hashes slowly:
# look up by identity).
_WRITTEN_POSITIONS = {}


def _written_positions(sig) -> tuple:
    try:
        return _WRITTEN_POSITIONS[id(sig)]
    except KeyError:
        return _WRITTEN_POSITIONS.setdefault(
            id(sig), tuple(k for k, arg in enumerate(sig.inputs) if arg.written))


def _check_boundary(sig, tensors, attrs=()) -> None:
    """What the C++ side cannot see, checked before the op runs.

    Paddle hands a custom op a contiguous copy of a non-contiguous view (so an
    in-place write to it would be lost) and refuses an in-place write to a
    tensor that requires grad only after the kernel ran; None and attributes
    of the wrong type must not reach the library either. Everything else
    (dtypes, shapes, devices, overlap, values) is checked in C++, and Paddle
    itself refuses a non-tensor before the op runs (``_call`` words that).
    The common case is one pass over the written tensors; the slow path only
    words the error.
    """
    _, strided = _paddle_facts()
    ok = True
    try:
        if strided:
            for k in _written_positions(sig):
                t = tensors[k]
                if not t.stop_gradient or not t.is_contiguous():
                    ok = False
                    break
        else:  # Paddle 2.6 has no strided views
            for k in _written_positions(sig):
                if not tensors[k].stop_gradient:
                    ok = False
                    break
    except AttributeError:  # not a tensor where one is written
        ok = False
    if not ok:
        _refuse_tensors(sig, tensors)
    for arg, value in zip(sig.attrs, attrs):
        # The common case by type alone (a bool is not an int here); anything
        # else, numpy scalars included, is looked at closely.
        kind = type(value)
        if kind is bool if arg.type is bool else (kind is int and 1 <= value <= INT32_MAX):
            continue
        _refuse_attr(sig, arg, value)


def _call(sig, tensors, attrs=()):
    op = getattr(_loaded_module or load_library(), sig.name)
    try:
        return op(*tensors, *attrs)
    except Exception as e:  # Paddle re-raises the op's C++ exception (OSError in 3.3)
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else ""
        if first_line.startswith(sig.name + ":"):
            raise BadInputError(first_line) from e
        _refuse_tensors(sig, tensors)  # Paddle refused a non-tensor: say which, in our words
        raise


def draft_model_preprocess(
    draft_tokens: Tensor,
    input_ids: Tensor,
    stop_flags: Tensor,
    seq_lens_this_time: Tensor,
    seq_lens_encoder: Tensor,
    seq_lens_decoder: Tensor,
    step_idx: Tensor,
    not_need_stop: Tensor,
    is_block_step: Tensor,
    batch_drop: Tensor,
    pre_ids: Tensor,
    mask_rollback: Tensor,
    accept_tokens: Tensor,
    accept_num: Tensor,
    base_model_seq_lens_this_time: Tensor,
    base_model_seq_lens_encoder: Tensor,
    base_model_seq_lens_decoder: Tensor,
    base_model_step_idx: Tensor,
    base_model_stop_flags: Tensor,
    base_model_is_block_step: Tensor,
    base_model_draft_tokens: Tensor,
    num_model_step: int,
    truncate_first_token: bool,
    splitwise_prefill: bool,
    kvcache_scheduler_v1: bool,
) -> None:
    """Prepare the draft model's state at the start of an engine step, in place.

    For each request ``i < bsz`` (``bsz = seq_lens_this_time.shape[0]``): place
    the first token of a prefill, or roll the draft back by
    ``num_model_step - 1`` positions and re-feed the accepted tokens, recover a
    stopped draft from the base model, park or drop it on a block step, and add
    the change of ``seq_lens_decoder`` to ``mask_rollback`` so
    :func:`update_attn_mask_offsets` rolls the mask cursor back by as much (a
    prefill sets it to 0: a new request's mask starts afresh).
    ``not_need_stop[0]`` becomes whether any request runs. With
    ``not_need_stop`` on the CPU the call returns once the flag is there.

    Writes the 13 tensors marked written in ``signature.DRAFT_MODEL_PREPROCESS``;
    reads the rest. Raises :class:`BadInputError`, changing nothing, on bad input.
    """
    tensors = (
        draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder,
        seq_lens_decoder, step_idx, not_need_stop, is_block_step, batch_drop, pre_ids,
        mask_rollback, accept_tokens, accept_num, base_model_seq_lens_this_time,
        base_model_seq_lens_encoder, base_model_seq_lens_decoder, base_model_step_idx,
        base_model_stop_flags, base_model_is_block_step, base_model_draft_tokens,
    )
    attrs = (num_model_step, truncate_first_token, splitwise_prefill, kvcache_scheduler_v1)
    _check_boundary(DRAFT_MODEL_PREPROCESS, tensors, attrs)
    if _loaded_form != DEFAULT_FORM and process_form() != DEFAULT_FORM:
        raise RuntimeError(
            f"this process uses the {process_form()} form of draft_model_preprocess: call "
            f"fastdeploy_mtp.forms.load({process_form()!r}).draft_model_preprocess")
    _call(DRAFT_MODEL_PREPROCESS, tensors, (int(num_model_step), bool(truncate_first_token),
                                            bool(splitwise_prefill), bool(kvcache_scheduler_v1)))


def update_attn_mask_offsets(
    ids_remove_padding: Tensor,
    seq_lens_this_time: Tensor,
    seq_lens_encoder: Tensor,
    seq_lens_decoder: Tensor,
    cu_seqlens_q: Tensor,
    attn_mask_offsets_full: Tensor,
    attn_mask_offsets_decoder: Tensor,
    is_block_step: Tensor,
    decode_states: Tensor,
    mask_rollback: Tensor,
) -> Tensor:
    """Write the attention-mask offsets of this substep's tokens.

    Returns ``attn_mask_offsets``, int32 ``[2 * T]`` (``T`` = length of
    ``ids_remove_padding``): the odd entry of each token of a prompt request is
    ``attn_mask_offsets_full[i, j] + 1`` (``seq_lens_decoder + n`` in vision
    generation); a decode request first consumes ``mask_rollback`` from its
    cursor ``attn_mask_offsets_decoder``, then numbers its tokens from it; a
    decode of more than one token rewrites its row of ``decode_states`` (0 for
    each of its tokens' columns, -1 after them). All other entries are 0. Updates
    ``attn_mask_offsets_decoder``, ``decode_states`` and ``mask_rollback`` in
    place. ``cu_seqlens_q`` may hold ``bsz + 1`` prefix sums or ``bsz`` (the
    last request then ends at ``T``).

    The raw op returns ``[attn_mask_offsets, decode_states, mask_rollback,
    attn_mask_offsets_decoder]``, FastDeploy's three first in its order.
    Raises :class:`BadInputError`, changing nothing, on bad input.
    """
    tensors = (
        ids_remove_padding, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder,
        cu_seqlens_q, attn_mask_offsets_full, attn_mask_offsets_decoder, is_block_step,
        decode_states, mask_rollback,
    )
    _check_boundary(UPDATE_ATTN_MASK_OFFSETS, tensors)
    if _loaded_form != DEFAULT_FORM and FORMS[process_form()][
            UPDATE_ATTN_MASK_OFFSETS.name] is not UPDATE_ATTN_MASK_OFFSETS:
        raise RuntimeError(
            f"this process uses the {process_form()} form of update_attn_mask_offsets: call "
            f"fastdeploy_mtp.forms.load({process_form()!r}).update_attn_mask_offsets")
    outs = _call(UPDATE_ATTN_MASK_OFFSETS, tensors)
    return outs[0] if isinstance(outs, (list, tuple)) else outs


def raise_pending_errors(x: Tensor) -> None:
    """Raise the error an asynchronous call left on ``x``'s GPU, if any.

    ``draft_model_preprocess`` with ``not_need_stop`` on the GPU, and
    ``update_attn_mask_offsets`` while a CUDA graph is captured or with
    ``FASTDEPLOY_MTP_ASYNC_MASK=1``, neither copy to the host nor synchronise:
    a refused batch is left unchanged and its error waits on the device, for
    any thread (the next synchronous call there raises it too). Waits for
    ``x``'s stream. Does nothing for a CPU tensor. Raises
    :class:`BadInputError`.
    """
    _check_boundary(RAISE_PENDING_ERRORS, (x,))
    _call(RAISE_PENDING_ERRORS, (x,))


# The table's words on each argument close each wrapper's help.
for _fn, _sig in ((draft_model_preprocess, DRAFT_MODEL_PREPROCESS),
                  (update_attn_mask_offsets, UPDATE_ATTN_MASK_OFFSETS),
                  (raise_pending_errors, RAISE_PENDING_ERRORS)):
    _fn.__doc__ = (_fn.__doc__ or "") + argument_help(_sig)
