"""The command line explains itself: help and defaults for every option, no
traceback when the reader of its output goes away, and the options reach what
they name. (A mistake in one line naming the bad value, exit 2: the command
line's rows of tests/test_hostile_input.py.)"""

import argparse
import os
import subprocess
import sys

import pytest

from fastdeploy_mtp import __main__ as cli

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
