"""The README's word on the command line agrees with the code: a flag added
to the simulator, or dropped from it, must change its options paragraph too."""

import argparse
import re
from pathlib import Path

from fastdeploy_mtp import simulate_cli

README = Path(__file__).resolve().parent.parent / "README.md"


def simulate_flags() -> set:
    p = argparse.ArgumentParser()
    simulate_cli.add_arguments(p)
    return {s for a in p._actions for s in a.option_strings if s.startswith("--") and s != "--help"}


def unlisted_and_unknown(readme: str) -> tuple:
    """The flags the README's options paragraph lacks, and those it names that
    the simulator does not have."""
    start = readme.index("\nOptions: ")
    paragraph = readme[start:readme.index("\n\n", start + 1)]
    listed = set(re.findall(r"`(--[a-z-]+)", paragraph))
    flags = simulate_flags()
    return sorted(flags - listed), sorted(listed - flags)


def test_the_readme_lists_every_simulate_flag_and_no_other():
    assert unlisted_and_unknown(README.read_text()) == ([], [])


def test_the_check_sees_a_flag_left_out_and_one_made_up():
    text = README.read_text()
    assert unlisted_and_unknown(text.replace("`--graphs`, ", "", 1)) == (["--graphs"], [])
    assert unlisted_and_unknown(text.replace("`--quiet`", "`--quiet`, `--fast`", 1)) == \
        ([], ["--fast"])
