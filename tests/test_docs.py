"""The docs agree with the code where they restate it: the README's simulate
options and each op's positional order, and docs/contract.md's inputs,
dtypes, written marks and attributes, against the parser and
fastdeploy_mtp/signature.py; the mutation counts against tests/mutate.py; and
docs/step_by_hand.md and each `$ python -m fastdeploy_mtp` command of the
README and docs/results.md print what they show. A change to one must change
the other."""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import child_env

from fastdeploy_mtp.harness import simulate_cli

README = Path(__file__).resolve().parent.parent / "README.md"
USAGE = README.parent / "docs" / "usage.md"


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


def test_the_usage_page_lists_every_simulate_flag_and_no_other():
    assert unlisted_and_unknown(USAGE.read_text()) == ([], [])


def test_the_check_sees_a_flag_left_out_and_one_made_up():
    text = USAGE.read_text()
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


def test_the_usage_page_states_each_op_s_positional_order_as_the_signature_table():
    text = USAGE.read_text()
    for sig in (DRAFT_MODEL_PREPROCESS, UPDATE_ATTN_MASK_OFFSETS):
        assert readme_call(text, sig.name) == sig.input_names + sig.attr_names, sig.name
    pre = DRAFT_MODEL_PREPROCESS
    assert f"{len(pre.inputs)} tensors then {len(pre.attrs)} attributes" in text
    assert f"Writes {len(pre.written)} of the tensors in place" in text


def test_the_preprocess_wrapper_s_help_counts_the_written_tensors_as_the_table_does():
    from fastdeploy_mtp import ops

    n = len(DRAFT_MODEL_PREPROCESS.written)
    assert f"Writes the {n} tensors marked written" in ops.draft_model_preprocess.__doc__


def test_the_order_check_sees_two_arguments_swapped():
    text = USAGE.read_text().replace("seq_lens_encoder, seq_lens_decoder, step_idx",
                                      "seq_lens_decoder, seq_lens_encoder, step_idx", 1)
    names = readme_call(text, "draft_model_preprocess")
    assert names != DRAFT_MODEL_PREPROCESS.input_names + DRAFT_MODEL_PREPROCESS.attr_names


# docs/contract.md states each op's inputs with their dtypes and which are
# written; the table in signature.py is the source, and the page must agree.

CONTRACT = README.parent / "docs" / "contract.md"
DTYPES = {"int64": np.int64, "int32": np.int32, "bool": np.bool_, "any dtype": None}


def contract_preprocess_table(text: str) -> list:
    """(index, name, dtype, written) of each row of draft_model_preprocess's table."""
    section = text[text.index("## draft_model_preprocess"):text.index("## update_attn_mask_offsets")]
    rows = re.findall(r"^\| (\d+) \| (\w+) \| ([\w ]+) \|[^|]+\|([^|]*)\|$", section, re.M)
    return [(int(i), name, DTYPES[dtype.strip()], w.strip().startswith("W"))
            for i, name, dtype, w in rows]


def contract_mask_inputs(text: str) -> list:
    """(name, dtype, written) of update_attn_mask_offsets's inputs, as its prose lists them."""
    section = text[text.index("## update_attn_mask_offsets"):]
    start = section.index("Inputs in this order:")
    prose = section[start:section.index("\n\n", start)]
    names = list(re.finditer(r"`([a-z][a-z_]*)`", prose))  # `T` and the like are not inputs
    items = []
    for k, m in enumerate(names):
        said = prose[m.end():names[k + 1].start() if k + 1 < len(names) else len(prose)]
        dtype = re.search(r"any dtype|int64|int32|bool", said)
        items.append((m.group(1), DTYPES[dtype.group(0)] if dtype else "?", "(W)" in said))
    return items


def test_the_contract_s_preprocess_table_is_the_signature_table():
    text = CONTRACT.read_text()
    rows = contract_preprocess_table(text)
    expected = [(k, t.name, t.dtype, t.written) for k, t in enumerate(DRAFT_MODEL_PREPROCESS.inputs)]
    assert rows == expected
    start = text.index("Attributes: ", text.index("## draft_model_preprocess"))
    attrs = re.findall(r"`(\w+):\s+(\w+)`", text[start:text.index("\n\n", start)])
    assert attrs == [(a.name, a.type.__name__) for a in DRAFT_MODEL_PREPROCESS.attrs]


