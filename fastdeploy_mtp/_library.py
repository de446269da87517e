"""The op library: finding, building and loading it, and calling its ops
after the checks only Python can make.

The library registers every form's ops (``fastdeploy_mtp.signature.FORMS``)
under names of their own, ``<op>_<form>`` (``signature.op_name``), so every
form is usable in one process, beside FastDeploy's own library. The typed
wrappers over them are ``fastdeploy_mtp.forms``'; ``fastdeploy_mtp.ops`` is
the public face (the process's form, and what callers catch).

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
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os

import numpy as np

from . import _build
from .signature import FORMS, op_name

# Raised, in one line, by whatever needs Paddle where none is installed.
PaddleMissingError = _build.PaddleMissingError


class BadInputError(ValueError):
    """An op refused its input; every tensor is as it was before the call."""


# Named where callers catch it: tracebacks and pickles show
# fastdeploy_mtp.ops.BadInputError, the name callers import and catch (ops
# re-exports this class, so unpickling finds it there). The cost:
# inspect.getsource(ops.BadInputError) looks in ops.py and fails.
BadInputError.__module__ = "fastdeploy_mtp.ops"


_say = _build.say


def _installed_is_current() -> bool:
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
            return _register_library(_build.MODULE_NAME, os.path.dirname(spec.origin))
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


def _build_from_source():
    """The library from the build cache, compiled there the first time."""
    with _quiet_paddle():
        cuda = _build.with_cuda()  # the first import of Paddle warns of ccache
    return cached_library(_build.source_hash(cuda), _build.MODULE_NAME,
                          f"the {'CPU and CUDA' if cuda else 'CPU'} op library",
                          _build.sources(cuda), _build.compile_flags(cuda),
                          _build.link_flags(cuda))


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


# The build's own process: it compiles with Paddle's builder and says how it
# ended on its stdout, one JSON line; the compiler's messages reach stderr.
_BUILD_CHILD = """
import json, os, sys, threading, time
spec = json.loads(sys.argv[1])
parent = os.getppid()

def orphaned():  # the process that asked for the build is gone: so is the build
    while os.getppid() == parent:
        time.sleep(0.5)
    os.killpg(0, 9)

threading.Thread(target=orphaned, daemon=True).start()
sys.path.insert(0, spec.pop("path"))
from fastdeploy_mtp import _library
print(json.dumps(_library._compile_here(**spec)), flush=True)
"""


def _compile(name: str, folder, sources, flags, ldflags, what: str):
    """Compiles `name` into `folder` in a process of its own, then loads it.

    The build runs in a session of its own: a terminal's Ctrl-C reaches this
    process alone, which stops the build's every process at once (the
    builder's Python, the compilers) with SIGKILL, so that none of them
    prints a word, and then raises KeyboardInterrupt as any Ctrl-C would."""
    import json
    import signal
    import subprocess
    import sys

    spec = dict(path=str(_build._PACKAGE_DIR.parent), name=name, folder=str(folder),
                sources=list(sources), flags=flags, ldflags=list(ldflags), what=what)
    child = subprocess.Popen([sys.executable, "-c", _BUILD_CHILD, json.dumps(spec)],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, _ = child.communicate()
    except BaseException:
        with contextlib.suppress(OSError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        raise
    lines = out.strip().splitlines()
    try:
        error = json.loads(lines[-1])["error"] if lines else None
    except (ValueError, KeyError, TypeError):
        error = None
    if child.returncode != 0 or error:
        raise _build.BuildError(error or f"building {what} failed: its process ended with "
                                          f"exit code {child.returncode} (its messages are above)")
    return _load_built(name, folder / name)


def _compile_here(name: str, folder: str, sources, flags, ldflags, what: str) -> dict:
    """The build's process: compiles `name` into `folder` with Paddle's
    builder; {"error": None}, or the one line that says why it failed."""
    from pathlib import Path

    folder = Path(folder)
    with _quiet_paddle():
        from paddle.utils.cpp_extension import load
    try:
        with _quiet_paddle():
            load(
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
        return {"error": f"building {what} failed: {cause}"}
    # The builder loaded the ops through a Python file it wrote beside the
    # library; every process that loads it writes its own elsewhere.
    for api in (folder / name).glob(f"{name}_*.py"):
        api.unlink()
    return {"error": None}


def _register_library(name: str, folder: str):
    """Registers the ops of `folder/<name>.so` with Paddle and returns the
    module of their Python functions. Paddle's loader writes that module's
    source beside the library it loads: here it loads the library through a
    link in a scratch folder, so that a folder it cannot write to (a
    read-only cache or install) still loads, and leaves the folder as it was."""
    import shutil
    import tempfile

    scratch = tempfile.mkdtemp(prefix="fastdeploy_mtp-load-")
    try:
        os.symlink(os.path.join(os.path.abspath(folder), name + ".so"),
                   os.path.join(scratch, name + ".so"))
        with _quiet_paddle():
            from paddle.utils.cpp_extension.extension_utils import _import_module_from_library

            return _import_module_from_library(name, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _load_built(name: str, folder):
    """Registers the ops of the finished build `folder/<name>.so`."""
    try:
        return _register_library(name, str(folder))
    except Exception as e:
        raise _build.BuildError(f"loading {folder / (name + '.so')} failed: {_first_line(str(e))}; "
                                f"remove {folder.parent} to build it afresh") from e


def _first_line(text: str, limit: int = 300) -> str:
    lines = text.strip().splitlines()
    line = lines[0] if lines else "no message"
    return line if len(line) <= limit else line[:limit] + " ..."


def check_form(form: str) -> None:
    """Raises ValueError, one line, unless `form` is one of the table's."""
    if form not in FORMS:
        raise ValueError(f"unknown form {form!r}: the forms here are " + ", ".join(FORMS))


@functools.lru_cache(maxsize=None)
def load_library():
    """The module whose functions are every form's registered ops
    (``signature.op_name``), built the first time if need be."""
    if not _build.force_build() and _installed_is_current():
        return _import_installed()
    if not _build.sources_available():
        raise _build.BuildError(
            f"{_build.MODULE_NAME} is not installed and its sources are not in "
            f"{_build.SOURCE_DIR} to build it: reinstall fastdeploy_mtp (pip install .) or "
            "run `python setup_ops.py install` in a fastdeploy_mtp checkout"
        )
    return _build_from_source()


def raw_op(form: str, name: str):
    """`form`'s registered op `name` (FastDeploy's op name), as Paddle made
    it: positional, FastDeploy's arguments in its order."""
    return getattr(load_library(), op_name(form, FORMS[form][name]))


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
    needs no Paddle; without one, _build.PaddleMissingError, one line."""
    paddle = _build.import_paddle()

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


def _call(registered: str, sig, tensors, attrs=()):
    """The op registered as `registered` (table `sig`) on `tensors` and `attrs`."""
    op = getattr(load_library(), registered)
    try:
        return op(*tensors, *attrs)
    except Exception as e:  # Paddle re-raises the op's C++ exception (OSError in 3.3)
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else ""
        if first_line.startswith(sig.name + ":"):
            raise BadInputError(first_line) from e
        _refuse_tensors(sig, tensors)  # Paddle refused a non-tensor: say which, in our words
        raise
