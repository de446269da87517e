"""Where the op library's sources are and how they are compiled.

Shared by ``setup_ops.py`` (install) and ``fastdeploy_mtp._library`` (build on first
use), so both compile the same files with the same flags.

The sources are ``custom_ops/`` of a source checkout (an editable install), or
the copy a wheel or a plain ``pip install .`` carries as
``fastdeploy_mtp/custom_ops/`` (``pyproject.toml`` maps one onto the other).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Container, Dict, Iterator, List, Optional, Tuple, TypeVar

# One library holds every form's ops, each under its own name
# (signature.op_name).
MODULE_NAME = "fastdeploy_mtp_ops"
_PACKAGE_DIR = Path(__file__).resolve().parent
# The Paddle bindings; they include the Paddle-free headers.
BINDING_SOURCES = (
    "op_registrations.cc",
    "pending_errors_op.cc",
)
# CUDA kernels without Paddle headers (CI compiles these with plain nvcc).
CUDA_SOURCES = ("mtp_kernels.cu",)


class BuildError(RuntimeError):
    """The op library could not be found, built or loaded. Its message is one
    line that says why and what to do; the command line prints it alone."""


class SettingError(BuildError, ValueError):
    """One of our environment variables holds a value it does not take. A
    ValueError as well, as a bad argument's would be."""


class PaddleMissingError(ModuleNotFoundError):
    """PaddlePaddle is not installed: the op library can be neither built nor
    loaded. One line that says what to install; a ModuleNotFoundError (for
    the module ``paddle``) as Python's own would be."""


PADDLE_MISSING = ("fastdeploy_mtp needs PaddlePaddle, which is not installed: pip install "
                  "paddlepaddle (paddlepaddle-gpu for a GPU)")


def import_paddle():
    """The paddle module, or PaddleMissingError in one line where there is none."""
    try:
        import paddle
    except ModuleNotFoundError as e:
        if e.name != "paddle":
            raise
        raise PaddleMissingError(PADDLE_MISSING, name="paddle") from None
    return paddle


def say(msg: str) -> None:
    print(f"fastdeploy_mtp: {msg}", file=sys.stderr, flush=True)


def setting(name: str, allowed: Container[str], meaning: str) -> str:
    """The environment variable `name`: "" when unset or empty (both mean
    "not set"), else one of `allowed`; any other value is refused with
    `meaning`, which says what the values do."""
    value = os.environ.get(name, "")
    if value and value not in allowed:
        raise SettingError(f"{name}={value!r}: {meaning}")
    return value


class Accepted:
    """The values `test` accepts, for setting()'s `allowed` where they are
    too many to list."""

    def __init__(self, test: Callable[[str], bool]):
        self.test = test

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and self.test(value)


def force_build() -> bool:
    """FASTDEPLOY_MTP_BUILD=1: build from source even where a current library is installed."""
    return setting("FASTDEPLOY_MTP_BUILD", ("0", "1"),
                   "1 builds the op library from source even where one is installed; 0, "
                   "empty or unset uses an installed one that is current") == "1"


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
    paddle = import_paddle()

    return bool(paddle.is_compiled_with_cuda())


def sources(cuda: bool) -> List[str]:
    names = BINDING_SOURCES + (CUDA_SOURCES if cuda else ())
    return [str(SOURCE_DIR / n) for n in names]


def paddle_major() -> int:
    """The installed Paddle's major version (the bindings differ for 2 and 3)."""
    paddle = import_paddle()

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
        flags["nvcc"] = ["-O3", "-std=c++17", f"-I{SOURCE_DIR}", *cuda_arch_flags()]
    return flags


# --- The GPU archs the kernels are compiled for ---------------------------------

ARCH_VARIABLE = "FASTDEPLOY_MTP_CUDA_ARCH"
# The kernels' warp reductions (__reduce_min_sync) need sm_80.
LEAST_ARCH = 80
# Where no GPU is visible and no list is given: the GPUs FastDeploy serves
# (A100/A800, A10, L20/L40, H20/H800/H200, B200), those the nvcc knows.
SERVED_ARCHS = (80, 86, 89, 90, 100)
_ARCH = re.compile(r"(?:(\d+)\.(\d)|(\d\d\d?))(\+PTX)?")