def test_the_contract_s_mask_inputs_are_the_signature_table():
    items = contract_mask_inputs(CONTRACT.read_text())
    assert items == [(t.name, t.dtype, t.written) for t in UPDATE_ATTN_MASK_OFFSETS.inputs]


def test_the_contract_checks_see_a_dtype_a_written_mark_and_an_input_changed():
    text = CONTRACT.read_text()
    pre = [(k, t.name, t.dtype, t.written) for k, t in enumerate(DRAFT_MODEL_PREPROCESS.inputs)]
    mask = [(t.name, t.dtype, t.written) for t in UPDATE_ATTN_MASK_OFFSETS.inputs]
    for old, new in (("| 13 | accept_num | int32 |", "| 13 | accept_num | int64 |"),
                     ("| 11 | mask_rollback | int32 | [N] | W |", "| 11 | mask_rollback | int32 | [N] | |")):
        assert text.count(old) == 1
        assert contract_preprocess_table(text.replace(old, new)) != pre
    for old, new in (("`is_block_step` bool [N]", "`is_block_step` int32 [N]"),
                     ("`decode_states` int32 [N, Ds >= 1] (W)", "`decode_states` int32 [N, Ds >= 1]"),
                     ("`seq_lens_decoder` int32 [N], ", "")):
        assert text.count(old) == 1, old
        assert contract_mask_inputs(text.replace(old, new)) != mask


# The README's Python API also restates the proposer's configuration and a
# request's fields, with their defaults.

import dataclasses  # noqa: E402

from fastdeploy_mtp.proposer import ProposerConfig  # noqa: E402
from fastdeploy_mtp.slots import Request  # noqa: E402


def readme_fields(readme: str, cls: str) -> list:
    """(name, default or None) of the README's `cls(...)`; `a|b` choices read as a's."""
    start = readme.index(f"{cls}(")
    args = readme[start + len(cls) + 1:readme.index(")", start)].replace("\n", " ")
    fields = []
    for a in args.split(","):
        name, _, default = a.strip().partition("=")
        fields.append((name.strip(), default.split("|")[0].strip() or None))
    return fields


def code_fields(cls) -> list:
    def shown(f):
        return None if f.default is dataclasses.MISSING else repr(f.default).replace("'", '"')

    return [(f.name, shown(f)) for f in dataclasses.fields(cls)]


def test_the_usage_page_states_the_proposer_s_config_and_a_request_as_the_code_does():
    text = USAGE.read_text()
    assert readme_fields(text, "ProposerConfig") == code_fields(ProposerConfig)
    assert readme_fields(text, "Request") == code_fields(Request)


def test_the_fields_check_sees_a_default_changed():
    text = USAGE.read_text().replace("truncate_first_token=True", "truncate_first_token=False", 1)
    assert readme_fields(text, "ProposerConfig") != code_fields(ProposerConfig)


# docs/mutation.md's table of the planted bugs, and docs/development.md's counts of them
# by device, restate tests/mutate.py's set: a mutation added or retired must
# show in both.

import collections  # noqa: E402

import mutate  # noqa: E402

MUTATION_PAGE = README.with_name("docs") / "mutation.md"
DEVELOPMENT = README.with_name("docs") / "development.md"


