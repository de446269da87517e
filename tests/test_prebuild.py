"""A FastDeploy user's build: `fastdeploy-mtp build` prebuilds the op library
into a folder, from which later processes load it without compiling, even
where they cannot write to it; Ctrl-C at any moment of a build is one line,
and the Python API without Paddle raises one line, not an import traceback."""

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import CHECKOUT, NO_PADDLE, child_env

from fastdeploy_mtp import __main__ as cli
from fastdeploy_mtp import _build

NAME = _build.MODULE_NAME
# Where the tests run as root, who writes through any mode bits: the child
# runs without the capability that lets it, as any other user would.
AS_A_USER = (["setpriv", "--bounding-set=-dac_override"]
             if os.geteuid() == 0 and shutil.which("setpriv") else [])


def _program(argv, env, timeout=600, prefix=()):
    done = subprocess.run([*prefix, sys.executable, "-m", "fastdeploy_mtp", *argv], cwd=CHECKOUT,
                          env=env, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def _tree(folder: Path) -> dict:
    """Every path under `folder` with its size and modification time."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


def _read_only(folder: Path) -> None:
    for p in [folder, *folder.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def test_build_into_a_folder_that_later_processes_load_read_only(tmp_path):
    if os.geteuid() == 0 and not AS_A_USER:
        pytest.skip("running as root without setpriv: a read-only folder stays writable")
    into = tmp_path / "prebuilt"
    # FASTDEPLOY_MTP_BUILD=1: an installed library must not stand in for the build.
    env = child_env(FASTDEPLOY_MTP_BUILD="1", FASTDEPLOY_MTP_CACHE=None,
                    FASTDEPLOY_MTP_CUDA_ARCH=None)
    code, out, err = _program(["build", "--into", str(into)], env)
    assert code == 0, (code, out, err)
    (folder,) = [p for p in into.iterdir() if p.is_dir()]
    assert _build.finished_build(folder, NAME)
    assert out.startswith("the CPU") and f": built in {folder}\n" in out, out
    assert f"processes with FASTDEPLOY_MTP_CACHE={into} load it without compiling\n" in out
    assert "building" in err and "Traceback" not in err, err

    # Once more: nothing to do, and it says so.
    code, out, err = _program(["build", "--into", str(into)], env)
    assert code == 0 and f": already built in {folder}\n" in out and err == "", (out, err)

    _read_only(into)
    before = _tree(into)
    try:
        reader = dict(env, FASTDEPLOY_MTP_CACHE=str(into))
        code, out, err = _program(["check", "--form", "recompute"], reader, prefix=AS_A_USER)
        assert code == 0, (code, out, err)
        assert "building" not in err and err == "", err
        assert out.endswith("registration matches fastdeploy_mtp/signature.py (recompute)\n")
        # The folder is as the build left it: nothing written, nothing removed.
        assert _tree(into) == before
        # The same process could not have built there: writing is refused.
        script = f"open({str(into / 'probe')!r}, 'w')"
        done = subprocess.run([*AS_A_USER, sys.executable, "-c", script], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode != 0 and "PermissionError" in done.stderr, done.stderr
    finally:
        for p in [into, *into.rglob("*")]:
            if not p.is_symlink():
                p.chmod(p.stat().st_mode | stat.S_IWUSR)


def test_build_refuses_archs_without_a_cuda_paddle(capsys):
    if _build.with_cuda():
        pytest.skip("a CUDA Paddle takes --arch")
    assert cli.main(["build", "--arch", "9.0"]) == 2
    err = capsys.readouterr().err
    assert err == ("build: --arch needs a CUDA build of Paddle (paddlepaddle-gpu); this Paddle "
                   "builds the CPU library alone: leave --arch out\n"), err


def test_build_refuses_an_arch_it_cannot_compile_for(monkeypatch, capsys):
    monkeypatch.setattr(_build, "with_cuda", lambda: True)
    assert cli.main(["build", "--arch", "7.0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("build: --arch 7.0: not a list of CUDA archs of 8.0 or later"), err
    assert err.count("\n") == 1


def test_a_recorded_arch_list_is_the_default_where_it_covers_the_gpus(monkeypatch, tmp_path):
    """`build --arch` records its list: a process started later, without
    FASTDEPLOY_MTP_CUDA_ARCH, compiles for the same archs (so its build is
    the recorded one), unless the list leaves out one of its GPUs."""
    monkeypatch.setenv(_build.CACHE_VARIABLE, str(tmp_path))
    monkeypatch.delenv(_build.ARCH_VARIABLE, raising=False)
    monkeypatch.setattr(_build, "nvcc_archs", lambda: (75, 80, 86, 89, 90, 100))
    monkeypatch.setattr(_build, "visible_gpu_archs", lambda: (90,))
    assert _build.cuda_archs() == ([90], [90])
    _build.record_archs("8.0 9.0")
    assert (tmp_path / _build.ARCH_RECORD).read_text() == "8.0 9.0\n"
    assert _build.cuda_archs() == ([80, 90], [90])
    monkeypatch.setattr(_build, "visible_gpu_archs", lambda: (86,))
    assert _build.recorded_archs() is None and _build.cuda_archs() == ([86], [86])
    (tmp_path / _build.ARCH_RECORD).write_text("garbage\n")
    monkeypatch.setattr(_build, "visible_gpu_archs", lambda: (90,))
    assert _build.cuda_archs() == ([90], [90])


def _start_build(cache: Path):
    """`build` as a terminal starts it, in a process group of its own."""
    def child():
        os.setpgrp()
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    return subprocess.Popen([sys.executable, "-m", "fastdeploy_mtp", "build", "--into",
                             str(cache)], cwd=CHECKOUT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=child,
                            env=child_env(FASTDEPLOY_MTP_BUILD="1"))


@pytest.mark.parametrize("after_s", [0.0, 2.0, 6.0])
def test_ctrl_c_at_any_moment_of_a_build_is_one_line(tmp_path, after_s):
    """A terminal's Ctrl-C reaches every process of the foreground group:
    the build's own processes too. Only the interrupted line is printed, the
    build stops (its processes with it) and leaves nothing to load."""
    cache = tmp_path / "cache"
    proc = _start_build(cache)
    first = proc.stderr.readline().decode()
    assert first.startswith("fastdeploy_mtp: building the "), first
    time.sleep(after_s)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, err)
    assert err.decode() == "fastdeploy_mtp: interrupted\n", err.decode()
    assert out == b""
    time.sleep(1.5)  # a compiler still running would write into the build's folder
    left = sorted(p.name for p in cache.iterdir())
    assert len(left) == 1 and left[0].endswith(".lock"), left


API_CALLS = {
    "wrapper": "ops.draft_model_preprocess(*[None] * 21, 1, True, False, True)",
    "mask wrapper": "ops.update_attn_mask_offsets(*[None] * 10)",
    "a form's wrapper": "forms.load('pr5738').draft_model_preprocess(*[None] * 22, 1, True, "
                        "False, True)",
    "library": "ops.load_library()",
    "raw op": "forms.load('shadow').library.draft_model_preprocess",
}


@pytest.mark.parametrize("call", sorted(API_CALLS))
def test_the_python_api_without_paddle_raises_one_line(tmp_path, call):
    (tmp_path / "sitecustomize.py").write_text(NO_PADDLE)
    script = ("from fastdeploy_mtp import forms, ops\n"
              "try:\n"
              f"    {API_CALLS[call]}\n"
              "except ops.PaddleMissingError as e:\n"
              "    assert isinstance(e, ModuleNotFoundError) and e.name == 'paddle'\n"
              "    assert e.__suppress_context__ and e.__cause__ is None\n"
              "    print(e)\n"
              f"{API_CALLS[call]}\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=child_env(str(tmp_path)))
    assert done.stdout == _build.PADDLE_MISSING + "\n", (done.stdout, done.stderr)
    # Uncaught: one exception, its message the one line (no chained import error).
    err = done.stderr
    assert done.returncode == 1 and err.count("Traceback") == 1, err
    assert "During handling" not in err and "direct cause" not in err, err
    assert err.endswith(f"PaddleMissingError: {_build.PADDLE_MISSING}\n"), err


def test_build_with_a_cuda_paddle_and_no_nvcc_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr(_build, "with_cuda", lambda: True)
    monkeypatch.setattr(_build, "_nvcc", lambda: None)
    assert cli.main(["build"]) == 2
    err = capsys.readouterr().err
    assert err == ("build: this Paddle (paddlepaddle-gpu) builds the CUDA kernels with nvcc, "
                   "which is not found: install the CUDA toolkit, or set CUDA_HOME to it\n"), err


def test_build_for_archs_records_them_for_the_processes_after_it(monkeypatch, tmp_path, capsys):
    """With a CUDA Paddle (stood in for): `build --arch 8.0 9.0 --into DIR`
    compiles for those archs, records them in DIR, and a process started
    later on a 9.0 machine, without FASTDEPLOY_MTP_CUDA_ARCH, computes the
    same build's hash, so it loads that build instead of compiling."""
    from fastdeploy_mtp import _library

    for name in (_build.ARCH_VARIABLE, _build.CACHE_VARIABLE):
        monkeypatch.setenv(name, "")  # restored after the test: build sets them
    monkeypatch.setattr(_build, "with_cuda", lambda: True)
    monkeypatch.setattr(_build, "_nvcc", lambda: "/usr/local/cuda/bin/nvcc")
    monkeypatch.setattr(_build, "nvcc_archs", lambda: (75, 80, 86, 89, 90, 100))
    monkeypatch.setattr(_build, "visible_gpu_archs", lambda: (90,))
    built = []
    monkeypatch.setattr(_library, "_build_from_source",
                        lambda: built.append((_build.source_hash(True),
                                              _build.cuda_arch_flags())))
    into = tmp_path / "prebuilt"
    assert cli.main(["build", "--arch", "8.0", "9.0", "--into", str(into)]) == 0
    out = capsys.readouterr().out
    ((key, flags),) = built
    assert flags == ["-gencode", "arch=compute_80,code=sm_80", "-gencode",
                     "arch=compute_90,code=sm_90", "-gencode", "arch=compute_90,code=compute_90"]
    assert out.startswith("the CPU and CUDA op library for sm_80, sm_90 (PTX: compute_90): "
                          f"built in {into / key}\n"), out
    assert (into / _build.ARCH_RECORD).read_text() == "8.0 9.0\n"
    # A later process: its own environment, the cache named, no arch list.
    monkeypatch.setenv(_build.ARCH_VARIABLE, "")
    monkeypatch.setenv(_build.CACHE_VARIABLE, str(into))
    assert _build.source_hash(True) == key
    monkeypatch.setattr(_build, "visible_gpu_archs", lambda: (100,))  # not covered: its own
    assert _build.source_hash(True) != key


def test_build_into_the_default_cache_says_which_processes_load_it(monkeypatch, tmp_path,
                                                                   capsys):
    from fastdeploy_mtp import _library

    monkeypatch.setenv(_build.CACHE_VARIABLE, "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(_build, "with_cuda", lambda: False)
    monkeypatch.setattr(_library, "_build_from_source", lambda: None)
    assert cli.main(["build"]) == 0
    folder = tmp_path / "fastdeploy_mtp" / _build.source_hash(False)
    assert capsys.readouterr().out == (
        f"the CPU op library: built in {folder}\n"
        f"processes without FASTDEPLOY_MTP_CACHE (the default cache, {folder.parent}) load it "
        "without compiling\n")