def parse_archs(value: str) -> Optional[Tuple[List[int], List[int]]]:
    """`value` as FASTDEPLOY_MTP_CUDA_ARCH takes it: archs such as "8.0 8.6
    9.0", "80;90" or "8.0,9.0+PTX" (spaces, ';' or ','), each of sm_80 or
    later, "+PTX" adding that arch's PTX. The archs and those with PTX, both
    sorted, or None when `value` is not such a list."""
    archs, ptx = set(), set()
    tokens = [t for t in re.split(r"[\s;,]+", value) if t]
    if not tokens:
        return None
    for token in tokens:
        m = _ARCH.fullmatch(token)
        if m is None:
            return None
        arch = int(m[1]) * 10 + int(m[2]) if m[1] is not None else int(m[3])
        if arch < LEAST_ARCH:
            return None
        archs.add(arch)
        if m[4]:
            ptx.add(arch)
    return sorted(archs), sorted(ptx)


def _nvcc() -> Optional[str]:
    """The nvcc that Paddle's builder runs: $CUDA_HOME/bin/nvcc (or
    $CUDA_PATH's), else the one on PATH, else /usr/local/cuda's."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    for candidate in ([str(Path(home) / "bin" / "nvcc")] if home else []) + [
            shutil.which("nvcc") or "", "/usr/local/cuda/bin/nvcc"]:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def nvcc_archs() -> Optional[Tuple[int, ...]]:
    """The archs the nvcc compiles for (nvcc --list-gpu-arch), asked once per
    process; None when there is no nvcc or it does not say."""
    return _listed_archs(_nvcc())


@functools.lru_cache(maxsize=None)
def _listed_archs(nvcc: Optional[str]) -> Optional[Tuple[int, ...]]:
    if nvcc is None:
        return None
    try:
        out = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return tuple(sorted({int(a) for a in re.findall(r"compute_(\d+)\b", out)})) or None


@functools.lru_cache(maxsize=1)
def visible_gpu_archs() -> Tuple[int, ...]:
    """The archs of the GPUs this machine has, sorted: as Paddle sees them
    (a CUDA Paddle), else as nvidia-smi lists them; none when neither can
    tell. Asked once per process."""
    return tuple(_ask_gpu_archs())


def _ask_gpu_archs() -> List[int]:
    archs = set()
    try:
        import paddle

        if paddle.is_compiled_with_cuda():
            for i in range(paddle.device.cuda.device_count()):
                major, minor = paddle.device.cuda.get_device_capability(i)
                archs.add(int(major) * 10 + int(minor))
    except Exception:  # a Paddle without these calls, or a driver that fails: ask nvidia-smi
        archs = set()
    if not archs:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=60)
            if out.returncode == 0:
                for line in out.stdout.split():
                    m = re.fullmatch(r"(\d+)\.(\d)", line.strip())
                    if m:
                        archs.add(int(m[1]) * 10 + int(m[2]))
        except (OSError, subprocess.SubprocessError):
            pass
    return sorted(archs)


# `fastdeploy-mtp build` writes the arch list it built for into the cache
# root, so that a process started later without FASTDEPLOY_MTP_CUDA_ARCH
# compiles with the same flags, finds the same build and loads it.
ARCH_RECORD = "cuda-archs"


def recorded_archs() -> Optional[str]:
    """The arch list `build` recorded in the cache root, where it holds every
    visible GPU's arch (of sm_80 or later); else None."""
    try:
        value = (cache_root() / ARCH_RECORD).read_text().strip()
    except OSError:
        return None
    parsed = parse_archs(value)
    if parsed is None:
        return None
    if any(a not in parsed[0] for a in visible_gpu_archs() if a >= LEAST_ARCH):
        return None
    return value


def record_archs(value: str) -> None:
    """Records `value` (an arch list parse_archs takes) in the cache root."""
    (writable_cache_root() / ARCH_RECORD).write_text(value + "\n")


def cuda_archs() -> Tuple[List[int], List[int]]:
    """The archs the kernels are compiled for (SASS), and those whose PTX the
    build also carries: FASTDEPLOY_MTP_CUDA_ARCH's list, else the list
    `fastdeploy-mtp build` recorded in the cache (where it covers the visible
    GPUs), else the visible GPUs' archs, else SERVED_ARCHS (those the nvcc
    knows). The highest arch's
    PTX is always there, so that a newer GPU JIT-compiles it. A given arch
    the nvcc does not know is refused; a visible GPU's is left out, the
    highest known below it taking its place as PTX, which that GPU
    JIT-compiles."""
    meaning = ("a list of CUDA archs of 8.0 or later, such as '8.0 8.6 9.0' or '80;90' "
               "('+PTX' after one adds its PTX; the highest always has it); empty or unset: "
               "the visible GPUs' archs")
    value = (setting(ARCH_VARIABLE, Accepted(lambda v: parse_archs(v) is not None), meaning)
             or recorded_archs())
    known = nvcc_archs()
    if value:
        archs, ptx = parse_archs(value)
        unknown = [a for a in archs if known is not None and a not in known]
        if unknown:
            raise SettingError(
                f"{ARCH_VARIABLE}={value!r}: {_nvcc()} does not compile for "
                + ", ".join(f"sm_{a}" for a in unknown) + " (it does for "
                + ", ".join(f"sm_{a}" for a in known if a >= LEAST_ARCH) + ")")
    else:
        # A GPU older than sm_80 cannot run the kernels: it adds nothing.
        wanted = [a for a in visible_gpu_archs() if a >= LEAST_ARCH] or list(SERVED_ARCHS)
        archs = [a for a in wanted if known is None or a in known]
        ptx = []
        if len(archs) < len(wanted) and known is not None:
            below = [a for a in known if LEAST_ARCH <= a <= max(wanted)]
            if below:
                ptx = [below[-1]]
        if not archs and not ptx:
            raise BuildError(f"{_nvcc()} compiles for no GPU arch of sm_{LEAST_ARCH} or later: "
                             f"install CUDA 11.8 or later, or set {ARCH_VARIABLE}")
    top = max(archs + ptx)
    return archs, sorted(set(ptx) | {top})