def stated_mutation_counts(page: str, readme: str) -> dict:
    """What the docs say: the page's total, each row's count by the files it
    names, and docs/development.md's count for each of mutate.py's devices."""
    counts = {"total": int(re.search(r"## The set \((\d+) mutations\)", page).group(1))}
    table = page.split("## The set", 1)[1].split("\n## ", 1)[0]
    for line in table.splitlines():
        if line.startswith("| `"):
            cells = line.split("|")
            files = tuple(f.rsplit("/", 1)[-1] for f in re.findall(r"`([^`]+)`", cells[1])
                          if re.fullmatch(r"[\w./]+\.\w+", f))
            counts[files] = int(cells[2])
    words = " ".join(readme.split())
    counts["cpu"] = int(re.search(r"each of (\d+) realistic bugs", words).group(1))
    cuda, loop, paddle2 = re.search(r"`--device gpu` plants the CUDA driver's (\d+), (\d+) in "
                                    r"the loop replayed from CUDA graphs, and (\d+) in a check "
                                    r"only Paddle 2 compiles", words).groups()
    counts["gpu"] = int(cuda) + int(loop) + int(paddle2)
    counts["gpu2"] = int(re.search(r"`--device gpu2` the (\d+)", words).group(1))
    return counts


def actual_mutation_counts(rows) -> dict:
    by_file = collections.Counter(m.path.rsplit("/", 1)[-1] for m in mutate.MUTATIONS)
    counts = {"total": len(mutate.MUTATIONS)}
    counts.update({files: sum(by_file[f] for f in files) for files in rows})
    counts.update(collections.Counter(m.device for m in mutate.MUTATIONS))
    return counts


def mutation_docs_mismatch(page: str, readme: str) -> dict:
    stated = stated_mutation_counts(page, readme)
    rows = [k for k in stated if isinstance(k, tuple)]
    actual = actual_mutation_counts(rows)
    unlisted = {m.path for m in mutate.MUTATIONS
                if not any(m.path.rsplit("/", 1)[-1] in files for files in rows)}
    differ = {k: (stated[k], actual.get(k)) for k in stated if stated[k] != actual.get(k)}
    return {"differ": differ, "unlisted": sorted(unlisted)}


def test_the_docs_count_the_mutations_as_mutate_py_holds_them():
    mismatch = mutation_docs_mismatch(MUTATION_PAGE.read_text(), DEVELOPMENT.read_text())
    assert mismatch == {"differ": {}, "unlisted": []}


def test_the_mutation_count_check_sees_a_row_and_a_device_miscounted():
    page, readme = MUTATION_PAGE.read_text(), DEVELOPMENT.read_text()
    row = "| `custom_ops/mtp_cpu.h` (CPU driver) | "
    n = int(page.split(row, 1)[1].split(" ", 1)[0])
    wrong_row = page.replace(f"{row}{n} ", f"{row}{n + 1} ", 1)
    assert mutation_docs_mismatch(wrong_row, readme)["differ"] == {("mtp_cpu.h",): (n + 1, n)}
    cpu = re.search(r"each of (\d+) realistic", readme).group(1)
    wrong_cpu = readme.replace(f"each of {cpu} realistic", f"each of {int(cpu) - 1} realistic")
    assert set(mutation_docs_mismatch(page, wrong_cpu)["differ"]) == {"cpu"}
    no_row = "\n".join(line for line in page.splitlines() if not line.startswith(row))
    assert mutation_docs_mismatch(no_row, readme)["unlisted"] == ["custom_ops/mtp_cpu.h"]


# docs/step_by_hand.md runs as printed: its python block, run in a
# fresh interpreter, prints exactly the text block after it.

STEP_BY_HAND = "# One step by hand"
STEP_PAGE = README.parent / "docs" / "step_by_hand.md"


def example_and_output(readme: str) -> tuple:
    """The section's python block and the text block that follows it."""
    section = readme.split(STEP_BY_HAND, 1)[1]
    code = re.findall(r"```python\n(.*?)```", section, re.S)
    shown = re.findall(r"```text\n(.*?)```", section, re.S)
    assert len(code) == 1 and len(shown) == 1, "one python block and one text block"
    return code[0], shown[0]


def run_example(code: str, folder: Path) -> str:
    """`code`'s output in a fresh interpreter that imports this checkout's
    fastdeploy_mtp (not an installed one: a mutant's copy, a device machine
    with nothing installed)."""
    script = folder / "step_by_hand.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       cwd=folder, timeout=300, env=child_env())
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def test_the_step_by_hand_prints_what_the_page_shows(tmp_path):
    code, shown = example_and_output(STEP_PAGE.read_text())
    assert run_example(code, tmp_path) == shown


