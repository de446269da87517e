"""A child process the tests start sees what its parent sees: helpers.child_env
puts the checkout first on PYTHONPATH and keeps every folder the parent's
PYTHONPATH names after it (where Paddle comes from PYTHONPATH, a child that
lost it could not import Paddle)."""

import os
import subprocess
import sys

from helpers import CHECKOUT, child_env

SHOW = ("import json, sys, fastdeploy_mtp, only_on_the_parents_path as m; "
        "print(json.dumps([fastdeploy_mtp.__file__, m.WHERE]))")


def test_a_child_keeps_the_parents_pythonpath_behind_the_checkout(tmp_path, monkeypatch):
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "only_on_the_parents_path.py").write_text("WHERE = 'extra'\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(extra), "/nonexistent/elsewhere"]))
    front = tmp_path / "front"
    front.mkdir()
    env = child_env(str(front), FASTDEPLOY_MTP_FORM=None, MARK="1")
    assert env["PYTHONPATH"].split(os.pathsep) == [str(front), CHECKOUT, str(extra),
                                                   "/nonexistent/elsewhere"]
    assert "FASTDEPLOY_MTP_FORM" not in env and env["MARK"] == "1"
    done = subprocess.run([sys.executable, "-c", SHOW], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    package, where = __import__("json").loads(done.stdout)
    assert package == os.path.join(CHECKOUT, "fastdeploy_mtp", "__init__.py")
    assert where == "extra"


def test_no_pythonpath_in_the_parent_is_the_checkout_alone(monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert child_env()["PYTHONPATH"] == CHECKOUT


def test_every_test_gives_its_children_the_environment_from_the_helper():
    """No test sets PYTHONPATH itself (so none can replace it): each child's
    environment comes from helpers.child_env."""
    tests = os.path.join(CHECKOUT, "tests")
    setters = []
    for name in sorted(os.listdir(tests)):
        if not name.endswith(".py") or name in ("helpers.py", "test_child_env.py"):
            continue
        with open(os.path.join(tests, name)) as f:
            for number, line in enumerate(f, 1):
                if "PYTHONPATH" in line:
                    setters.append(f"{name}:{number}: {line.strip()}")
    assert not setters, setters
