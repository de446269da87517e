"""C++ test harnesses over the Paddle-free headers, built with the CPU op's
own flags and the undefined-behaviour sanitizer."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from fastdeploy_mtp import _build


def compile_cpu_harness(source: str, out_dir) -> Path:
    """tests/<source> (a C++ harness over the Paddle-free headers) built with
    the CPU op's own flags and the undefined-behaviour sanitizer; its path."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.fail("no C++ compiler: the op library itself needs one to build")
    exe = Path(out_dir) / Path(source).stem
    flags = _build.compile_flags(cuda=False)["cxx"]
    subprocess.run([compiler, *flags, *_build.UNDEFINED_BEHAVIOUR_FLAGS,
                    str(Path(__file__).with_name(source)), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    return exe