def test_the_step_by_hand_check_sees_a_run_without_the_fix(tmp_path):
    """The decode node without the fix prints another preset, so the
    comparison above would fail."""
    code, shown = example_and_output(STEP_PAGE.read_text())
    old = code.replace("decode = MTPProposer(", "from fastdeploy_mtp.harness.without_fix import "
                       "ProposerWithoutFix\ndecode = ProposerWithoutFix(", 1)
    assert old != code
    printed = run_example(old, tmp_path)
    assert printed != shown and "mask_rollback preset: 1\n" in printed


# Every README block of `$ python -m fastdeploy_mtp ...` commands shows what
# each command prints today, line for line.

COMMAND = "$ python -m fastdeploy_mtp "


def plain_blocks(text: str) -> list:
    """The lines of each fenced block of the text that names no language."""
    blocks, body, language = [], None, ""
    for line in text.splitlines():
        if not line.startswith("```"):
            if body is not None:
                body.append(line)
        elif body is None:
            body, language = [], line[3:]
        else:
            if not language:
                blocks.append(body)
            body = None
    return blocks


def readme_commands(readme: str) -> list:
    """(argv, shown output) of each `$ python -m fastdeploy_mtp` line of the
    README's plain blocks; the output is the lines up to the next `$` or the
    block's end."""
    found = []
    for lines in plain_blocks(readme):
        starts = [i for i, line in enumerate(lines) if line.startswith("$ ")]
        for i, j in zip(starts, starts[1:] + [len(lines)]):
            assert lines[i].startswith(COMMAND), lines[i]
            found.append((lines[i][len(COMMAND):].split(), "\n".join(lines[i + 1:j]) + "\n"))
    return found


RESULTS = README.parent / "docs" / "results.md"


def shown_commands() -> list:
    """The commands the README and docs/results.md show, with their output."""
    return (readme_commands(README.read_text()) + readme_commands(USAGE.read_text())
            + readme_commands(RESULTS.read_text()))


def test_the_readme_shows_several_commands():
    commands = shown_commands()
    assert len(commands) >= 4, commands
    assert ["simulate", "--steps", "5"] in [argv for argv, _ in commands]


@pytest.mark.parametrize("argv,shown", shown_commands(),
                         ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_each_command_in_the_readme_prints_what_it_shows(capsys, argv, shown):
    from fastdeploy_mtp.__main__ import main

    code = main(argv)
    printed = capsys.readouterr().out
    # The largest logit difference is float rounding (its digits vary with the
    # machine's BLAS and Paddle): the same on both sides within a few percent,
    # or both below the oracle's tolerance; every other character is exact.
    diff = re.compile(r"(?<=max \|logit diff\| )[0-9.e+-]+")
    seen, said = map(float, diff.findall(printed)), map(float, diff.findall(shown))
    for a, b in zip(seen, said):
        assert (a < 1e-4 and b < 1e-4) or abs(a - b) <= 0.05 * b, (a, b)
    assert diff.sub("X", printed) == diff.sub("X", shown)
    assert code == (0 if shown.rstrip().splitlines()[-1].startswith("OK") else 1)


# --- Links, the package's page, time figures, the changelog ---------------------

ROOT = README.parent
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "CHANGELOG.md"]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
# The README section the plugin's owner keeps (its links are kept there).
FASTDEPLOY_SECTION = ("## Using it from FastDeploy", "\n## ")


