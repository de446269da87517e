"""The build cache under concurrency: one process builds a library, the
others wait and load it; a folder that is not a finished build is rebuilt,
never loaded.

All but the last test replace the compiler by a stand-in that writes a fake
library, so they run in moments; the last starts four processes on an empty
cache and compiles the CPU library once."""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from helpers import child_env

from fastdeploy_mtp import _build, _library

ROOT = Path(__file__).resolve().parent.parent
NAME = _build.MODULE_NAME
FAKE_LIBRARY = b"\x7fELF" + bytes(4092)


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """An empty cache folder, and the folder the library's build takes in it."""
    root = tmp_path / "cache"
    monkeypatch.setenv(_build.CACHE_VARIABLE, str(root))
    return root, root / _build.source_hash(_build.with_cuda())


@pytest.fixture
def builds(monkeypatch):
    """The compiler and loader replaced: each build writes FAKE_LIBRARY and is
    recorded here; a load checks it reads a whole library."""
    done = []

    def compile_(name, folder, sources, flags, ldflags, what):
        final = folder.parent / folder.name.replace(".partial", "")
        assert folder != final and not _build.finished_build(final, name), \
            "a build must not write where other processes load from"
        (folder / name).mkdir()
        (folder / name / f"{name}.so").write_bytes(FAKE_LIBRARY)
        done.append(folder)
        return ("built", name)

    def load(name, folder):
        assert (folder / f"{name}.so").read_bytes() == FAKE_LIBRARY, "loaded a partial library"
        return ("loaded", name)

    monkeypatch.setattr(_library, "_compile", compile_)
    monkeypatch.setattr(_library, "_load_built", load)
    return done


def finished(final: Path) -> bool:
    return (_build.finished_build(final, NAME)
            and (final / NAME / f"{NAME}.so").read_bytes() == FAKE_LIBRARY)


def test_the_first_use_builds_once_and_says_what_and_why(cache, builds, capsys):
    root, final = cache
    assert _library._build_from_source() == ("built", NAME)
    err = capsys.readouterr().err
    kind = "CPU and CUDA" if _build.with_cuda() else "CPU"
    assert (f"fastdeploy_mtp: building the {kind} op library into {final}, "
            "since none is built there yet for these sources, flags and Paddle (once) ...\n"
            in err), err
    assert len(err.splitlines()) == 2 and "built in" in err.splitlines()[1], err
    assert finished(final) and sorted(p.name for p in root.iterdir()) == [final.name,
                                                                       final.name + ".lock"]
    assert _library._build_from_source() == ("loaded", NAME)
    assert len(builds) == 1 and capsys.readouterr().err == ""


@pytest.mark.parametrize("damage", ["truncated library, no marker", "marker, truncated library",
                                    "marker only", "garbled marker"])
def test_a_half_finished_or_damaged_build_is_rebuilt_not_loaded(cache, builds, capsys, damage):
    """Folders as a build stopped part-way leaves them (by an earlier version
    that built in place, or a library cut short on disk)."""
    root, final = cache
    (final / NAME).mkdir(parents=True)
    Path(f"{final}.stale-99999", NAME).mkdir(parents=True)  # a clean-up stopped part-way
    so = final / NAME / f"{NAME}.so"
    if "truncated library" in damage:
        so.write_bytes(FAKE_LIBRARY[:100])
    if damage.startswith("marker"):
        (final / _build.BUILT_MARKER).write_text(f"{NAME}.so {len(FAKE_LIBRARY)}\n")
    if damage == "garbled marker":
        so.write_bytes(FAKE_LIBRARY)
        (final / _build.BUILT_MARKER).write_text("x")
    assert _library._build_from_source() == ("built", NAME)
    assert "since the build there is unfinished or damaged" in capsys.readouterr().err
    assert len(builds) == 1 and finished(final)
    assert sorted(p.name for p in root.iterdir()) == [final.name, final.name + ".lock"]


HOLDER = textwrap.dedent(r"""
    import fcntl, os, sys, time
    from pathlib import Path
    lock, partial, held, mode = sys.argv[1:5]
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    if mode == "late":  # a waiter comes between the lock taken and the pid written
        Path(held).touch()
        time.sleep(0.3)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    partial = Path(partial)
    (partial / "NAME").mkdir(parents=True)
    (partial / "NAME" / "NAME.so").write_bytes(b"\x7fELF")  # cut short
    Path(held).touch()
    if mode in ("finish", "late"):  # the way cached_build finishes a build
        time.sleep(1.5)
        so = partial / "NAME" / "NAME.so"
        so.write_bytes(LIBRARY)
        (partial / "MARKER").write_text(f"NAME.so {so.stat().st_size}\n")
        os.rename(partial, str(partial).replace(".partial", ""))
    else:
        time.sleep(120)  # until killed
""").replace("NAME", NAME).replace("MARKER", _build.BUILT_MARKER).replace(
    "LIBRARY", repr(FAKE_LIBRARY))


