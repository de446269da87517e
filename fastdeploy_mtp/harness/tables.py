"""What the verdict tables share (``verdict`` and ``plugin_verdict``): the
workload of every row, simulate's arguments for one, a run's counts by name,
the violations cell, and the printing of the rows as they end."""

from __future__ import annotations

import argparse
import json
import sys
import time

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


def row_arguments(form: str, role: str, k: int, **more) -> argparse.Namespace:
    """simulate's arguments for one row (`more`: other options of simulate's,
    by their names: chunk, prefix_cache, plugin)."""
    from . import simulate_cli

    p = argparse.ArgumentParser()
    simulate_cli.add_arguments(p)
    a = p.parse_args([])
    for name, value in dict(WORKLOAD, form=form, mode=role, num_model_steps=k, **more).items():
        setattr(a, name, value)
    return a


def counts(t) -> dict:
    """A run's tally (simulate.run's) by name, as the rows of --json give it."""
    return {"draft_tokens_checked": t.model.tokens, "disagreements": t.model.disagreements,
            "mask_violations": t.mask_violations, "alignment_violations": t.align_violations,
            "fastdeploy_writes_outside": t.outside.total}


def print_table(runs, result, header: str, table_row, label, as_json: bool,
                document: dict) -> int:
    """Each of `runs` through `result` (a row's counts), printed as
    `table_row` makes it under `header`, or, `as_json`, every result in the
    JSON `document` (its "rows"); on stderr a line per row as it ends, with
    its time (`label(run)` names it), then the whole time."""
    if not as_json:
        print(header, flush=True)
    results = []
    started = time.monotonic()
    for n, run in enumerate(runs, 1):
        t0 = time.monotonic()
        r = result(*run)
        results.append(r)
        print(f"verdict: row {n}/{len(runs)} ({label(run)}) took "
              f"{time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
        if not as_json:
            print(table_row(r), flush=True)
    if as_json:
        print(json.dumps(dict(document, rows=results), indent=2))
    print(f"verdict: {len(runs)} rows in {time.monotonic() - started:.0f} s", file=sys.stderr,
          flush=True)
    return 0
