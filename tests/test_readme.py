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


# The README's Python API states each op's positional order in prose; the
# order itself lives in fastdeploy_mtp/signature.py, and the prose must follow.

from fastdeploy_mtp.signature import DRAFT_MODEL_PREPROCESS, UPDATE_ATTN_MASK_OFFSETS  # noqa: E402


def readme_call(readme: str, op: str) -> tuple:
    """The argument names of the README's `op(...)` in its Python API."""
    start = readme.index(f"- `{op}(")
    args = readme[start + len(f"- `{op}("):readme.index(")`", start)]
    return tuple(a.strip() for a in args.replace("\n", " ").split(","))


def test_the_readme_states_each_op_s_positional_order_as_the_signature_table():
    text = README.read_text()
    for sig in (DRAFT_MODEL_PREPROCESS, UPDATE_ATTN_MASK_OFFSETS):
        assert readme_call(text, sig.name) == sig.input_names + sig.attr_names, sig.name


def test_the_order_check_sees_two_arguments_swapped():
    text = README.read_text().replace("seq_lens_encoder, seq_lens_decoder, step_idx",
                                      "seq_lens_decoder, seq_lens_encoder, step_idx", 1)
    names = readme_call(text, "draft_model_preprocess")
    assert names != DRAFT_MODEL_PREPROCESS.input_names + DRAFT_MODEL_PREPROCESS.attr_names