def anchors(page: Path) -> set:
    """GitHub's anchors of `page`'s headings."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def broken_links(page: Path, text: str = None) -> list:
    """The relative links of `page` whose file (or heading) is not there."""
    text = page.read_text() if text is None else text
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # an absolute URL
        path, _, anchor = target.partition("#")
        where = (page.parent / path) if path else page
        if not where.exists() or (anchor and where.suffix == ".md"
                                  and anchor not in anchors(where)):
            broken.append(target)
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_reaches_its_file_and_heading(page):
    assert broken_links(page) == []


def test_the_link_check_sees_a_path_from_the_wrong_folder():
    usage = USAGE.read_text()
    assert broken_links(USAGE, usage.replace("](contract.md#", "](docs/contract.md#", 1)) == [
        "docs/contract.md#valid-ranges-and-what-is-refused"]
    assert broken_links(USAGE, usage + "\n[x](contract.md#no-such-heading)\n") == [
        "contract.md#no-such-heading"]


def readme_outside_the_fastdeploy_section() -> str:
    text = README.read_text()
    start = text.index(FASTDEPLOY_SECTION[0])
    end = text.index(FASTDEPLOY_SECTION[1], start + 1)
    return text[:start] + text[end:]


def test_the_readme_has_no_relative_link_to_break_in_the_package_description():
    """The README is the package's long description, shown where the docs are
    not: a relative link there leads nowhere. The project has no URL for an
    absolute one, so the README names the files by their paths."""
    text = readme_outside_the_fastdeploy_section()
    assert [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)] == []


def test_the_readme_lists_every_command():
    from fastdeploy_mtp import __main__ as cli

    text = README.read_text()
    start = text.index("--help` lists the commands (")
    listed = re.findall(r"`([a-z-]+)`", text[start:text.index(")", start)])
    assert sorted(listed) == sorted(cli.COMMANDS) and len(listed) == len(set(listed))


# A time figure: a number of seconds or minutes, in digits or in words.
TIME_FIGURE = re.compile(r"\b(\d+(\.\d+)?|one|two|three|four|five|ten|half a) ?(-)?"
                         r"(s|seconds?|minutes?|min|hours?)\b")


def paragraphs(text: str) -> list:
    """Paragraphs, each item of a list one of its own."""
    return [p for p in re.split(r"\n\s*\n|\n(?=\s*- )", text) if p.strip()]


# A command in inline code (a fence's backticks are no such span).
MEASURED_BY = re.compile(r"(?<!`)`(?!`)[^`]*\b(python|bash)\b[^`]*(?<!`)`(?!`)")


@pytest.mark.parametrize("page", [README, USAGE, DEVELOPMENT, ROOT / "CHANGELOG.md"],
                         ids=lambda p: p.name)
def test_every_time_figure_names_the_command_that_measured_it(page):
    """Each paragraph that gives a time names, in it, the command that took
    it (a figure no one can measure again is left out)."""
    text = readme_outside_the_fastdeploy_section() if page == README else page.read_text()
    unmeasured = [p.strip()[:120] for p in paragraphs(text) if TIME_FIGURE.search(p)
                  and not MEASURED_BY.search(p)]
    assert unmeasured == []


def test_the_changelog_s_release_is_what_installs():
    """The release section names what the installed version has: every
    form and every command."""
    import fastdeploy_mtp
    from fastdeploy_mtp import __main__ as cli
    from fastdeploy_mtp.signature import FORMS

    text = (ROOT / "CHANGELOG.md").read_text()
    start = text.index(f"## [{fastdeploy_mtp.__version__}] - ")
    end = text.find("\n## [", start + 1)
    release = text[start:end if end > 0 else len(text)]
    assert [f for f in FORMS if f"`{f}`" not in release] == []
    assert [c for c in cli.COMMANDS if f"`{c}`" not in release] == []
    count = {7: "seven", 8: "eight", 9: "nine", 10: "ten", 11: "eleven", 12: "twelve"}
    assert f"{count[len(FORMS)]} forms" in release


def test_the_classifiers_are_known_and_name_no_licence():
    """The licence is the SPDX `license` field (setuptools refuses a licence
    classifier beside it)."""
    tomllib = pytest.importorskip("tomllib")
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    classifiers = project["classifiers"]
    assert classifiers == sorted(classifiers) and len(set(classifiers)) == len(classifiers)
    assert not any(c.startswith("License ::") for c in classifiers)
    assert "Typing :: Typed" in classifiers  # py.typed ships
    trove = pytest.importorskip("trove_classifiers")
    assert [c for c in classifiers if c not in trove.classifiers] == []
