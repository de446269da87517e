"""The command line's ranges, by behaviour: a value at either end of a
flag's documented range runs (the run is reached with that value), one past
it is refused with exit code 2, one line on stderr and no run at all. The
run itself is replaced by a stand-in that records it, so each case takes
moments and a refusal is told from a run by whether the stand-in was
reached, not by the words printed."""

import pytest

from fastdeploy_mtp import __main__ as cli
from fastdeploy_mtp.harness import simulate_cli, verdict
from fastdeploy_mtp.harness.simulate_cli import LIMITS


class Ran(Exception):
    """The stand-in for a run: raised with the arguments it was given."""


@pytest.fixture
def runs(monkeypatch):
    """Every run the command reached (simulate's loop, verdict's table)."""
    seen = []

    def reached(args, *rest, **kw):
        seen.append(args)
        raise Ran(args)

    monkeypatch.setattr(simulate_cli, "run", reached)
    monkeypatch.setattr(verdict, "main", reached)
    return seen


def outcome(argv, runs, capsys):
    """(exit code or None where the run was reached, stderr, the run's args)."""
    try:
        code = cli.main(argv)
    except Ran:
        return None, capsys.readouterr().err, runs[-1]
    return code, capsys.readouterr().err, None


SIMULATE = ["simulate", "--steps", "1", "--quiet"]
FASTDEPLOY = SIMULATE + ["--runner", "fastdeploy"]
# flag, the command before it, its range (both ends documented in --help).
RANGES = [
    ("--max-prompt", SIMULATE, 2, LIMITS["max_prompt"]),
    ("--num-model-steps", SIMULATE, 1, LIMITS["num_model_steps"]),
    ("--batch", SIMULATE, 1, LIMITS["batch"]),
    ("--max-dec-len", SIMULATE, 2, LIMITS["max_dec_len"]),
    ("--chunk", FASTDEPLOY, 0, LIMITS["max_prompt"]),
    ("--chunk", ["verdict"], 0, LIMITS["max_prompt"]),
]
IDS = [f"{' '.join(c[:1])}-{f}" for f, c, _, _ in RANGES]


@pytest.mark.parametrize("flag,command,low,high", RANGES, ids=IDS)
def test_both_ends_of_a_range_run(flag, command, low, high, runs, capsys):
    for value in (low, high):
        code, err, args = outcome(command + [flag, str(value)], runs, capsys)
        assert code is None, f"{flag} {value}: refused ({code}): {err}"
        assert getattr(args, flag[2:].replace("-", "_")) == value


@pytest.mark.parametrize("flag,command,low,high", RANGES, ids=IDS)
def test_one_past_either_end_is_refused_without_a_run(flag, command, low, high, runs, capsys):
    for value in (low - 1, high + 1):
        code, err, _ = outcome(command + [flag, str(value)], runs, capsys)
        assert code == 2 and runs == [], f"{flag} {value}: ran"
        assert err.count("\n") == 1 and flag in err and str(value) in err, err


def test_max_prompt_1_is_refused_without_a_run(runs, capsys):
    """Each prompt is 2..N tokens long (--help): with N = 1 there is no
    length to draw, and the run must not start."""
    code, err, _ = outcome(SIMULATE + ["--max-prompt", "1"], runs, capsys)
    assert (code, runs) == (2, [])
    assert err.startswith("simulate: --max-prompt") and err.count("\n") == 1, err
