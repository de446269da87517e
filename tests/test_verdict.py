"""docs/results.md's verdict table is what `python -m fastdeploy_mtp verdict`
prints: its rows in the command's order, and a drifting and an exact row of
each form run again here (the whole table takes minutes; a maintainer
regenerates it with the command)."""

from pathlib import Path

import pytest

from fastdeploy_mtp.harness import verdict
from fastdeploy_mtp.signature import FORMS

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results.md"


def docs_table(header=verdict.HEADER) -> list:
    """The lines of the verdict table (or of the chunked one, by its header)
    in docs/results.md, header first."""
    lines = RESULTS.read_text().splitlines()
    start = lines.index(header.splitlines()[0])
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    return table


def test_the_docs_table_has_every_form_role_and_k_in_the_command_s_order():
    table = docs_table()
    assert "\n".join(table[:2]) == verdict.HEADER
    keys = [tuple(c.strip() for c in line.split("|")[1:4]) for line in table[2:]]
    assert keys == [(f, r, str(k)) for f in FORMS for r in verdict.ROLES for k in verdict.KS]


@pytest.mark.parametrize("mask,alignment,cell", [
    (0, 0, "0"),
    (376, 0, "376 (mask)"),
    (0, 316, "316 (alignment)"),
    (2, 216, "218 (2 mask, 216 alignment)"),
])
def test_the_violations_cell_names_each_kind_with_its_count(mask, alignment, cell):
    assert verdict.violations_cell(mask, alignment) == cell


# One row of each form that drifts (where it does) and one that is exact.
SAMPLE = [("rollback", "pd", 2), ("recompute", "mixed", 2), ("pr5245", "mixed", 2),
          ("pr6403", "pd", 1), ("shadow", "pd", 4)]


@pytest.mark.parametrize("form", sorted({f for f, _, _ in SAMPLE}))
def test_sampled_rows_are_what_the_command_prints(form):
    want = {tuple(c.strip() for c in line.split("|")[1:4]): line for line in docs_table()[2:]}
    for f, role, k in SAMPLE:
        if f == form:
            assert verdict.row(form, role, k) == want[(form, role, str(k))]


# The chunked table: FastDeploy's chunked prefill in chunks of CHUNK tokens, at
# the ks of CHUNKED_KS (docs/results.md says which command prints it).
CHUNK, CHUNKED_KS = 8, (1, 2)
CHUNKED_SAMPLE = [("rollback", "mixed", 1), ("pr5738", "pd", 2), ("shadow", "mixed", 1)]


def test_the_chunked_table_has_every_form_role_and_k_in_the_command_s_order():
    table = docs_table(verdict.CHUNKED_HEADER)
    assert "\n".join(table[:2]) == verdict.CHUNKED_HEADER
    keys = [tuple(c.strip() for c in line.split("|")[1:5]) for line in table[2:]]
    assert keys == [(f, r, str(k), str(CHUNK)) for f in FORMS for r in verdict.ROLES
                    for k in CHUNKED_KS]


@pytest.mark.parametrize("form,role,k", CHUNKED_SAMPLE)
def test_sampled_chunked_rows_are_what_the_command_prints(form, role, k):
    want = {tuple(c.strip() for c in line.split("|")[1:4]): line
            for line in docs_table(verdict.CHUNKED_HEADER)[2:]}
    assert verdict.row(form, role, k, CHUNK) == want[(form, role, str(k))]



# The table with the plugin (verdict --plugin): each FastDeploy version as
# shipped and with FD_PLUGINS=fastdeploy_mtp.
from fastdeploy_mtp.harness import plugin_verdict  # noqa: E402
from fastdeploy_mtp.plugin import CORRECTED_OF  # noqa: E402


def plugin_rows():
    return {tuple(c.strip() for c in line.split("|")[1:5]): line
            for line in docs_table(plugin_verdict.HEADER)[2:]}


def test_the_plugin_table_has_every_version_role_k_and_prefill_in_the_command_s_order():
    table = docs_table(plugin_verdict.HEADER)
    assert "\n".join(table[:2]) == plugin_verdict.HEADER
    keys = [tuple(c.strip() for c in line.split("|")[1:5]) for line in table[2:]]
    assert keys == [(f"{plugin_verdict.VERSIONS[f]} ({f})", r, str(k), p)
                    for f in plugin_verdict.VERSIONS for r in plugin_verdict.ROLES
                    for k in plugin_verdict.KS for p in plugin_verdict.PREFILLS]
    assert set(plugin_verdict.VERSIONS) == set(CORRECTED_OF)


def test_with_the_plugin_every_row_of_the_docs_table_is_exact():
    """0 disagreements, 0 violations and 0 writes outside a row in every
    row, with a draft that checked tokens."""
    for key, line in plugin_rows().items():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        assert int(cells[7]) > 0 and cells[8:] == ["0", "0", "0"], (key, cells)


PLUGIN_SAMPLE = [("pr5245", "mixed", 2, "whole"), ("pr5738", "pd", 3, "chunks-8"),
                 ("shadow", "mixed", 1, "chunks-8"), ("pr6403", "pd", 2, "prefix-cache")]


@pytest.mark.parametrize("form,role,k,prefill", PLUGIN_SAMPLE)
def test_sampled_plugin_rows_are_what_the_command_prints(form, role, k, prefill):
    key = (f"{plugin_verdict.VERSIONS[form]} ({form})", role, str(k), prefill)
    assert plugin_verdict.row(form, role, k, prefill) == plugin_rows()[key]


def test_the_judge_sees_the_chunk_drift_the_plugin_s_patch_removes():
    """The shipped shadow runner drifts under chunked prefill at k = 1 (its
    preprocess puts the base model's dropped sample at a chunk's last draft
    input), and no longer with the plugin, whose only change there is the
    patch (the shadow form's ops are the same)."""
    shipped = plugin_verdict.run("shadow", "mixed", 1, "chunks-8", False)
    ours = plugin_verdict.run("shadow", "mixed", 1, "chunks-8", True)
    assert shipped.model.disagreements > 0 and ours.model.disagreements == 0
    assert shipped.model.tokens == ours.model.tokens


@pytest.mark.parametrize("form,role,k", [("pr5738", "mixed", 2), ("shadow", "pd", 3)])
def test_a_row_is_the_simulate_run_the_page_names(capsys, form, role, k):
    """docs/results.md: each row is `simulate --runner fastdeploy --form F
    --mode R -k K --draft-model tiny --image-prob 0.5` (60 steps, batch 8,
    seed 0, simulate's defaults): the row's counts are that command's."""
    import json

    from fastdeploy_mtp.__main__ import main

    main(["simulate", "--runner", "fastdeploy", "--form", form, "--mode", role, "-k", str(k),
          "--draft-model", "tiny", "--image-prob", "0.5", "--json"])
    doc = json.loads(capsys.readouterr().out)
    row = verdict.result(form, role, k)
    assert row["draft_tokens_checked"] == doc["draft_model"]["tokens"]
    assert row["disagreements"] == doc["draft_model"]["disagreements"]
    assert row["fastdeploy_writes_outside"] == doc["fastdeploy_writes_outside"]["total"]
