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
from typing import Dict, Tuple

from .verdict import WORKLOAD, violations_cell

# The FastDeploy versions the plugin stands behind, by the form of their ops,
# and the commit each form's runner is read at.
VERSIONS: Dict[str, str] = {"pr5245": "ba915e03e", "pr5738": "9018ccf74",
                            "pr6403": "2178f2829", "shadow": "7a6c28781"}
ROLES = ("mixed", "pd")
KS = (1, 2, 3, 4)
# The prefill workloads: each prompt whole, chunks of 8 tokens, and a
# prefix-cache hit for half the prompts.
PREFILLS: Dict[str, Dict[str, float]] = {"whole": {}, "chunks of 8": {"chunk": 8},
                                         "prefix cache": {"prefix_cache": 0.5}}
COLUMNS = ("FastDeploy", "role", "k", "prefill", "shipped: disagreements", "violations",
           "writes outside a row", "with the plugin: draft tokens checked", "disagreements",
           "violations", "writes outside a row")
HEADER = ("| " + " | ".join(COLUMNS) + " |\n"
          + "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")


def run(form: str, role: str, k: int, prefill: str, plugin: bool):
    """One replay (simulate.run's tally)."""
    from . import simulate, simulate_cli

    p = argparse.ArgumentParser()
    simulate_cli.add_arguments(p)
    a = p.parse_args([])
    for name, value in dict(WORKLOAD, form=form, mode=role, num_model_steps=k, plugin=plugin,
                            **PREFILLS[prefill]).items():
        setattr(a, name, value)
    return simulate.run(a, legacy=False, print_rows=False)


def cells(t) -> Tuple[str, str, str]:
    return (str(t.model.disagreements), violations_cell(t.mask_violations, t.align_violations),
            str(t.outside.total))


def row(form: str, role: str, k: int, prefill: str) -> str:
    shipped, ours = run(form, role, k, prefill, False), run(form, role, k, prefill, True)
    out = (f"{VERSIONS[form]} ({form})", role, str(k), prefill, *cells(shipped),
           str(ours.model.tokens), *cells(ours))
    return "| " + " | ".join(out) + " |"


def main(args) -> int:
    print(HEADER, flush=True)
    for form in args.form:
        for role in args.role:
            for k in args.k:
                for prefill in args.prefill:
                    print(row(form, role, k, prefill), flush=True)
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prefill", nargs="+", choices=list(PREFILLS), default=list(PREFILLS),
                   metavar="P", help="with --plugin: the prefill workloads")

