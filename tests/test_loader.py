"""Which op library fastdeploy_mtp.ops loads: the installed one only when it is current."""

import importlib.util
import os
import re
import shutil
import types
from pathlib import Path

import pytest

from fastdeploy_mtp import _build, _library, ops
from fastdeploy_mtp.signature import FORMS



def set_env(monkeypatch, name, value):
    """The environment variable `name` set to `value`, or unset for None."""
    if value is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, value)

@pytest.fixture
def installed(monkeypatch, tmp_path):
    """An installed fastdeploy_mtp_ops as importlib sees it, and a private stamp file."""
    monkeypatch.setattr(_build, "install_stamp_path", lambda: tmp_path / "build" / "stamp")
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args):
        if name == _build.MODULE_NAME:
            return types.SimpleNamespace(origin=str(tmp_path / "fastdeploy_mtp_ops.so"))
        return real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    return tmp_path


def test_an_install_stamped_with_the_current_sources_is_used(installed):
    _build.write_install_stamp(_build.with_cuda())
    assert _library._installed_is_current()


def test_an_install_without_a_stamp_is_not_used_in_a_checkout(installed, capsys):
    assert not _library._installed_is_current()
    assert "using a fresh build" in capsys.readouterr().err


def test_an_install_from_other_sources_or_flags_is_not_used(installed, monkeypatch):
    _build.write_install_stamp(_build.with_cuda())
    flags = _build.compile_flags
    monkeypatch.setattr(_build, "compile_flags", lambda cuda: {**flags(cuda), "cxx": ["-O0"]})
    assert not _library._installed_is_current()


def test_outside_a_checkout_the_install_is_always_used(installed, monkeypatch):
    monkeypatch.setattr(_build, "in_source_checkout", lambda: False)
    assert _library._installed_is_current()


def test_no_install_means_a_build(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert not _library._installed_is_current()


def test_no_paddle_chatter_on_the_terminal():
    """A user's run shows our output only: no ccache warning, no "using custom
    operator only", no "Compiling user custom op" (the library is built)."""
    import os
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-m", "fastdeploy_mtp", "simulate", "--steps", "1",
                        "--quiet"], cwd=repo, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for chatter in ("ccache", "using custom operator", "Compiling user custom op"):
        assert chatter not in r.stdout + r.stderr, r.stdout + r.stderr


def test_every_header_the_sources_include_is_hashed():
    """A header left out of source_hash would leave a stale build in place
    after it changed (and a mutant of it would test the unmutated library)."""
    import re

    bench = _build.SOURCE_DIR / "bench"
    hashed = {p.resolve() for p in _build.hashed_sources(bench)}
    included = set()
    for src in hashed:
        for name in re.findall(r'^#include "([^"]+)"', src.read_text(), re.M):
            target = (src.parent / name).resolve()
            if target.is_file():  # else a -I path outside custom_ops (Paddle's)
                included.add(target)
    assert any(p.suffix == ".cuh" for p in included)  # the kernels' headers are seen
    assert included <= hashed, sorted(str(p) for p in included - hashed)


def test_the_sanitized_build_is_a_build_of_its_own(monkeypatch):
    """FASTDEPLOY_MTP_SANITIZE=undefined compiles and links with the
    undefined-behaviour sanitizer, and so hashes (and caches) apart."""
    monkeypatch.delenv("FASTDEPLOY_MTP_SANITIZE", raising=False)
    plain = _build.source_hash(False)
    assert not any("sanitize" in f for f in _build.compile_flags(False)["cxx"])
    monkeypatch.setenv("FASTDEPLOY_MTP_SANITIZE", "undefined")
    for flags in (_build.compile_flags(False)["cxx"], _build.link_flags(False)):
        assert "-fsanitize=undefined" in flags and "-fno-sanitize-recover=all" in flags
    assert _build.source_hash(False) != plain
    monkeypatch.setenv("FASTDEPLOY_MTP_SANITIZE", "0")
    assert _build.source_hash(False) == plain


