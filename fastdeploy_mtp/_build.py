"""Where the op library's sources are and how they are compiled.

Shared by ``setup_ops.py`` (install) and ``fastdeploy_mtp.ops`` (build on first
use), so both compile the same files with the same flags.

The sources are ``custom_ops/`` of a source checkout (an editable install), or
the copy a wheel or a plain ``pip install .`` carries as
``fastdeploy_mtp/custom_ops/`` (``pyproject.toml`` maps one onto the other).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Dict, List, Optional

MODULE_NAME = "fastdeploy_mtp_ops"
# FastDeploy's forms of draft_model_preprocess (fastdeploy_mtp/signature.py);
# one library each, since Paddle registers an op name once per process.
FORM_NAMES = ("rollback", "recompute", "shadow")
DEFAULT_FORM = FORM_NAMES[0]
_PACKAGE_DIR = Path(__file__).resolve().parent
# The Paddle bindings; they include the Paddle-free headers.
BINDING_SOURCES = (
    "draft_model_preprocess_op.cc",
    "update_attn_mask_offsets_op.cc",
    "pending_errors_op.cc",
)
# CUDA kernels without Paddle headers (CI compiles these with plain nvcc).
CUDA_SOURCES = ("mtp_kernels.cu",)
# Code for the H200 (sm_90) plus PTX so newer chips can JIT it.
CUDA_ARCH_FLAGS = ("-gencode", "arch=compute_90,code=sm_90", "-gencode", "arch=compute_90,code=compute_90")


class BuildError(RuntimeError):
    """The op library could not be found, built or loaded. Its message is one
    line that says why and what to do; the command line prints it alone."""




def _has_sources(folder: Path) -> bool:
    return all((folder / s).is_file() for s in BINDING_SOURCES)


# A checkout is recognised by its setup_ops.py beside the package; anything
# else (site-packages) uses the sources the install carried.
CHECKOUT_SOURCE_DIR = _PACKAGE_DIR.parent / "custom_ops"
IN_CHECKOUT = ((_PACKAGE_DIR.parent / "setup_ops.py").is_file()
               and _has_sources(CHECKOUT_SOURCE_DIR))
SOURCE_DIR = CHECKOUT_SOURCE_DIR if IN_CHECKOUT else _PACKAGE_DIR / "custom_ops"


def in_source_checkout() -> bool:
    """This package runs from a source checkout (editable install)."""
    return IN_CHECKOUT


def sources_available() -> bool:
    """The op sources are here to build from (a checkout, or an installed copy)."""
    return _has_sources(SOURCE_DIR)


def with_cuda() -> bool:
    """Build the CUDA path only with a CUDA Paddle (paddlepaddle-gpu)."""
    import paddle

    return bool(paddle.is_compiled_with_cuda())


def sources(cuda: bool) -> List[str]:
    names = BINDING_SOURCES + (CUDA_SOURCES if cuda else ())
    return [str(SOURCE_DIR / n) for n in names]


def module_name(form: str = DEFAULT_FORM) -> str:
    """The op library of `form`: fastdeploy_mtp_ops for the default form,
    fastdeploy_mtp_ops_<form> for another."""
    check_form(form)
    return MODULE_NAME if form == DEFAULT_FORM else f"{MODULE_NAME}_{form}"


def check_form(form: str) -> None:
    if form not in FORM_NAMES:
        raise ValueError(f"unknown form {form!r}: FastDeploy's forms here are "
                         + ", ".join(FORM_NAMES))


def form_flags(form: str = DEFAULT_FORM) -> List[str]:
    """The host compiler's flags that pick `form`'s binding (none: the default)."""
    check_form(form)
    return [] if form == DEFAULT_FORM else [f"-DMTP_FORM_{form.upper()}"]


def paddle_major() -> int:
    """The installed Paddle's major version (the bindings differ for 2 and 3)."""
    import paddle

    major = int(paddle.__version__.split(".")[0])
    return major if major > 0 else 3  # a develop build says 0.0.0