def cuda_arch_flags() -> List[str]:
    """nvcc's -gencode flags for cuda_archs(): SASS for each arch, then PTX."""
    archs, ptx = cuda_archs()
    flags: List[str] = []
    for a in archs:
        flags += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    for a in ptx:
        flags += ["-gencode", f"arch=compute_{a},code=compute_{a}"]
    return flags


# The undefined-behaviour sanitizer, stopping at its first report. The vptr
# check is left out: it reads Paddle's type information across libraries.
UNDEFINED_BEHAVIOUR_FLAGS = ("-fsanitize=undefined", "-fno-sanitize=vptr",
                             "-fno-sanitize-recover=all")


def sanitizer_flags() -> List[str]:
    """FASTDEPLOY_MTP_SANITIZE=undefined builds the host code with
    UNDEFINED_BEHAVIOUR_FLAGS (a signed overflow, a shift or an index out of
    range stops it): CI runs the CPU tests once on such a build. Off otherwise."""
    value = setting("FASTDEPLOY_MTP_SANITIZE", ("0", "undefined"),
                    "only 'undefined' is supported (0, empty or unset: no sanitizer)")
    return list(UNDEFINED_BEHAVIOUR_FLAGS) if value == "undefined" else []


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


def source_hash(cuda: bool, *also: Path) -> str:
    """Changes whenever a source, a header, the flags or the Paddle version
    does (the sources of custom_ops/, and of the folders `also` names)."""
    paddle = import_paddle()

    h = hashlib.sha256()
    for p in hashed_sources(*also):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    # The flags name the sources' folder (-I): hashed without it, so two
    # copies of the same sources (a checkout and its scratch copies) share a
    # build, while any flag else still builds apart.
    flags = repr((compile_flags(cuda), link_flags(cuda))).replace(str(SOURCE_DIR), "<sources>")
    h.update(flags.encode())
    if cuda and os.environ.get("PADDLE_CUDA_ARCH_LIST"):
        # Paddle's builder adds SASS for these archs to the flags above.
        h.update(os.environ["PADDLE_CUDA_ARCH_LIST"].encode())
    h.update(paddle.__version__.encode())
    h.update(sys.version.encode())
    return h.hexdigest()[:16]


CACHE_VARIABLE = "FASTDEPLOY_MTP_CACHE"


def cache_root() -> Path:
    """FASTDEPLOY_MTP_CACHE, else $XDG_CACHE_HOME/fastdeploy_mtp, else
    ~/.cache/fastdeploy_mtp (an empty variable counts as unset). Absolute, so
    a later change of directory leaves it where it was."""
    chosen = os.environ.get(CACHE_VARIABLE, "")
    if chosen:
        return Path(chosen).expanduser().absolute()
    base = os.environ.get("XDG_CACHE_HOME", "") or Path.home() / ".cache"
    return Path(base).expanduser().absolute() / "fastdeploy_mtp"


def writable_cache_root() -> Path:
    """cache_root(), created if need be; BuildError when it is a file or
    cannot be created or written."""
    root = cache_root()
    named = (f"{CACHE_VARIABLE}={os.environ[CACHE_VARIABLE]}" if os.environ.get(CACHE_VARIABLE)
             else f"the op library's cache folder {root}")
    fix = f"set {CACHE_VARIABLE} to a folder you can write to"
    try:
        if root.exists() and not root.is_dir():
            raise BuildError(f"{named} is a file, not a folder: {fix}")
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BuildError(f"cannot create {named} ({e.strerror or e}): {fix}") from e
    if not os.access(root, os.W_OK | os.X_OK):
        raise BuildError(f"cannot write to {named}: make it writable or {fix}")
    return root


