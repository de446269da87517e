"""The "guarded" device of the tests: the CPU driver (custom_ops/mtp_cpu.h, the
code the CPU op runs) with every tensor between two inaccessible pages
(tests/guarded_cpu.cc), built with the op's flags and the
undefined-behaviour sanitizer.

In a Paddle tensor, a read or write a little past the end lands in the
allocator's memory and no test sees it (the mask op's output, which the op
allocates, most of all). Here it faults, as does any signed overflow, and
the call raises GuardedFault naming the state. Each call runs twice, the
tensors against the page after them and against the page before them, and
must leave the same bytes both times.

A state's arrays are the "tensors" of this device (``helpers.to_tensors``):
``call`` changes them in place as the op changes its tensors, returns
attn_mask_offsets as a numpy array, and raises BadInputError naming the
request and field on a refusal, as the op does.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import signal
import struct
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from fastdeploy_mtp import _build, ops
from fastdeploy_mtp.signature import DRAFT_MODEL_PREPROCESS, FORMS, OpSignature

SOURCE = Path(__file__).with_name("guarded_cpu.cc")
OP_IDS = {"draft_model_preprocess": 1, "update_attn_mask_offsets": 2}  # mtp::OpId


class GuardedFault(AssertionError):
    """The guarded driver died: a read or write outside a tensor, undefined
    behaviour, or two runs that differ."""


@functools.lru_cache(maxsize=None)
def executable() -> Path:
    """The driver, compiled once a test session (a few seconds)."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        raise RuntimeError("no C++ compiler: the op library itself needs one to build")
    out = Path(tempfile.mkdtemp(prefix="fastdeploy_mtp_guarded_")) / "guarded_cpu"
    atexit.register(shutil.rmtree, out.parent, True)
    subprocess.run([compiler, *_build.compile_flags(cuda=False)["cxx"],
                    *_build.UNDEFINED_BEHAVIOUR_FLAGS, str(SOURCE), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    return out


class _Server:
    """One driver process, answering calls over its pipes; started again
    after a fault."""

    def __init__(self):
        self.proc = None

    def _started(self):
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([str(executable())], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return self.proc

    def ask(self, request: bytes, names, context: str):
        proc = self._started()
        try:
            proc.stdin.write(request)
            proc.stdin.flush()
            return _Answer(proc.stdout, names)
        except (BrokenPipeError, EOFError):
            code = proc.wait()
            why = (f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}")
            err = proc.stderr.read().decode(errors="replace")[-3000:]
            self.proc = None
            raise GuardedFault(f"the guarded CPU driver died ({why}) on {context}\n{err}")


class _Answer:
    def __init__(self, stream, names):
        def i64():
            b = stream.read(8)
            if len(b) != 8:
                raise EOFError
            return struct.unpack("<q", b)[0]

        def blob():
            n = i64()
            b = stream.read(n)
            if len(b) != n:
                raise EOFError
            return b

        self.code, self.request = i64(), i64()
        self.values = [i64() for _ in range(4)]
        self.field = blob().decode()
        self.after = {name: blob() for name in names}
        self.out = blob()


_SERVER = _Server()


def _request(sig: OpSignature, arrays: dict, attrs: dict, form: str) -> bytes:
    # The op and its form as mtp::op_of puts them: the form's place in forms.h above two bits.
    word = OP_IDS[sig.name] | list(FORMS).index(form) << 2
    parts = [struct.pack("<q", word), struct.pack("<q", len(sig.attrs))]
    parts += [struct.pack("<q", int(attrs[a.name])) for a in sig.attrs]
    parts.append(struct.pack("<q", len(sig.inputs)))
    for arg in sig.inputs:
        a = np.ascontiguousarray(arrays[arg.name])
        name = arg.name.encode()
        rows = a.shape[0] if a.ndim else 1
        cols = a.size // rows if rows else (a.shape[1] if a.ndim == 2 else 1)
        data = a.tobytes()
        parts.append(struct.pack("<q", len(name)) + name +
                     struct.pack("<qqqq", a.itemsize, rows, cols, len(data)) + data)
    return b"".join(parts)


def call(sig: OpSignature, arrays: dict, attrs: dict | None = None, form: str | None = None):
    """Runs op `sig` on the numpy `arrays` (by input name; changed in place
    as the op changes its tensors) with `attrs`, through the guarded CPU
    driver, with the rules of `form` (default: the first form whose table
    `sig` is). Returns attn_mask_offsets (update_attn_mask_offsets) or None."""
    attrs = attrs or {}
    form = form or next(f for f, ops in FORMS.items() if ops[sig.name] is sig)
    names = sig.input_names
    context = f"{sig.name} with bsz {arrays['seq_lens_this_time'].shape[0]}, attrs {attrs}"
    answer = _SERVER.ask(_request(sig, arrays, attrs, form), names, context)
    if answer.code != 0:
        changed = [n for n in names if answer.after[n] != arrays[n].tobytes()]
        if changed:  # a refusal changes nothing: the driver's own promise
            raise GuardedFault(f"{context}: refused (request {answer.request}) but changed "
                               f"{changed}")
        raise ops.BadInputError(f"{sig.name}: request {answer.request}: {answer.field}: "
                                f"check {answer.code}, values {answer.values} "
                                "(the guarded CPU driver)")
    for n in names:
        a = arrays[n]
        a.reshape(-1)[...] = np.frombuffer(answer.after[n], a.dtype).reshape(-1)
    if sig.name == DRAFT_MODEL_PREPROCESS.name:  # any form's
        return None
    return np.frombuffer(answer.out, np.int32).copy()
