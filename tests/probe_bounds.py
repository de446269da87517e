"""Upper bounds for the mask kernel's parts: the graph probe with one part cut out.

    python tests/probe_bounds.py [--list] [--only NAME ...]

A dev tool, not a test and not in CI. Before anyone rewrites a part of
update_attn_mask_offsets' kernel to make it cheaper, this says how much time
that part costs a captured step at most: each bound below removes the part
from a scratch copy of ``custom_ops/`` (the kernels are then wrong on purpose;
the probe reports the mismatch and times them anyway) and builds the graph
probe with it (``KERNELS=... bash tests/graph_probe.sh HEAD``), against
HEAD's kernels as the baseline. Needs nvcc, no GPU; builds
``build/bounds/probe_<name>``. On the GPU machine (carry
``build/bounds`` and the states), for example::

    build/bounds/probe_no-check-walk build/pl/states 1 8 64 512 --only baseline,default

with long-prompt states from ``python3 tests/graph_probe.py build/pl/states
--bsz 1 8 64 512 --mask-cols 4096``. The "default" column is the kernel
without the part; "baseline" is today's. Figures: docs/performance.md,
eighteenth session. ``tests/test_probe_bounds.py`` checks, in CI, that every
bound still finds its text exactly once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MASK_KERNEL = "custom_ops/mask_kernel.cuh"


@dataclass(frozen=True)
class Bound:
    name: str
    what: str     # the part removed, and what its bound says
    edits: tuple  # (original, cut) pairs; each original occurs exactly once in MASK_KERNEL


CHECK_WALK = ("    if (walks) {\n      // A bad token fails its request",
              "    if (false) {\n      // A bad token fails its request")
WRITE_WALK = ("  if (walks) {\n    shared.for_my_tokens(t, [&](int64_t, int32_t q",
              "  if (false) {\n    shared.for_my_tokens(t, [&](int64_t, int32_t q")
ZEROING = ("  zero(scope, t.out, 2 * t.num_tokens);\n", "\n")


BOUNDS = [
    Bound("no-check-walk",
          "the long prompts' token checks (the first walk): what keeping a thread's offsets "
          "in registers from the checks to the writes could save at most", (CHECK_WALK,)),
    Bound("no-write-walk", "the long prompts' writes (the second walk)", (WRITE_WALK,)),
    Bound("no-walks", "both walks: what the rest of the kernel costs with long prompts",
          (CHECK_WALK, WRITE_WALK)),
    Bound("no-zeroing",
          "the zeros written to every entry before the odd ones: what writing each "
          "entry once could save at most", (ZEROING,)),
]


def cut_source(bound: Bound, text: str) -> str:
    for original, cut in bound.edits:
        if text.count(original) != 1:
            raise ValueError(f"{bound.name}: its text is not in {MASK_KERNEL} exactly once")
        text = text.replace(original, cut)
    return text


def build(bound: Bound) -> Path:
    """The probe with `bound`'s part cut out, against HEAD's kernels: built by
    tests/graph_probe.sh from a scratch copy of custom_ops/."""
    root = REPO / "build/bounds" / bound.name
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(REPO / "custom_ops", root / "custom_ops")
    kernel = root / MASK_KERNEL
    kernel.write_text(cut_source(bound, kernel.read_text()))
    out = REPO / "build/bounds" / f"probe_{bound.name}"
    subprocess.run(["bash", "tests/graph_probe.sh", "HEAD"], cwd=REPO, check=True,
                   env={**os.environ, "KERNELS": str(root / "custom_ops"), "PROBE": str(out)})
    shutil.rmtree(root)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--list", action="store_true", help="name each bound and check it applies")
    p.add_argument("--only", nargs="+", metavar="NAME", help="build these bounds only")
    args = p.parse_args()
    unknown = set(args.only or ()) - {b.name for b in BOUNDS}
    if unknown:
        p.error(f"no such bound: {' '.join(sorted(unknown))} (--list names them)")
    text = (REPO / MASK_KERNEL).read_text()
    for b in BOUNDS:
        cut_source(b, text)
        if args.list:
            print(f"{b.name:15} {b.what}")
    if args.list:
        return 0
    for b in BOUNDS:
        if args.only and b.name not in args.only:
            continue
        print(f"built {build(b).relative_to(REPO)}  ({b.what})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