def hold_lock(root: Path, final: Path, mode: str) -> subprocess.Popen:
    """Another process holding the build lock of `final`, part-way through its build."""
    held = root.parent / "held"
    root.mkdir(parents=True, exist_ok=True)
    p = subprocess.Popen([sys.executable, "-c", HOLDER, f"{final}.lock", f"{final}.partial",
                          str(held), mode])
    deadline = time.time() + 30
    while not held.exists():
        assert p.poll() is None and time.time() < deadline, "the lock holder did not start"
        time.sleep(0.02)
    return p


@pytest.mark.parametrize("mode", ["finish", "late"])
def test_a_second_process_waits_for_the_builder_and_loads_its_library(cache, builds, capsys,
                                                                     mode):
    """`late`: the holder has the lock but has not written its pid yet; the
    waiter names it all the same."""
    root, final = cache
    holder = hold_lock(root, final, mode)
    t0 = time.time()
    assert _library._build_from_source() == ("loaded", NAME)
    assert time.time() - t0 > 0.5 and holder.wait(10) == 0
    err = capsys.readouterr().err
    assert err == (f"fastdeploy_mtp: waiting for another process building the "
                   f"{'CPU and CUDA' if _build.with_cuda() else 'CPU'} op library "
                   f"into {final} (pid {holder.pid}) ...\n"), err
    assert builds == [] and finished(final)


def test_a_killed_builder_releases_the_lock_and_its_half_build_is_redone(cache, builds, capsys):
    root, final = cache
    holder = hold_lock(root, final, "hang")
    result = []
    waiter = threading.Thread(target=lambda: result.append(_library._build_from_source()))
    waiter.start()
    try:
        waiter.join(1.0)
        assert waiter.is_alive() and result == [], "did not wait for the lock's holder"
        assert f"(pid {holder.pid})" in capsys.readouterr().err
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    waiter.join(30)
    assert result == [("built", NAME)] and len(builds) == 1 and finished(final)
    assert not Path(f"{final}.partial").exists()


def test_a_released_lock_names_no_one_to_a_later_waiter(cache, builds, capsys):
    """The holder clears its pid as it releases: a waiter that comes while a
    later builder has the lock but has not yet written its pid names that
    builder, not this process (which built before and holds nothing)."""
    root, final = cache
    assert _library._build_from_source() == ("built", NAME)
    _build._remove(final)  # the same key built again (its folder removed)
    capsys.readouterr()
    holder = hold_lock(root, final, "late")
    assert _library._build_from_source() == ("loaded", NAME)
    assert holder.wait(10) == 0
    err = capsys.readouterr().err
    assert f"(pid {holder.pid})" in err and f"(pid {os.getpid()})" not in err, err


@pytest.mark.parametrize("fails", [False, True])
def test_the_lock_holds_the_pid_while_held_and_nothing_after(tmp_path, fails):
    lock = tmp_path / "key.lock"
    with pytest.raises(RuntimeError) if fails else contextlib.nullcontext():
        with _build.build_lock(tmp_path, "key", "a test build"):
            assert lock.read_text() == f"{os.getpid()}\n"
            if fails:
                raise RuntimeError("the build failed")
    assert lock.read_bytes() == b""


CHILD = textwrap.dedent("""
    import sys, time, warnings
    from pathlib import Path
    from fastdeploy_mtp import ops
    warnings.filterwarnings("ignore", "No ccache found")
    import paddle  # every import done before the start
    Path(sys.argv[1]).touch()
    while not Path(sys.argv[2]).exists():
        time.sleep(0.01)
    lib = ops.load_library()
    print("ops:", hasattr(lib, "draft_model_preprocess_rollback"),
      hasattr(lib, "update_attn_mask_offsets_shadow"))
""")


def test_four_processes_on_an_empty_cache_build_once_and_all_load(tmp_path):
    """As tensor-parallel ranks or pytest-xdist workers start: four first
    uses at once. One compiles (the real compiler), the others wait."""
    root = tmp_path / "cache"
    env = child_env(FASTDEPLOY_MTP_CACHE=str(root), FASTDEPLOY_MTP_BUILD="1",
                    FASTDEPLOY_MTP_FORM=None)
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / f"ready{i}"), str(go)],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(4)]
    try:
        deadline = time.time() + 120
        while not all((tmp_path / f"ready{i}").exists() for i in range(4)):
            assert all(p.poll() is None for p in procs) and time.time() < deadline
            time.sleep(0.05)
        go.touch()
        outs = [p.communicate(timeout=550) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    report = "\n".join(f"[{p.pid} rc={p.returncode}] {o}{e}" for p, (o, e) in zip(procs, outs))
    assert all(p.returncode == 0 for p in procs), report
    assert all(o == "ops: True True\n" for o, _ in outs), report
    builders = [p.pid for p, (_, e) in zip(procs, outs) if "fastdeploy_mtp: building the" in e]
    assert len(builders) == 1, report
    assert sum(e.count("fastdeploy_mtp: building the") + e.count("built in")
               for _, e in outs) == 2, report
    waited = [e for _, e in outs if "waiting for another process building" in e]
    assert waited and all(f"(pid {builders[0]})" in e for e in waited), report
    (final,) = [p for p in root.iterdir() if p.is_dir()]
    assert _build.finished_build(final, NAME), report
    assert sorted(p.name for p in root.iterdir()) == [final.name, final.name + ".lock"], report