def test_a_copy_of_the_same_sources_shares_the_build_and_an_edit_does_not(tmp_path, monkeypatch):
    """The hash names what is compiled, not where: a scratch copy of
    custom_ops/ (a second checkout, a mutant's copy) hashes as the original
    and loads its build; an edit of the copy builds apart; so does a flag."""
    for cuda in (False, True):
        monkeypatch.setattr(_build, "SOURCE_DIR", _build.SOURCE_DIR)
        original = _build.source_hash(cuda)
        scratch = tmp_path / f"copy{int(cuda)}" / "custom_ops"
        shutil.copytree(_build.SOURCE_DIR, scratch, ignore=shutil.ignore_patterns("build"))
        monkeypatch.setattr(_build, "SOURCE_DIR", scratch)
        assert any(str(scratch) in f for f in _build.compile_flags(cuda)["cxx"])
        assert _build.source_hash(cuda) == original
        (scratch / "forms.h").write_text((scratch / "forms.h").read_text() + "\n")
        assert _build.source_hash(cuda) != original
    monkeypatch.setenv("FASTDEPLOY_MTP_STATIC_LIBSTDCXX", "1")
    edited = _build.source_hash(False)
    monkeypatch.setenv("FASTDEPLOY_MTP_STATIC_LIBSTDCXX", "0")
    assert _build.source_hash(False) != edited


def test_an_unknown_sanitizer_is_refused(monkeypatch):
    monkeypatch.setenv("FASTDEPLOY_MTP_SANITIZE", "address")
    with pytest.raises(ValueError, match="only 'undefined'"):
        _build.compile_flags(False)


SIDE_EFFECTS = r'''
import importlib, logging, os, pkgutil, sys, warnings
import paddle, paddle.utils.cpp_extension  # Paddle's own import-time effects, first

def snapshot():
    loggers = {n: (lg.level, lg.disabled, lg.propagate, len(lg.handlers))
               for n, lg in logging.root.manager.loggerDict.items()
               if isinstance(lg, logging.Logger)}
    return (repr(warnings.filters), dict(os.environ), loggers, logging.root.level,
            len(logging.root.handlers))

before = snapshot()
import fastdeploy_mtp
modules = [m.name for m in pkgutil.walk_packages(fastdeploy_mtp.__path__, "fastdeploy_mtp.")]
assert "fastdeploy_mtp.harness.simulate" in modules and "fastdeploy_mtp.bench.gpu" in modules
for name in modules:
    importlib.import_module(name)
imported = snapshot()
from fastdeploy_mtp import ops
ops.load_library()
loaded = snapshot()
names = ("warnings filters", "environment", "loggers", "root level", "root handlers")
for when, now in (("import", imported), ("load", loaded)):
    # Loggers the imports create (Paddle's, setuptools') are theirs; those
    # that existed before must be as they were.
    for name, a, b in zip(names, before, now):
        if name == "loggers":
            b = {n: b[n] for n in a}
        if a != b:
            print(f"{when} changed {name}")
print("checked", len(names))
'''


def test_importing_the_package_and_loading_the_ops_change_no_process_wide_state():
    """A library leaves its host's warnings filters, loggers and environment
    alone: importing every module (the command line's too) and loading the
    op library change none of them."""
    import os
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", SIDE_EFFECTS], cwd=repo, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == "checked 5\n", r.stdout


# --- The build hash: every file a build compiles or includes ------------------

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def _compiled_and_included(sources, include_dir):
    """The sources and, transitively, every file of ours they include (found
    beside the including file or on the -I folder, as the compiler finds it)."""
    seen, todo = set(), [Path(s).resolve() for s in sources]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        for name in INCLUDE.findall(f.read_text()):
            for d in (f.parent, include_dir):
                if (d / name).is_file():
                    todo.append((d / name).resolve())
                    break
    return seen


