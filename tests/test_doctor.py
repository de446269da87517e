"""fastdeploy-mtp doctor, run as a FastDeploy user runs it: in the
environment of FastDeploy's stand-in (tests/standin_fastdeploy) of each
version, with FD_PLUGINS as a user may spell it. One finding a line, exit 0
where the plugin will work as intended, 1 otherwise; --json for tools."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fastdeploy_mtp import doctor
from fastdeploy_mtp.harness import plugin_verdict

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "tests" / "standin_fastdeploy"


_ENTRY_POINT = []


@pytest.fixture(scope="module", autouse=True)
def entry_point(tmp_path_factory):
    """Our entry point, visible to the children whether or not the package is
    installed (the doctor's own finding on it is what a user sees)."""
    from helpers import entry_point_folder

    _ENTRY_POINT[:] = [entry_point_folder(tmp_path_factory.mktemp("entry_point"))]
    yield
    _ENTRY_POINT.clear()


def run(commit=None, fd_plugins="fastdeploy_mtp", mode=None, json_out=True):
    from helpers import child_env

    env = child_env(*_ENTRY_POINT, *([str(STANDIN)] if commit else []), FD_PLUGINS=None,
                    FASTDEPLOY_MTP_MODE=None, FASTDEPLOY_MTP_FORM=None)
    if commit:
        env["STANDIN_FASTDEPLOY_COMMIT"] = commit
    if fd_plugins is not None:
        env["FD_PLUGINS"] = fd_plugins
    if mode is not None:
        env["FASTDEPLOY_MTP_MODE"] = mode
    proc = subprocess.run([sys.executable, "-m", "fastdeploy_mtp", "doctor",
                           *(["--json"] if json_out else [])],
                          env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    return proc


def findings(proc):
    doc = json.loads(proc.stdout)
    return doc, {f["topic"]: f for f in doc["findings"]}


@pytest.mark.parametrize("commit,use", [("ba915e03e", "corrected_pr5245"),
                                        ("9018ccf74", "corrected_pr5738"),
                                        ("7a6c28781", "shadow")])
def test_each_version_gets_its_corrected_form_and_exit_0(commit, use):
    proc = run(commit)
    doc, by = findings(proc)
    assert proc.returncode == 0 and doc["ok"], proc.stdout
    assert f"our {use} ops" in by["form"]["line"] and "corrected mode" in by["form"]["line"]
    assert by["FD_PLUGINS"]["status"] == "ok"
    assert "with the plugin (corrected mode) every row of the verdict is exact" in \
        by["verdict"]["line"]


def test_exact_mode_is_said_with_the_drift_it_keeps():
    doc, by = findings(run("ba915e03e", mode="exact"))
    assert "exact mode" in by["form"]["line"] and "our pr5245 ops" in by["form"]["line"]
    assert by["verdict"]["status"] == "warn" and "exact keeps the drift" in by["verdict"]["line"]


@pytest.mark.parametrize("value,said", [
    (None, "is not set"),
    ("fastdeploy-mtp", "'fastdeploy-mtp'"),          # the console script's spelling
    ("other, fastdeploy_mtp", "' fastdeploy_mtp'"),  # FastDeploy trims nothing
    ("FastDeploy_MTP", "'FastDeploy_MTP'"),
    ("another_plugin", "does not name fastdeploy_mtp"),
])
def test_a_misspelled_fd_plugins_fails_with_what_is_wrong(value, said):
    proc = run("9018ccf74", fd_plugins=value)
    doc, by = findings(proc)
    assert proc.returncode == 1 and not doc["ok"]
    assert by["FD_PLUGINS"]["status"] == "fail" and said in by["FD_PLUGINS"]["line"], by


def test_an_unknown_signature_fails():
    proc = run("52eda7fdb")
    doc, by = findings(proc)
    assert proc.returncode == 1 and by["form"]["status"] == "fail"
    assert "leaves FastDeploy's ops in place" in by["form"]["line"]


def test_without_fastdeploy_it_says_where_to_run_it():
    proc = run(None, json_out=False)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert any(ln.startswith("fail  FastDeploy: FastDeploy is not importable here") for ln in lines)
    assert lines[-1].startswith("doctor: the plugin will NOT work as intended")
    assert "Traceback" not in proc.stderr


def test_the_shipped_words_are_the_verdict_table_s():
    """Each version the doctor names drifts in some row of the table with the
    plugin as shipped, and in none with it; and under chunked prefill, as its
    words say."""
    from test_verdict import plugin_rows

    rows = plugin_rows()
    assert set(doctor.SHIPPED) == set(plugin_verdict.VERSIONS)
    for form, words in doctor.SHIPPED.items():
        mine = {key: [c.strip() for c in line.split("|")[1:-1]] for key, line in rows.items()
                if key[0] == f"{plugin_verdict.VERSIONS[form]} ({form})"}
        drifting = {key for key, cells in mine.items() if cells[4:7] != ["0", "0", "0"]}
        chunked = {key for key in drifting if key[3] == "chunks-8"}
        assert chunked and ("chunked prefill" in words), form
        k2 = {key for key in drifting if key[3] == "whole" and key[2] != "1"}
        assert bool(k2) == ("from k = 2" in words), (form, sorted(k2))


def test_an_uninstalled_package_is_a_failed_finding_that_says_to_install_it(monkeypatch):
    """Where FastDeploy's loader would not find our entry point (the package
    not installed in its environment, or another package's only), the
    finding fails and says how to install it."""
    import importlib.metadata as metadata

    class Other:
        name, value = "another_plugin", "another.module:register"

    monkeypatch.setattr(metadata, "entry_points", lambda **kw: [Other()])
    got = doctor._entry_point()
    assert got.status == "fail" and got.topic == "entry point", got
    assert "install the package in FastDeploy's environment" in got.line, got


def test_the_corrected_mode_says_whether_each_patch_fits_fastdeploy_s_code():
    """The stand-in's proposer is no FastDeploy method a patch was read at:
    each patch is a warn line saying FastDeploy's own method stays (and the
    plugin still works); the exact mode installs no patch and says none."""
    doc, _ = findings(run("9018ccf74"))
    lines = [f for f in doc["findings"] if f["topic"] == "patch"]
    names = {re.match(r"(.+?) (will not apply|not applied): ", f["line"]).group(1)
             for f in lines}
    assert names == {"chunk-next-token (insert)", "chunk-next-token (preprocess)",
                     "chunk-next-token-v0 (insert)", "chunk-next-token-v0 (chunk)"}, lines
    assert all(f["status"] == "warn" and f["line"].endswith("FastDeploy's own method stays")
               for f in lines), lines
    assert doc["ok"]
    doc, _ = findings(run("9018ccf74", mode="exact"))
    assert not [f for f in doc["findings"] if f["topic"] == "patch"]


SRC = os.environ.get("FASTDEPLOY_SRC", "")


@pytest.mark.skipif(not SRC, reason="FASTDEPLOY_SRC names no FastDeploy checkout")
def test_each_patch_of_the_checkout_s_form_fits_its_code():
    """At a FastDeploy commit a patch was read at, the doctor says ok for
    every patch the plugin would install there."""
    from fastdeploy_mtp.plugin import patches

    package = Path(SRC) / "fastdeploy"
    forms = {f for p in patches._all() for f in p.forms}
    fitting = {form: doctor._patches((form,), str(package)) for form in forms}
    ok = [form for form, found in fitting.items()
          if found and all(f.status == "ok" for f in found)]
    assert ok, fitting