def compile_flags(cuda: bool) -> Dict[str, List[str]]:
    # Paddle 2.6 passes -std=c++14 by default; nvcc 13 and our headers need 17.
    # -fno-tree-loop-distribute-patterns: g++ otherwise turns the per-request
    # row loops (a few int64 each) into memset/memcpy calls, whose call cost
    # outweighs rows that short. -fvect-cost-model=cheap: -O2's default model
    # vectorises no loop of runtime length, such as the check of a prompt's
    # mask offsets (docs/performance.md).
    flags = {"cxx": ["-O2", "-fvect-cost-model=cheap", "-fno-tree-loop-distribute-patterns",
                     "-std=c++17", f"-I{SOURCE_DIR}",
                     f"-DFASTDEPLOY_MTP_PADDLE_MAJOR={paddle_major()}"]}
    flags["cxx"] += sanitizer_flags()
    if cuda:
        # The bindings include Paddle's CUDA headers, which include Thrust; the
        # host compiler needs CUDA's include folders (CUDA 13 keeps Thrust in cccl/).
        flags["cxx"] += [f"-I{d}" for d in cuda_include_dirs()]
        flags["nvcc"] = ["-O3", "-std=c++17", f"-I{SOURCE_DIR}", *CUDA_ARCH_FLAGS]
    return flags


# The undefined-behaviour sanitizer, stopping at its first report. The vptr
# check is left out: it reads Paddle's type information across libraries.
UNDEFINED_BEHAVIOUR_FLAGS = ("-fsanitize=undefined", "-fno-sanitize=vptr",
                             "-fno-sanitize-recover=all")


def sanitizer_flags() -> List[str]:
    """FASTDEPLOY_MTP_SANITIZE=undefined builds the host code with
    UNDEFINED_BEHAVIOUR_FLAGS (a signed overflow, a shift or an index out of
    range stops it): CI runs the CPU tests once on such a build. Off otherwise."""
    setting = os.environ.get("FASTDEPLOY_MTP_SANITIZE", "")
    if setting in ("", "0"):
        return []
    if setting != "undefined":
        raise ValueError(f"FASTDEPLOY_MTP_SANITIZE={setting!r}: only 'undefined' is supported")
    return list(UNDEFINED_BEHAVIOUR_FLAGS)


def link_flags(cuda: bool) -> List[str]:
    """CUDA builds carry a private libstdc++ (FASTDEPLOY_MTP_STATIC_LIBSTDCXX=0 opts out).

    With paddlepaddle-gpu 2.6.2 on an H200 machine, formatting a number
    in the library's inline code (Paddle's own PD_THROW does) crashed: its
    libstdc++ references bound partly to the process's libstdc++ and partly to
    copies other libraries export. Linking libstdc++ in with its symbols hidden
    binds every reference inside the library.
    """
    setting = os.environ.get("FASTDEPLOY_MTP_STATIC_LIBSTDCXX")
    flags = sanitizer_flags()
    if setting == "1" or (cuda and setting != "0"):
        flags += ["-static-libstdc++", "-Wl,--exclude-libs,ALL"]
    return flags


def cuda_include_dirs() -> List[str]:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    return [str(d) for d in (Path(home) / "include", Path(home) / "include" / "cccl") if d.is_dir()]


# What the build compiles or includes: C++ and CUDA sources and headers (.cuh:
# device code, included by mtp_kernels.cu only).
SOURCE_SUFFIXES = (".h", ".cuh", ".cc", ".cu")


def hashed_sources(*also: Path) -> List[Path]:
    """The files source_hash reads: those of custom_ops/ and of the folders `also`."""
    return sorted(f for d in (SOURCE_DIR, *also) for f in d.glob("*")
                  if f.suffix in SOURCE_SUFFIXES)


def source_hash(cuda: bool, *also: Path, form: str = DEFAULT_FORM) -> str:
    """Changes whenever a source, a header, the flags, the form or the Paddle
    version does (the sources of custom_ops/, and of the folders `also` names)."""
    import paddle

    h = hashlib.sha256()
    for p in hashed_sources(*also):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    h.update(repr((compile_flags(cuda), link_flags(cuda))).encode())
    h.update(repr(form_flags(form)).encode())
    h.update(paddle.__version__.encode())
    h.update(sys.version.encode())
    return h.hexdigest()[:16]


def cache_root() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fastdeploy_mtp"
    return Path(os.environ.get("FASTDEPLOY_MTP_CACHE", default))


def install_stamp_path() -> Path:
    """Where ``setup_ops.py install`` records what it built (ignored by git)."""
    return SOURCE_DIR / "build" / "installed-source-hash"


def write_install_stamp(cuda: bool) -> None:
    path = install_stamp_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source_hash(cuda) + "\n")


def read_install_stamp() -> Optional[str]:
    try:
        return install_stamp_path().read_text().strip()
    except OSError:
        return None
