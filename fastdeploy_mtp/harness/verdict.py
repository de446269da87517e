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

from ..signature import FORMS

ROLES = ("mixed", "pd")
KS = (1, 2, 3, 4)
COLUMNS = ("form", "role", "k", "draft tokens checked", "disagreements", "violations",
           "FastDeploy writes outside a row")
HEADER = ("| " + " | ".join(COLUMNS) + " |\n"
          + "|---|---|---:|---:|---:|---:|---:|")
CHUNKED_COLUMNS = COLUMNS[:3] + ("prefill chunk",) + COLUMNS[3:]
CHUNKED_HEADER = ("| " + " | ".join(CHUNKED_COLUMNS) + " |\n"
                  + "|---|---|---:|---:|---:|---:|---:|---:|")
# The workload of every row: simulate's defaults (60 steps, batch 8, seed 0)
# with prompts carrying image spans half the time.
WORKLOAD = dict(runner="fastdeploy", draft_model="tiny", image_prob=0.5)


def violations_cell(mask: int, alignment: int) -> str:
    """`0`, or the total and its kinds: `316 (alignment)`, `218 (2 mask, 216 alignment)`."""
    if mask + alignment == 0:
        return "0"
    kinds = [f"{n} {kind}" for n, kind in ((mask, "mask"), (alignment, "alignment")) if n]
    if len(kinds) == 1:
        kinds = [kinds[0].split(" ", 1)[1]]
    return f"{mask + alignment} ({', '.join(kinds)})"


def row(form: str, role: str, k: int, chunk: int = 0) -> str:
    """One row (of the chunked table where `chunk` is not 0)."""
    from . import simulate, simulate_cli

    p = argparse.ArgumentParser()
    simulate_cli.add_arguments(p)
    a = p.parse_args([])
    for name, value in dict(WORKLOAD, form=form, mode=role, num_model_steps=k,
                            chunk=chunk).items():
        setattr(a, name, value)
    t = simulate.run(a, legacy=False, print_rows=False)
    cells = (form, role, str(k), *([str(chunk)] if chunk else []), str(t.model.tokens),
             str(t.model.disagreements), violations_cell(t.mask_violations, t.align_violations),
             str(t.outside.total))
    return "| " + " | ".join(cells) + " |"


def main(args) -> int:
    if getattr(args, "plugin", False):
        from . import plugin_verdict

        if args.form == list(FORMS):  # the default: every version the plugin stands behind
            args.form = list(plugin_verdict.VERSIONS)
        return plugin_verdict.main(args)
    print(CHUNKED_HEADER if args.chunk else HEADER, flush=True)
    for form in args.form:
        for role in args.role:
            for k in args.k:
                print(row(form, role, k, args.chunk), flush=True)
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    forms = list(FORMS)
    p.add_argument("--form", nargs="+", choices=forms, default=forms, metavar="FORM",
                   help=f"forms to run ({', '.join(forms)}; default: all)")
    p.add_argument("--role", nargs="+", choices=ROLES, default=list(ROLES),
                   help="roles to run (default: both)")
    p.add_argument("-k", nargs="+", type=int, choices=KS, default=list(KS), metavar="K",
                   help="num_model_steps values to run (default: 1 2 3 4)")
    p.add_argument("--plugin", action="store_true",
                   help="the table with the plugin: each FastDeploy version (--form pr5245, "
                        "pr5738, pr6403, shadow) as shipped and with FD_PLUGINS=fastdeploy_mtp, "
                        "per role, k and prefill workload (--prefill)")
    from .plugin_verdict import add_arguments as plugin_arguments

    plugin_arguments(p)
    p.add_argument("--chunk", type=int, default=0, metavar="N",
                   help="FastDeploy's chunked prefill, chunks of N prompt tokens (simulate's "
                        "--chunk; default 0: each prompt prefilled whole)")