def missing_compiler() -> Optional[str]:
    """Why the compilers Paddle's builder calls are not there, or None.

    It runs distutils' compilers: CC for each source and CXX to link (and
    Paddle checks CXX's version first), each from the environment or else
    from Python's build configuration."""
    import sysconfig

    for var in ("CXX", "CC"):
        given = os.environ.get(var)
        command = (given if given is not None else sysconfig.get_config_var(var) or "").split()
        exe = command[0] if command else ""
        if exe and shutil.which(exe):
            continue
        origin = f"{var}={given!r}" if given is not None else f"{exe or 'none'} (Python's {var})"
        where = "" if "/" in exe else " on PATH"
        return (f"no C++ compiler to build the op library: {origin} is not found{where}; "
                f"install g++ (apt-get install g++) or set {var} to a compiler")
    return None


# A finished build's folder holds this file, naming the library and its size;
# it is written last, before the folder takes its final name.
BUILT_MARKER = "built"


def finished_build(folder: Path, name: str) -> bool:
    """`folder` holds a finished build of `name` (its marker, and the library
    at the size the marker records)."""
    try:
        lib, size = (folder / BUILT_MARKER).read_text().split()
        return lib == f"{name}.so" and (folder / name / lib).stat().st_size == int(size) > 0
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def build_lock(root: Path, key: str, what: str) -> Iterator[None]:
    """Holds `root/<key>.lock` (flock) while this process builds `key`: other
    processes wait, saying so once. The holder's pid is in the file for them
    to name; the system releases the lock of a process that dies."""
    import fcntl

    path = root / f"{key}.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise BuildError(f"cannot open the build lock {path} ({e.strerror or e}): set "
                         f"{CACHE_VARIABLE} to a folder you can write to") from e
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            say(f"waiting for another process building {what} into {root / key} "
                f"(pid {holder}) ...")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


def _lock_holder(fd: int) -> str:
    """The pid the lock's holder wrote into it. The holder writes it just
    after taking the lock, so a waiter that came in between (and saw the file
    empty) waits a moment for it rather than naming no one."""
    for _ in range(100):
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if holder:
            return holder
        time.sleep(0.01)
    return "unknown"


def _remove(folder: Path) -> None:
    if folder.is_symlink() or folder.is_file():
        folder.unlink()
    elif folder.exists():
        shutil.rmtree(folder)


Module = TypeVar("Module")


def cached_build(key: str, name: str, what: str, build: Callable[[Path], Module],
                 load: Callable[[Path], Module]) -> Module:
    """The library `name` from the cache folder `<cache root>/<key>`, built
    there once: `load(folder / name)` loads a finished build; `build(folder)`
    compiles (and loads) one into `folder`, returning the module.

    One process builds a key at a time (build_lock); it builds into
    `<key>.partial` and renames that to `<key>` when finished, so a process
    sees a finished folder or none. A folder without its marker (left by a
    build that did not finish, or damaged) is built again, never loaded. A
    finished build loads from a cache folder this process cannot write to
    (one prebuilt for a read-only install); only a build needs to write."""
    final = cache_root() / key
    if finished_build(final, name):
        return load(final / name)
    root = writable_cache_root()
    with build_lock(root, key, what):
        if finished_build(final, name):  # another process built it while this one waited
            return load(final / name)
        why = ("the build there is unfinished or damaged" if final.exists()
               else "none is built there yet for these sources, flags and Paddle")
        say(f"building {what} into {final}, since {why} (once) ...")
        partial = root / f"{key}.partial"
        # What a build or a clean-up that stopped part-way left: its process
        # held the lock, so no process is writing there now.
        for left in (partial, *root.glob(f"{key}.stale-*")):
            _remove(left)
        if final.exists():
            stale = root / f"{key}.stale-{os.getpid()}"
            os.rename(final, stale)  # out of every other process's sight at once
            _remove(stale)
        t0 = time.time()
        try:
            # Made inside the try: an interrupt right after it still removes it.
            partial.mkdir()
            module = build(partial)
            lib = partial / name / f"{name}.so"
            if not lib.is_file() or lib.stat().st_size == 0:
                raise BuildError(f"building {what} left no library at {lib}")
            (partial / BUILT_MARKER).write_text(f"{lib.name} {lib.stat().st_size}\n")
            os.rename(partial, final)
        except BaseException:
            _remove(partial)  # the compiler's messages said what went wrong
            raise
        say(f"built in {time.time() - t0:.0f} s")
        return module


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
