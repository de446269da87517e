"""The command line behaves as a program should: help and defaults for every
option, the options reach what they name, and its exit codes (0 done, 1 a run
that FAILED its check, 2 a mistake or a missing piece said in one line on
stderr, 130 interrupted) hold for the process itself: no traceback for a
missing Paddle, a library that cannot be built, Ctrl-C, an unwritable --plot
or a reader that goes away, and a traceback still for a bug; FASTDEPLOY_MTP_FORM
(fastdeploy_mtp.ops' form) changes no command. Also its packaging: --version, the console script, the licence,
py.typed and the changelog. (Each option's own mistakes: the command line's
rows of tests/test_hostile_input.py.)"""

import argparse
import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest
from helpers import NO_PADDLE, child_env

import fastdeploy_mtp
from fastdeploy_mtp import __main__ as cli
from fastdeploy_mtp.signature import FORMS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _subcommands():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, sub.choices


def test_every_command_is_listed_with_a_line_of_help():
    parser, commands = _subcommands()
    listed = {a.dest: a.help for a in next(a for a in parser._actions
                                           if isinstance(a, argparse._SubParsersAction))._choices_actions}
    assert set(listed) == set(commands) == set(cli.COMMANDS)
    assert all(text and len(text) > 20 for text in listed.values()), listed


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_option_has_help_that_shows_its_default(name):
    _, commands = _subcommands()
    sub = commands[name]
    shown = sub.format_help()
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{name} {action.option_strings}: no help text"
        default = action.default
        if default is None or default is False:
            continue  # a flag off, or a default the help text itself describes
        value = " ".join(map(str, default)) if isinstance(default, list) else str(default)
        text = " ".join(sub._get_formatter()._get_help_string(action).split())
        assert text.endswith(f"(default: {value})"), (name, action.option_strings, text)
        assert f"(default: {value})" in " ".join(shown.split()), (name, action.option_strings)


def test_the_help_shows_a_zero_default_as_a_default():
    """0 and 0.0 are defaults to show, not 'no default' (0 == False)."""
    _, commands = _subcommands()
    shown = " ".join(commands["simulate"].format_help().split())
    assert "seed of the workload and the model (default: 0)" in shown
    assert "(bidirectional mask) (default: 0.0)" in shown