def test_editing_any_file_a_build_compiles_or_includes_changes_its_hash(tmp_path, monkeypatch):
    """In a scratch copy of custom_ops/: an edit of any source or header of
    the CPU build, the CUDA build or the benchmark's library (custom_ops/bench)
    builds that library afresh; an edit of anything else reuses the build."""
    scratch = tmp_path / "custom_ops"
    shutil.copytree(_build.SOURCE_DIR, scratch, ignore=shutil.ignore_patterns("build"))
    monkeypatch.setattr(_build, "SOURCE_DIR", scratch)
    bench = scratch / "bench"
    builds = {  # the hash that names each build, and what the build compiles
        "CPU": (lambda: _build.source_hash(False), _build.sources(False)),
        "CUDA": (lambda: _build.source_hash(True), _build.sources(True)),
        "bench": (lambda: _build.source_hash(True, bench),
                  sorted(str(p) for p in bench.iterdir() if p.suffix in (".cc", ".cu"))),
    }
    suffixes = set()
    for build, (digest, sources) in builds.items():
        base = digest()
        files = _compiled_and_included(sources, scratch)
        suffixes |= {f.suffix for f in files}
        for f in sorted(files):
            text = f.read_text()
            f.write_text(text + "\n// edited\n")
            edited = digest()
            f.write_text(text)
            assert edited != base, f"the {build} build's hash ignores {f.relative_to(scratch)}"
        assert digest() == base
    assert suffixes == {".h", ".cuh", ".cc", ".cu"}, suffixes  # every kind was edited above

    bases = {build: digest() for build, (digest, _) in builds.items()}
    (scratch / "NOTES.md").write_text("not compiled\n")
    (scratch / "build").mkdir()
    (scratch / "build" / "installed-source-hash").write_text("0123\n")  # setup_ops.py's stamp
    (bench / "results.txt").write_text("1 us\n")
    assert {build: digest() for build, (digest, _) in builds.items()} == bases


# --- Environment variables: set, empty, unset and bad --------------------------

def _one_line(e) -> str:
    text = str(e.value)
    assert text and "\n" not in text, text
    return text


@pytest.mark.parametrize("value, form", [(None, "rollback"), ("", "rollback"),
                                         ("recompute", "recompute"), ("shadow", "shadow"),
                                         ("rollback", "rollback")])
def test_the_form_variable_names_the_process_form_and_empty_means_unset(
        monkeypatch, value, form):
    set_env(monkeypatch, "FASTDEPLOY_MTP_FORM", value)
    assert ops.process_form() == form


@pytest.mark.parametrize("bad", ["nope", "Recompute", " recompute", "rollback,shadow"])
def test_an_unknown_form_variable_is_one_line_naming_the_forms(monkeypatch, bad):
    monkeypatch.setenv("FASTDEPLOY_MTP_FORM", bad)
    for call in (ops.process_form, lambda: ops.draft_model_preprocess):
        with pytest.raises(_build.BuildError) as e:
            call()
        assert isinstance(e.value, ValueError)
        assert _one_line(e) == (f"FASTDEPLOY_MTP_FORM={bad!r}: the forms here are "
                                f"{', '.join(FORMS)} (empty or unset: rollback)")


