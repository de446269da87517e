"""The verdict with the plugin: each FastDeploy version's runner, replayed, as
shipped and with ``FD_PLUGINS=fastdeploy_mtp`` (its corrected mode: the
corrected form behind the same signature and the plugin's patch of the
proposer), per role, k, and prefill workload (whole prompts, chunked
prefill, prefix-cache starts); ``python -m fastdeploy_mtp verdict --plugin``.

Every row is two runs of ``simulate --runner fastdeploy --form F
--draft-model tiny --image-prob 0.5`` on the same workload and seed, without
and with ``--plugin``. docs/results.md holds the table as printed, and a test
runs rows of it again.
"""

from __future__ import annotations

import argparse
from typing import Dict

from .tables import WORKLOAD, counts, print_table, row_arguments, violations_cell

# The FastDeploy versions the plugin stands behind, by the form of their ops,
# and the commit each form's runner is read at.
VERSIONS: Dict[str, str] = {"pr5245": "ba915e03e", "pr5738": "9018ccf74",
                            "pr6403": "2178f2829", "shadow": "7a6c28781"}
ROLES = ("mixed", "pd")
KS = (1, 2, 3, 4)
# The prefill workloads: each prompt whole, chunks of 8 tokens, and a
# prefix-cache hit for half the prompts.
PREFILLS: Dict[str, Dict[str, float]] = {"whole": {}, "chunks-8": {"chunk": 8},
                                         "prefix-cache": {"prefix_cache": 0.5}}
COLUMNS = ("FastDeploy", "role", "k", "prefill", "shipped: disagreements", "violations",
           "writes outside a row", "with the plugin: draft tokens checked", "disagreements",
           "violations", "writes outside a row")
HEADER = ("| " + " | ".join(COLUMNS) + " |\n"
          + "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")


def run(form: str, role: str, k: int, prefill: str, plugin: bool):
    """One replay (simulate.run's tally)."""
    from . import simulate

    return simulate.run(row_arguments(form, role, k, plugin=plugin, **PREFILLS[prefill]),
                        legacy=False, print_rows=False)


def result(form: str, role: str, k: int, prefill: str) -> dict:
    """One row's two runs, their counts by name (as ``verdict --plugin
    --json`` prints them)."""
    out = {"fastdeploy": VERSIONS[form], "form": form, "role": role, "k": k,
           "prefill": prefill}
    for name, plugin in (("shipped", False), ("with_plugin", True)):
        out[name] = counts(run(form, role, k, prefill, plugin))
    return out


def table_row(r: dict) -> str:
    def cells(c):
        return (str(c["disagreements"]),
                violations_cell(c["mask_violations"], c["alignment_violations"]),
                str(c["fastdeploy_writes_outside"]))

    out = (f"{r['fastdeploy']} ({r['form']})", r["role"], str(r["k"]), r["prefill"],
           *cells(r["shipped"]), str(r["with_plugin"]["draft_tokens_checked"]),
           *cells(r["with_plugin"]))
    return "| " + " | ".join(out) + " |"


def row(form: str, role: str, k: int, prefill: str) -> str:
    return table_row(result(form, role, k, prefill))


def main(args) -> int:
    """The table on stdout (or, with --json, one JSON document), and on
    stderr a line per row as it ends, with the time it took."""
    runs = [(f, r, k, p) for f in args.form for r in args.role for k in args.k
            for p in args.prefill]
    return print_table(runs, result, HEADER, table_row, lambda run: f"{run[0]}, {run[1]}, k {run[2]}, {run[3]}",
                       args.json, {"command": "verdict --plugin", "workload": dict(WORKLOAD)})


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prefill", nargs="+", choices=list(PREFILLS), default=list(PREFILLS),
                   metavar="P", help="with --plugin: the prefill workloads")

