"""Which op library fastdeploy_mtp.ops loads: the installed one only when it is current."""

import importlib.util
import types

import pytest

from fastdeploy_mtp import _build, ops


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
    assert ops._installed_is_current()


def test_an_install_without_a_stamp_is_not_used_in_a_checkout(installed, capsys):
    assert not ops._installed_is_current()
    assert "using a fresh build" in capsys.readouterr().err


def test_an_install_from_other_sources_or_flags_is_not_used(installed, monkeypatch):
    _build.write_install_stamp(_build.with_cuda())
    flags = _build.compile_flags
    monkeypatch.setattr(_build, "compile_flags", lambda cuda: {**flags(cuda), "cxx": ["-O0"]})
    assert not ops._installed_is_current()


def test_outside_a_checkout_the_install_is_always_used(installed, monkeypatch):
    monkeypatch.setattr(_build, "in_source_checkout", lambda: False)
    assert ops._installed_is_current()


def test_no_install_means_a_build(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert not ops._installed_is_current()


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