def test_the_cache_variable_set_empty_unset_and_relative(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    default = tmp_path / "xdg" / "fastdeploy_mtp"
    monkeypatch.delenv("FASTDEPLOY_MTP_CACHE", raising=False)
    assert _build.cache_root() == default
    monkeypatch.setenv("FASTDEPLOY_MTP_CACHE", "")
    assert _build.cache_root() == default
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert _build.cache_root() == Path.home() / ".cache" / "fastdeploy_mtp"
    monkeypatch.setenv("FASTDEPLOY_MTP_CACHE", str(tmp_path / "mine"))
    assert _build.writable_cache_root() == tmp_path / "mine" and (tmp_path / "mine").is_dir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FASTDEPLOY_MTP_CACHE", "rel")
    assert _build.cache_root() == tmp_path / "rel"


def _refuse_cache(monkeypatch, value):
    """The one-line BuildError of the loader (and of the cache folder alone)
    with FASTDEPLOY_MTP_CACHE=value, before anything is compiled."""
    monkeypatch.setenv("FASTDEPLOY_MTP_CACHE", str(value))
    monkeypatch.setattr(_library, "_compile", lambda *a: pytest.fail("compiled"))
    with pytest.raises(_build.BuildError) as e:
        _library._build_from_source()
    return _one_line(e)


def test_a_cache_variable_naming_a_file_is_refused(monkeypatch, tmp_path):
    f = tmp_path / "a_file"
    f.write_text("")
    assert _refuse_cache(monkeypatch, f) == (
        f"FASTDEPLOY_MTP_CACHE={f} is a file, not a folder: set FASTDEPLOY_MTP_CACHE to a "
        "folder you can write to")
    msg = _refuse_cache(monkeypatch, f / "below")
    assert msg == (f"cannot create FASTDEPLOY_MTP_CACHE={f / 'below'} (Not a directory): set "
                   "FASTDEPLOY_MTP_CACHE to a folder you can write to"), msg


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to a read-only folder")
def test_a_cache_variable_naming_a_read_only_folder_is_refused(monkeypatch, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    assert _refuse_cache(monkeypatch, ro) == (
        f"cannot write to FASTDEPLOY_MTP_CACHE={ro}: make it writable or set "
        "FASTDEPLOY_MTP_CACHE to a folder you can write to")
    assert _refuse_cache(monkeypatch, ro / "sub").startswith(
        f"cannot create FASTDEPLOY_MTP_CACHE={ro / 'sub'} (Permission denied): set ")


@pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="no /sys")
def test_a_cache_variable_naming_an_unwritable_place_is_refused(monkeypatch):
    """/sys refuses new files and folders, even to root."""
    msg = _refuse_cache(monkeypatch, "/sys/fastdeploy_mtp_cache")
    assert msg.startswith("cannot create FASTDEPLOY_MTP_CACHE=/sys/fastdeploy_mtp_cache (")
    assert msg.endswith("): set FASTDEPLOY_MTP_CACHE to a folder you can write to"), msg
    msg = _refuse_cache(monkeypatch, "/sys/kernel")
    assert msg.startswith("cannot ") and "/sys/kernel" in msg, msg
    assert msg.endswith("set FASTDEPLOY_MTP_CACHE to a folder you can write to"), msg


@pytest.mark.parametrize("value, forced", [(None, False), ("", False), ("0", False),
                                           ("1", True)])
def test_the_build_variable_set_empty_and_unset(monkeypatch, value, forced):
    """1 builds from source even where a current library is installed."""
    set_env(monkeypatch, "FASTDEPLOY_MTP_BUILD", value)
    monkeypatch.setattr(_library, "_installed_is_current", lambda: True)
    monkeypatch.setattr(_library, "_import_installed", lambda: "installed")
    monkeypatch.setattr(_library, "_build_from_source", lambda: "built")
    assert _build.force_build() is forced
    assert ops.load_library.__wrapped__() == ("built" if forced else "installed")


@pytest.mark.parametrize("bad", ["yes", "true", "2", " 1"])
def test_a_bad_build_variable_is_refused_in_one_line(monkeypatch, bad):
    monkeypatch.setenv("FASTDEPLOY_MTP_BUILD", bad)
    with pytest.raises(_build.SettingError) as e:
        ops.load_library.__wrapped__()
    assert _one_line(e) == (f"FASTDEPLOY_MTP_BUILD={bad!r}: 1 builds the op library from source "
                            "even where one is installed; 0, empty or unset uses an installed "
                            "one that is current")


@pytest.mark.parametrize("value, on", [(None, False), ("", False), ("0", False),
                                       ("undefined", True)])
def test_the_sanitize_variable_set_empty_and_unset(monkeypatch, value, on):
    set_env(monkeypatch, "FASTDEPLOY_MTP_SANITIZE", value)
    assert _build.sanitizer_flags() == (list(_build.UNDEFINED_BEHAVIOUR_FLAGS) if on else [])


@pytest.mark.parametrize("bad", ["address", "1", "Undefined"])
def test_a_bad_sanitize_variable_is_refused_in_one_line(monkeypatch, bad):
    monkeypatch.setenv("FASTDEPLOY_MTP_SANITIZE", bad)
    for call in (lambda: _build.compile_flags(False), lambda: _build.source_hash(False)):
        with pytest.raises(_build.SettingError) as e:
            call()
        assert isinstance(e.value, ValueError)
        assert _one_line(e) == (f"FASTDEPLOY_MTP_SANITIZE={bad!r}: only 'undefined' is supported "
                                "(0, empty or unset: no sanitizer)")


# --- No compiler ---------------------------------------------------------------

@pytest.mark.parametrize("how", ["CXX=/nonexistent", "CC=/nonexistent", "CXX=", "PATH"])
def test_no_compiler_is_one_line_naming_it(monkeypatch, tmp_path, how, capsys):
    import sysconfig

    if how == "PATH":  # neither c++, g++ nor gcc to be found
        monkeypatch.setenv("PATH", str(tmp_path))
        for var in ("CXX", "CC"):
            monkeypatch.delenv(var, raising=False)
        cxx = sysconfig.get_config_var("CXX").split()[0]
        expected = f"{cxx} (Python's CXX) is not found on PATH"
    else:
        var, value = how.split("=")
        monkeypatch.setenv(var, value)
        expected = f"{var}={value!r} is not found"
    monkeypatch.setenv("FASTDEPLOY_MTP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_library, "_compile", lambda *a: pytest.fail("compiled"))
    with pytest.raises(_build.BuildError) as e:
        _library._build_from_source()
    msg = _one_line(e)
    assert msg.startswith(f"no C++ compiler to build the op library: {expected}"), msg
    assert "install g++" in msg
    # Nothing is left that a later process would load.
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".lock"]


def test_the_builder_s_own_failure_is_one_line_from_its_exception(monkeypatch, tmp_path):
    """Paddle's builder, run for real (in the build's own process) with no
    compiler it can call (the check for one left out): its exception becomes
    one line."""
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    monkeypatch.setenv("FASTDEPLOY_MTP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_build, "missing_compiler", lambda: None)
    with pytest.raises(_build.BuildError) as e:
        _library._build_from_source()
    msg = _one_line(e)
    assert msg.startswith("building the ") and msg.endswith(
        "failed: the compiler or linker failed (its messages are above)"), msg
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".lock"]


# --- The CUDA archs: FASTDEPLOY_MTP_CUDA_ARCH, else the visible GPUs' ---------

NVCC_13 = (75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121)  # nvcc 13's --list-gpu-arch


def _sass(*archs):
    return [f for a in archs for f in ("-gencode", f"arch=compute_{a},code=sm_{a}")]


def _ptx(*archs):
    return [f for a in archs for f in ("-gencode", f"arch=compute_{a},code=compute_{a}")]


@pytest.fixture
def archs(monkeypatch):
    """The arch flags for a setting, the GPUs visible and the archs nvcc knows."""
    def flags(value, visible=(), known=NVCC_13):
        set_env(monkeypatch, _build.ARCH_VARIABLE, value)
        monkeypatch.setattr(_build, "visible_gpu_archs", lambda: tuple(visible))
        monkeypatch.setattr(_build, "nvcc_archs", lambda: known)
        return _build.cuda_arch_flags()
    return flags


@pytest.mark.parametrize("value, flags", [
    ("8.0", _sass(80) + _ptx(80)),
    ("80", _sass(80) + _ptx(80)),
    ("80;90", _sass(80, 90) + _ptx(90)),
    ("9.0 8.0", _sass(80, 90) + _ptx(90)),
    ("8.0 8.6 9.0", _sass(80, 86, 90) + _ptx(90)),
    ("8.0,8.9;9.0 10.0", _sass(80, 89, 90, 100) + _ptx(100)),
    ("8.6+PTX 9.0", _sass(86, 90) + _ptx(86, 90)),
    ("9.0+PTX", _sass(90) + _ptx(90)),
    ("80;90;", _sass(80, 90) + _ptx(90)),
    ("10.0", _sass(100) + _ptx(100)),
    ("120", _sass(120) + _ptx(120)),
])
def test_the_arch_variable_lists_the_archs_and_the_highest_has_ptx(archs, value, flags):
    """Whatever GPU is visible: the list given is the list built."""
    assert archs(value, visible=(90,)) == flags


@pytest.mark.parametrize("value", [None, ""])
def test_an_empty_or_unset_arch_variable_builds_for_the_visible_gpus(archs, value):
    assert archs(value, visible=(90,)) == _sass(90) + _ptx(90)
    assert archs(value, visible=(80, 90)) == _sass(80, 90) + _ptx(90)
    assert archs(value, visible=(86,)) == _sass(86) + _ptx(86)
    assert archs(value, visible=(75, 89)) == _sass(89) + _ptx(89)  # sm_75 cannot run the kernels


def test_an_h200_builds_sm_90_code_and_ptx_alone(archs):
    """The flags (hence the build hash) of a machine with H200s, written out."""
    assert archs(None, visible=(90,)) == ["-gencode", "arch=compute_90,code=sm_90",
                                          "-gencode", "arch=compute_90,code=compute_90"]


def test_without_a_gpu_the_build_is_for_every_served_gpu(archs):
    """A100/A800, A10, L20/L40, H20/H800/H200, B200; those the nvcc knows, and
    PTX of the highest it knows for the rest."""
    assert _build.SERVED_ARCHS == (80, 86, 89, 90, 100)
    assert archs(None) == _sass(80, 86, 89, 90, 100) + _ptx(100)
    assert archs(None, known=(70, 75, 80, 86, 87, 89, 90)) == _sass(80, 86, 89, 90) + _ptx(90)
    assert archs(None, known=None) == _sass(80, 86, 89, 90, 100) + _ptx(100)  # nvcc silent


def test_a_visible_gpu_the_nvcc_does_not_know_gets_ptx_it_can_jit(archs):
    assert archs("", visible=(120,), known=(75, 80, 86, 89, 90)) == _ptx(90)
    assert archs("", visible=(90, 100), known=(80, 86, 89, 90)) == _sass(90) + _ptx(90)


def _arch_error(archs, value, **kw):
    with pytest.raises(_build.BuildError) as e:
        archs(value, **kw)
    return _one_line(e)


@pytest.mark.parametrize("bad", ["7.5", "75", "8.0 7.0", "9.0a", "sm_90", "compute_80", "8",
                                 "9", "8.0+ptx", "9.0+", "8.10", "1000", " ", ";", "ampere"])
def test_a_bad_arch_variable_is_refused_in_one_line(archs, bad):
    assert _arch_error(archs, bad, visible=(90,)) == (
        f"FASTDEPLOY_MTP_CUDA_ARCH={bad!r}: a list of CUDA archs of 8.0 or later, such as "
        "'8.0 8.6 9.0' or '80;90' ('+PTX' after one adds its PTX; the highest always has it); "
        "empty or unset: the visible GPUs' archs")


def test_an_arch_the_nvcc_does_not_know_is_refused_in_one_line(archs, monkeypatch):
    monkeypatch.setattr(_build, "_nvcc", lambda: "/opt/cuda/bin/nvcc")
    assert _arch_error(archs, "8.0 9.5 10.0", known=(75, 80, 86, 89, 90)) == (
        "FASTDEPLOY_MTP_CUDA_ARCH='8.0 9.5 10.0': /opt/cuda/bin/nvcc does not compile for sm_95, "
        "sm_100 (it does for sm_80, sm_86, sm_89, sm_90)")


def test_the_arch_list_is_part_of_the_cuda_build_hash(monkeypatch):
    monkeypatch.setattr(_build, "nvcc_archs", lambda: NVCC_13)
    monkeypatch.setattr(_build, "visible_gpu_archs", lambda: (90,))
    monkeypatch.delenv("PADDLE_CUDA_ARCH_LIST", raising=False)
    hashes = {}
    for value in (None, "", "9.0", "90", "8.0", "8.0 9.0", "9.0+PTX 8.0", "8.0+PTX 9.0"):
        set_env(monkeypatch, _build.ARCH_VARIABLE, value)
        hashes[value] = _build.source_hash(True)
        assert _build.cuda_arch_flags() == _build.compile_flags(True)["nvcc"][-len(
            _build.cuda_arch_flags()):]
    # The same archs hash the same; other archs differ.
    assert hashes[None] == hashes[""] == hashes["9.0"] == hashes["90"]
    assert hashes["8.0 9.0"] == hashes["9.0+PTX 8.0"]  # the highest has PTX anyway
    assert len({hashes[v] for v in ("9.0", "8.0", "8.0 9.0", "8.0+PTX 9.0")}) == 4
    # Paddle's builder adds SASS for PADDLE_CUDA_ARCH_LIST's archs.
    monkeypatch.setenv("PADDLE_CUDA_ARCH_LIST", "8.0")
    assert _build.source_hash(True) != hashes["8.0+PTX 9.0"]


def test_the_visible_gpus_come_from_paddle_else_nvidia_smi_else_none(monkeypatch, tmp_path):
    """The detection itself (no GPU here): Paddle's view where it has CUDA and
    devices, else nvidia-smi's list, else nothing."""
    import paddle

    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    monkeypatch.setattr(paddle, "is_compiled_with_cuda", lambda: False)
    assert _build._ask_gpu_archs() == []
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n[ \"$1 $2\" = '--query-gpu=compute_cap --format=csv,noheader' ] "
                   "|| exit 9\nprintf '9.0\\n8.6\\n9.0\\n'\n")
    smi.chmod(0o755)
    assert _build._ask_gpu_archs() == [86, 90]
    capability = {0: (8, 0), 1: (10, 0)}
    monkeypatch.setattr(paddle, "is_compiled_with_cuda", lambda: True)
    monkeypatch.setattr(paddle.device.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(paddle.device.cuda, "get_device_capability", lambda i: capability[i])
    assert _build._ask_gpu_archs() == [80, 100]
    monkeypatch.setattr(paddle.device.cuda, "device_count", lambda: 0)  # CUDA Paddle, no GPU
    assert _build._ask_gpu_archs() == [86, 90]
    smi.write_text("#!/bin/sh\nexit 9\n")  # a driver that fails
    assert _build._ask_gpu_archs() == []


def test_the_archs_nvcc_lists(monkeypatch, tmp_path):
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/bin/sh\n[ \"$1\" = --list-gpu-arch ] || exit 9\n"
                    "printf 'compute_75\\ncompute_80\\ncompute_90\\ncompute_100\\n'\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path.parent))
    monkeypatch.setattr(_build, "_nvcc", lambda: str(nvcc))
    assert _build.nvcc_archs() == (75, 80, 90, 100)
    monkeypatch.setattr(_build, "_nvcc", lambda: None)
    assert _build.nvcc_archs() is None
