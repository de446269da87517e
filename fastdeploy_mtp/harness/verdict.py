"""The verdict table: FastDeploy's own runner replayed around each form of the
ops (``simulate --runner fastdeploy``), for every role and k, with the tiny
draft model and its cache-free oracle; ``python -m fastdeploy_mtp verdict``.
``--chunk N`` makes the table of the same runs with FastDeploy's chunked
prefill (``simulate --chunk N``), a column of its own saying so.

docs/results.md holds both tables as printed, and a test runs rows of them
again.
"""

from __future__ import annotations

import argparse
import sys

from ..signature import FORMS
from .tables import counts, print_table, row_arguments, violations_cell

ROLES = ("mixed", "pd")
KS = (1, 2, 3, 4)
COLUMNS = ("form", "role", "k", "draft tokens checked", "disagreements", "violations",
           "FastDeploy writes outside a row")
HEADER = ("| " + " | ".join(COLUMNS) + " |\n"
          + "|---|---|---:|---:|---:|---:|---:|")
CHUNKED_COLUMNS = COLUMNS[:3] + ("prefill chunk",) + COLUMNS[3:]
CHUNKED_HEADER = ("| " + " | ".join(CHUNKED_COLUMNS) + " |\n"
                  + "|---|---|---:|---:|---:|---:|---:|---:|")
def result(form: str, role: str, k: int, chunk: int = 0) -> dict:
    """One row's run: its counts, by name (as `verdict --json` prints them)."""
    from . import simulate

    t = simulate.run(row_arguments(form, role, k, chunk=chunk), legacy=False, print_rows=False)
    return {"form": form, "role": role, "k": k, "chunk": chunk, **counts(t)}


def table_row(r: dict) -> str:
    """`r` (a result) as a row of the table (of the chunked one where its
    chunk is not 0)."""
    cells = (r["form"], r["role"], str(r["k"]), *([str(r["chunk"])] if r["chunk"] else []),
             str(r["draft_tokens_checked"]), str(r["disagreements"]),
             violations_cell(r["mask_violations"], r["alignment_violations"]),
             str(r["fastdeploy_writes_outside"]))
    return "| " + " | ".join(cells) + " |"


def row(form: str, role: str, k: int, chunk: int = 0) -> str:
    """One row (of the chunked table where `chunk` is not 0)."""
    return table_row(result(form, role, k, chunk))


def main(args) -> int:
    """The table on stdout (or, with --json, one JSON document), and on
    stderr a line per row as it ends, with the time it took."""
    if getattr(args, "plugin", False):
        from . import plugin_verdict

        if args.form == list(FORMS):  # the default: every version the plugin stands behind
            args.form = list(plugin_verdict.VERSIONS)
        others = [f for f in args.form if f not in plugin_verdict.VERSIONS]
        if others or args.chunk:
            print(f"verdict: --plugin runs the FastDeploy versions "
                  f"{', '.join(plugin_verdict.VERSIONS)} (--form), each prefill workload "
                  f"(--prefill, not --chunk); got "
                  f"{'--form ' + ' '.join(others) if others else '--chunk'}", file=sys.stderr)
            return 2
        return plugin_verdict.main(args)
    runs = [(form, role, k, args.chunk) for form in args.form for role in args.role
            for k in args.k]
    a = row_arguments("rollback", "mixed", 1, chunk=args.chunk)
    workload = {name: getattr(a, name) for name in ("steps", "batch", "seed", "runner",
                                                     "draft_model", "image_prob", "chunk")}
    return print_table(runs, result, CHUNKED_HEADER if args.chunk else HEADER, table_row,
                       lambda run: f"{run[0]}, {run[1]}, k {run[2]}", args.json,
                       {"command": "verdict", "workload": workload})


def add_arguments(p: argparse.ArgumentParser) -> None:
    forms = list(FORMS)
    # The help's formatter adds each default: the texts do not say it again.
    p.add_argument("--form", nargs="+", choices=forms, default=forms, metavar="FORM",
                   help="forms to run")
    p.add_argument("--role", nargs="+", choices=ROLES, default=list(ROLES),
                   help="roles to run")
    p.add_argument("-k", nargs="+", type=int, choices=KS, default=list(KS), metavar="K",
                   help="num_model_steps values to run")
    p.add_argument("--plugin", action="store_true",
                   help="the table with the plugin: each FastDeploy version (--form pr5245, "
                        "pr5738, pr6403, shadow) as shipped and with FD_PLUGINS=fastdeploy_mtp, "
                        "per role, k and prefill workload (--prefill)")
    from .plugin_verdict import add_arguments as plugin_arguments

    plugin_arguments(p)
    p.add_argument("--chunk", type=int, default=0, metavar="N",
                   help="FastDeploy's chunked prefill, chunks of N prompt tokens (simulate's "
                        "--chunk; 0: each prompt prefilled whole)")
    p.add_argument("--json", action="store_true",
                   help="print the rows as one JSON document on stdout instead of the table")