def test_help_exits_0_and_prints_the_usage(capsys):
    assert cli.main(["simulate", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m fastdeploy_mtp simulate") and "--draft-eos-prob" in out


def test_a_closed_pipe_ends_the_run_without_a_traceback():
    """`simulate | head -1`: the reader goes after one line. The run has far
    more to print than a pipe holds, so it must meet the closed pipe."""
    proc = subprocess.Popen([sys.executable, "-m", "fastdeploy_mtp", "simulate", "--steps",
                             "20000"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=300)
    assert first.startswith(b"simulate: mode mixed"), first
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code == 128 + 13, (code, err)  # as a process ended by SIGPIPE


def test_the_rounds_and_batch_sizes_reach_every_gpu_table(monkeypatch):
    from fastdeploy_mtp import devices
    from fastdeploy_mtp.bench import gpu as gpu_bench

    calls = []
    monkeypatch.setattr(devices, "gpu_problem", lambda what: None)
    monkeypatch.setattr(gpu_bench, "run", lambda bsz, calls_, rounds: calls.append(("run", bsz,
                                                                                   rounds)))
    monkeypatch.setattr(gpu_bench, "graph_table",
                        lambda bsz, rounds, **kw: calls.append(("graph", bsz, rounds)))
    assert cli.main(["bench-gpu", "--rounds", "3"]) == 0
    assert [c[2] for c in calls] == [3, 3, 3, 3]
    assert calls[0][1] == gpu_bench.CALL_BSZ
    assert [c[1] for c in calls[1:]] == [gpu_bench.GRAPH_BSZ, gpu_bench.LONG_PROMPT_BSZ,
                                         gpu_bench.GRAPH_BSZ]
    calls.clear()
    assert cli.main(["bench-gpu", "--rounds", "2", "--bsz", "5", "6", "--graph-only"]) == 0
    assert calls == [("graph", [5, 6], 2)] * 3


def test_bench_takes_its_rounds(capsys):
    assert cli.main(["bench", "--device", "cpu", "--bsz", "1", "--repeat", "1",
                     "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    assert "per-call medians of 2 rounds of 1 op calls" in out
    assert "insert 256 requests" in out



# ---------------------------------------------------------------------------
# The process: one line and exit 2 for what the user can fix, 130 for Ctrl-C


def _env(*front):
    """The environment of a child process: this checkout (and `front`, a
    folder with a sitecustomize.py) first on its path."""
    return child_env(*front)


def _program(argv, env=None, prelude=None, timeout=300):
    """`python -m fastdeploy_mtp ARGV` (after the Python statements `prelude`,
    in the same process, where given): (exit code, stdout, stderr)."""
    if prelude is None:
        command = [sys.executable, "-m", "fastdeploy_mtp", *argv]
    else:
        run = ("import runpy, sys\n" + textwrap.dedent(prelude)
               + "\nsys.argv = ['fastdeploy_mtp', *sys.argv[1:]]\n"
               "runpy.run_module('fastdeploy_mtp', run_name='__main__', alter_sys=True)\n")
        command = [sys.executable, "-c", run, *argv]
    done = subprocess.run(command, cwd=REPO, env=env or _env(), capture_output=True, text=True,
                          timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def _one_line(err: str, start: str) -> None:
    assert "Traceback" not in err, err
    assert err.count("\n") == 1 and err.startswith(start), err



@pytest.mark.parametrize("argv", [
    ["simulate", "--steps", "2"],
    ["check", "--form", "rollback"],
    ["check"],  # every form, each in a child process: the first child's line, once
    ["bench", "--device", "cpu", "--bsz", "1", "--repeat", "1", "--rounds", "1"],
    ["bench"],  # asks Paddle whether a GPU is there
    ["bench-sim"],
    ["bench-gpu"],
])
def test_without_paddle_a_command_says_what_to_install(tmp_path, argv):
    (tmp_path / "sitecustomize.py").write_text(NO_PADDLE)
    code, _, err = _program(argv, env=_env(str(tmp_path)))
    assert code == 2, (code, err)
    assert err == cli.ERROR + cli.PADDLE_MISSING + "\n", err
    assert 'pip install -e ".[cpu]"' in err and "paddlepaddle-gpu" in err


def test_without_paddle_the_help_version_and_signature_still_work(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(NO_PADDLE)
    env = _env(str(tmp_path))
    assert _program(["--help"], env=env)[0] == 0
    assert _program(["simulate", "--help"], env=env)[0] == 0
    assert _program(["--version"], env=env)[:2] == (0, f"fastdeploy_mtp {fastdeploy_mtp.__version__}\n")
    code, out, err = _program(["signature"], env=env)
    assert code == 0 and "matches" in out, (code, out, err)


# The loader's refusal (a missing compiler, an unusable cache folder, ...),
# raised where the op library is loaded, as the loader raises it.
BUILD_ERROR = """
from fastdeploy_mtp import _build, _library

def refuse():
    raise _build.BuildError("no C++ compiler found: install g++, or name one in CXX")

_library._build_from_source = refuse
_library._installed_is_current = lambda: False
"""


@pytest.mark.parametrize("argv", [["simulate", "--steps", "2"], ["check", "--form", "recompute"],
                                  ["bench", "--device", "cpu", "--bsz", "1", "--repeat", "1",
                                   "--rounds", "1"]])
def test_a_library_that_cannot_be_built_is_one_line_and_exit_2(argv):
    code, _, err = _program(argv, prelude=BUILD_ERROR)
    assert code == 2, (code, err)
    assert err == ("fastdeploy_mtp: error: no C++ compiler found: install g++, or name one "
                   "in CXX\n"), err


def test_a_build_error_of_several_lines_is_still_one(monkeypatch, capsys):
    from fastdeploy_mtp import _build, ops

    def refuse():
        raise _build.BuildError("the cache folder /x is not writable:\n  make it so, or set "
                                "FASTDEPLOY_MTP_CACHE")

    monkeypatch.setattr(ops, "load_library", refuse)
    assert cli.main(["check", "--form", "rollback"]) == 2
    err = capsys.readouterr().err
    assert err == ("fastdeploy_mtp: error: the cache folder /x is not writable: make it so, or "
                   "set FASTDEPLOY_MTP_CACHE\n"), err


@pytest.mark.parametrize("error", ["RuntimeError('a bug')",
                                   "ModuleNotFoundError('No module named \"numpy.nope\"', "
                                   "name='numpy.nope')"])
def test_a_bug_keeps_its_traceback(error):
    """Only what a user can fix is one line: anything else is a bug to report."""
    code, _, err = _program(["simulate", "--steps", "2"], prelude=f"""
from fastdeploy_mtp import _library

def broken():
    raise {error}

_library._build_from_source = broken
_library._installed_is_current = lambda: False
""")
    assert code == 1 and "Traceback" in err, (code, err)


# Every command, with arguments that keep it short; its output does not
# depend on FASTDEPLOY_MTP_FORM (the benchmarks' times do vary: only their
# exit codes are compared).
EVERY_COMMAND = {
    "check": ["check"],
    "check-one": ["check", "--form", "recompute"],
    "signature": ["signature"],
    "simulate": ["simulate", "--steps", "3", "--quiet"],
    "simulate-pd": ["simulate", "--steps", "3", "--quiet", "--mode", "pd", "--form", "rollback"],
    "simulate-fd": ["simulate", "--steps", "3", "--quiet", "--runner", "fastdeploy", "--form",
                    "pr5738"],
    "simulate-fd-pd": ["simulate", "--steps", "3", "--quiet", "--runner", "fastdeploy", "--mode",
                       "pd", "--form", "shadow"],
    "verdict": ["verdict", "--form", "shadow", "--role", "mixed", "-k", "1"],
    "reproduce": ["reproduce", "pr5738"],
    "bench": ["bench", "--device", "cpu", "--bsz", "1", "--repeat", "1", "--rounds", "1"],
    "bench-sim": ["bench-sim"],
    "bench-gpu": ["bench-gpu", "--bsz", "1", "--calls", "1", "--rounds", "1", "--graph-only"],
}
TIMED = {"bench", "bench-sim", "bench-gpu"}
# Every form but the default, and no form at all; a command that takes seconds
# a run, under a form of 22 tensors and under no form.
FORM_VALUES = [*(f for f in FORMS if f != "rollback"), "nope"]
SLOW = {"verdict": ["pr5738", "nope"]}


def _run_in_process(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", sorted(EVERY_COMMAND))
def test_no_command_reads_the_form_variable(name, monkeypatch, capsys):
    """The command line's forms are its --form options and their defaults:
    FASTDEPLOY_MTP_FORM, another form's name or none, changes no command's
    output or exit code, and no command asks for the process's form."""
    from fastdeploy_mtp import ops

    argv = EVERY_COMMAND[name]
    if name == "bench-sim":  # its simulations as short as they go: the path is what counts
        from fastdeploy_mtp.bench import cpu as cpu_bench

        monkeypatch.setattr(cpu_bench.simulator_bench, "__defaults__", (2, 2, 3, 0.5))
    monkeypatch.delenv("FASTDEPLOY_MTP_FORM", raising=False)
    want = _run_in_process(argv, capsys)
    assert "Traceback" not in want[2], want
    if name not in ("bench-gpu", "reproduce"):
        assert want[0] == 0, want
    asked = []
    real = ops.process_form
    monkeypatch.setattr(ops, "process_form", lambda: asked.append(1) or real())
    # A timed command's output varies: its exit code, under a bad value, is
    # what is compared.
    for value in ["nope"] if name in TIMED else SLOW.get(name, FORM_VALUES):
        monkeypatch.setenv("FASTDEPLOY_MTP_FORM", value)
        got = _run_in_process(argv, capsys)
        if name in TIMED:
            assert got[0] == want[0], (value, got)
        else:
            assert got[:2] == want[:2], (value, got)
        assert "FASTDEPLOY_MTP_FORM" not in got[2], (value, got)
    assert not asked, f"{name} asked for the process's form"


def test_the_form_variable_leaves_the_default_simulation_whole():
    """As a user meets it: the variable set to a form of another signature
    changes nothing in `simulate`'s output, and no traceback."""
    want = _program(["simulate", "--steps", "3"])
    for value in ("pr5738", "nope"):
        got = _program(["simulate", "--steps", "3"], env=dict(_env(), FASTDEPLOY_MTP_FORM=value))
        assert got == want, (value, got)
    assert want[0] == 0 and "Traceback" not in want[2], want


def test_a_bad_form_variable_refuses_the_wrappers_it_chooses_in_one_line(monkeypatch):
    """What the variable chooses, fastdeploy_mtp.ops' wrappers, refuses a
    bad value with one line (a ValueError naming the forms)."""
    from fastdeploy_mtp import ops

    monkeypatch.setenv("FASTDEPLOY_MTP_FORM", "nope")
    for name in FORMS["rollback"]:
        with pytest.raises(ValueError) as refused:
            getattr(ops, name)
        text = str(refused.value)
        assert "\n" not in text and text.startswith("FASTDEPLOY_MTP_FORM='nope': "), text
        assert ", ".join(FORMS) in text, text


def _start(argv, env=None, prelude=None):
    """The program as a terminal starts it: SIGINT at its default (a test
    runner may have it ignored), in a process group of its own, for a
    terminal's Ctrl-C to reach every process in it."""
    def child():
        os.setpgrp()
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    command = ([sys.executable, "-m", "fastdeploy_mtp", *argv] if prelude is None else
               [sys.executable, "-c", "import runpy, sys\n" + textwrap.dedent(prelude)
                + "\nsys.argv = ['fastdeploy_mtp', *sys.argv[1:]]\n"
                "runpy.run_module('fastdeploy_mtp', run_name='__main__', alter_sys=True)\n",
                *argv])
    return subprocess.Popen(command, cwd=REPO, env=env or _env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=child)


def test_ctrl_c_is_one_line_and_exit_130():
    proc = _start(["simulate", "--steps", "100000"])
    first = proc.stdout.readline()
    # Into the loop (a step's row is out), past Paddle's import: a signal
    # inside an extension module's initialisation may be taken for its failure.
    line = b" "
    while line and not re.match(rb"\s+\d+\s+\d+\s", line):
        line = proc.stdout.readline()
    assert line, "the run ended before its first step"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert first.startswith(b"simulate: mode mixed"), first
    assert proc.returncode == 130, (proc.returncode, err)
    assert err.decode() == "fastdeploy_mtp: interrupted\n", err


# The check of a form says so and then takes its time.
SLOW_CHECK = """\
import time

import fastdeploy_mtp.registration as registration


def waiting(form, print_fn=print):
    print("check waiting", flush=True)
    time.sleep(600)
    return []


registration.check_all = waiting
"""


def test_ctrl_c_during_check_of_every_form_is_one_line_and_exit_130(tmp_path):
    """A terminal's Ctrl-C during `check`: one line, exit 130, and no
    further form checked."""
    (tmp_path / "sitecustomize.py").write_text(SLOW_CHECK)
    env = dict(_env(str(tmp_path)))
    env.pop("FASTDEPLOY_MTP_FORM", None)
    proc = _start(["check"], env=env)
    lines = []
    while not lines or lines[-1] != b"check waiting\n":
        lines.append(proc.stdout.readline())
        assert lines[-1], lines
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, err)
    assert err.decode() == "fastdeploy_mtp: interrupted\n", err
    assert b"the recompute form" not in b"".join(lines) + out  # stopped at the first form


def test_an_unwritable_plot_is_refused_before_the_run():
    """os.access says root may write in /proc; only writing tells."""
    pytest.importorskip("matplotlib")
    code, out, err = _program(["simulate", "--steps", "2", "--plot", "/proc/x.png"])
    assert code == 2 and out == "", (code, out, err)
    _one_line(err, "simulate: --plot /proc/x.png: cannot write there")


def test_a_writable_plot_place_is_left_as_it_was(tmp_path):
    pytest.importorskip("matplotlib")
    from fastdeploy_mtp.harness.simulate_cli import plot_problem

    there = tmp_path / "old.png"
    there.write_bytes(b"an older plot")
    assert plot_problem(str(there)) is None and plot_problem(str(tmp_path / "new.png")) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.png"]
    assert there.read_bytes() == b"an older plot"


# ---------------------------------------------------------------------------
# check: what it builds, and why, before it builds


def test_check_says_what_it_builds_and_checks_every_form(monkeypatch, capsys):
    from fastdeploy_mtp import registration

    checked = []

    def check_all(form, print_fn=print):
        checked.append((form, capsys.readouterr().out))
        return []

    monkeypatch.setattr(registration, "check_all", check_all)
    assert cli.main(["check"]) == 0
    assert [form for form, _ in checked] == list(FORMS)
    said = checked[0][1]
    assert said.startswith("check: the op library holds every form's ops; the first use builds "
                           "it, once\n"), said
    assert said.endswith("== the rollback form\n")
    assert [out for _, out in checked[1:]] == [f"== the {f} form\n" for f in list(FORMS)[1:]]
    assert capsys.readouterr().out == ("registration matches fastdeploy_mtp/signature.py "
                                       f"({', '.join(FORMS)})\n")


def test_check_stops_at_a_library_that_cannot_be_built(monkeypatch, capsys):
    from fastdeploy_mtp import _build, registration

    checked = []

    def check_all(form, print_fn=print):
        checked.append(form)
        raise _build.BuildError("no C++ compiler")

    monkeypatch.setattr(registration, "check_all", check_all)
    assert cli.main(["check"]) == 2
    assert checked == ["rollback"]
    assert capsys.readouterr().err == "fastdeploy_mtp: error: no C++ compiler\n"


def test_check_of_every_form_fails_if_one_does_and_checks_them_all(monkeypatch, capsys):
    from fastdeploy_mtp import registration

    checked = []
    monkeypatch.setattr(registration, "check_all",
                        lambda form, print_fn=print: checked.append(form)
                        or (["a difference"] if form == "recompute" else []))
    assert cli.main(["check"]) == 1
    assert checked == list(FORMS)
    assert "1 difference(s)" in capsys.readouterr().out


# ---------------------------------------------------------------------------
# Packaging: one version, the console script, licence, py.typed, changelog


def _pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def test_version_prints_the_package_version():
    code, out, err = _program(["--version"])
    assert (code, out, err) == (0, f"fastdeploy_mtp {fastdeploy_mtp.__version__}\n", "")
    assert re.fullmatch(r"\d+\.\d+\.\d+", fastdeploy_mtp.__version__)


def test_the_version_has_one_source():
    """pyproject.toml names no version of its own: setuptools reads
    fastdeploy_mtp.__version__, so a checkout and the wheel built from it
    cannot disagree (.ci/check_wheel.sh compares the wheel's metadata)."""
    project = _pyproject()
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "fastdeploy_mtp.__version__"}


def test_the_console_script_is_the_program():
    entry = _pyproject()["project"]["scripts"]["fastdeploy-mtp"]
    module, name = entry.split(":")
    script = f"import sys; from {module} import {name} as main; sys.exit(main())"

    def console(*argv):
        done = subprocess.run([sys.executable, "-c", script, *argv], cwd=REPO, env=_env(),
                              capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr

    assert console("--version") == _program(["--version"])
    code, out, err = console("simulate", "--steps", "2", "--quiet")
    assert code == 0 and out.endswith("OK: the mask offsets stayed right\n"), (code, out, err)
    code, _, err = console("bogus")
    assert code == 2 and err.startswith("fastdeploy-mtp: argument COMMAND: invalid choice"), err
    code, out, _ = console("--help")
    assert code == 0 and out.startswith("usage: fastdeploy-mtp ")


def test_the_licence_py_typed_and_changelog_ship():
    project = _pyproject()
    assert project["project"]["license"] == "Apache-2.0"
    assert project["project"]["license-files"] == ["LICENSE"]
    with open(os.path.join(REPO, "LICENSE")) as f:
        text = " ".join(f.read().split())
    assert text.startswith("Apache License Version 2.0, January 2004 "
                           "http://www.apache.org/licenses/ TERMS AND CONDITIONS")
    assert "END OF TERMS AND CONDITIONS" in text
    assert os.path.isfile(os.path.join(REPO, "fastdeploy_mtp", "py.typed"))
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["fastdeploy_mtp"]
    with open(os.path.join(REPO, "CHANGELOG.md")) as f:
        releases = re.findall(r"^## \[([^\]]+)\] - (\d{4}-\d{2}-\d{2})$", f.read(), re.M)
    assert releases and releases[0][0] == fastdeploy_mtp.__version__, releases


def test_the_install_hints_are_the_readmes():
    """Each hint's checkout command is one the README or the usage page
    gives, for an extra that installs what the hint says is missing."""
    from fastdeploy_mtp.harness.simulate_cli import MATPLOTLIB_MISSING

    readme = ""
    for page in ("README.md", os.path.join("docs", "usage.md")):
        with open(os.path.join(REPO, page)) as f:
            readme += f.read()
    extras = _pyproject()["project"]["optional-dependencies"]
    for hint, package in ((cli.PADDLE_MISSING, "paddlepaddle"), (MATPLOTLIB_MISSING, "matplotlib")):
        command = re.search(r'pip install -e "\.\[(\w+)\]"', hint)
        assert command and command.group(0) in readme, hint
        assert any(d.split("=")[0].strip() == package for d in extras[command.group(1)]), hint
        assert f"pip install {package}" in hint, hint


# ---------------------------------------------------------------------------
# For tools and CI: --json, the verdict's progress, each default said once


@pytest.mark.parametrize("argv", [
    ["--steps", "3"],
    ["--steps", "30", "--without-fix", "--draft-model", "tiny"],
    ["--steps", "3", "--runner", "fastdeploy", "--form", "pr5738", "--mode", "pd"],
])
def test_simulate_json_is_one_document_with_the_text_s_result(argv, capsys):
    import json

    code = cli.main(["simulate", "--quiet", *argv])
    text = capsys.readouterr().out
    assert cli.main(["simulate", "--json", *argv]) == code
    out = capsys.readouterr().out
    doc = json.loads(out)  # the whole of stdout: nothing else is mixed in
    assert doc["command"] == "simulate" and doc["ok"] == (code == 0)
    assert doc["options"]["steps"] == int(argv[1])
    v = doc["violations"]
    assert (f"{doc['tokens_checked']} tokens checked, {v['total']} violations "
            f"({v['mask_offsets']} mask offsets, {v['alignment']} alignment)") in text
    assert doc["failures"] == ([] if code == 0 else
                               text.splitlines()[-1][len("FAILED: "):].split("; "))
    if doc["draft_model"] is not None:
        assert f"{doc['draft_model']['disagreements']} disagreements" in text
    if "fastdeploy" in argv:
        assert doc["fastdeploy_writes_outside"]["total"] == 0 and doc["options"]["form"] == "pr5738"


def test_verdict_json_and_its_progress_on_stderr(capsys):
    import json

    from fastdeploy_mtp.harness import verdict

    argv = ["verdict", "--form", "pr5245", "shadow", "--role", "pd", "-k", "2"]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    table = out.splitlines()
    progress = [ln for ln in err.splitlines() if ln.startswith("verdict: ")]
    assert [re.sub(r"took \d+\.\d s", "took T", ln) for ln in progress[:2]] == [
        "verdict: row 1/2 (pr5245, pd, k 2) took T", "verdict: row 2/2 (shadow, pd, k 2) took T"]
    assert re.fullmatch(r"verdict: 2 rows in \d+ s", progress[2]), progress
    assert "\n".join(table[:2]) == verdict.HEADER and len(table) == 4
    assert cli.main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["command"] == "verdict" and doc["workload"]["steps"] == 60
    assert [verdict.table_row(r) for r in doc["rows"]] == table[2:]
    assert [(r["form"], r["role"], r["k"]) for r in doc["rows"]] == [("pr5245", "pd", 2),
                                                                    ("shadow", "pd", 2)]
    assert doc["rows"][0]["mask_violations"] > 0 and doc["rows"][1]["mask_violations"] == 0
    assert len([ln for ln in err.splitlines() if ln.startswith("verdict: ")]) == 3


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_the_help_says_each_default_once(name):
    """The formatter adds each option's default: no help text says it too."""
    _, commands = _subcommands()
    sub = commands[name]
    shown = " ".join(sub.format_help().split())
    for action in sub._actions:
        text = " ".join(sub._get_formatter()._get_help_string(action).split()) \
            if action.help else ""
        assert text.lower().count("default") <= 1, (name, action.option_strings, text)
        if text.endswith(")") and "(default: " in text:
            assert shown.count(text[text.rindex("(default: "):]) >= 1


def test_plot_with_fastdeploy_s_runner_is_refused_before_the_run():
    """Its run without the fix would be the run with it: FastDeploy's runner
    inserts and presets by its own rules either way."""
    code, out, err = _program(["simulate", "--runner", "fastdeploy", "--plot", "x.png"])
    assert code == 2 and out == "", (code, out, err)
    _one_line(err, "simulate: --plot draws our runner with and without the fix; FastDeploy's "
                   "runner has no run without it")
    assert not os.path.exists(os.path.join(REPO, "x.png"))
