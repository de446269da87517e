"""Writes the benchmark states for the graph probe (benchmarks/graph_probe.cu).

    python benchmarks/graph_probe.py DIR [--bsz 1 64 ...]

The probe times captured steps with the CUDA kernels alone (no Paddle), so
launch shapes can be tried on the GPU machine without the Paddle runtime. It
reads the same states the graph table of ``bench-gpu`` uses
(states.repeatable_preprocess_state and states.mask_state, seed 1), written
here as raw arrays: DIR/b<bsz>_<op>.bin and a manifest DIR/b<bsz>_<op>.txt with
one line per array: ``name dtype rows cols offset``.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastdeploy_mtp.harness import states  # noqa: E402

GRAPH_BSZ = (1, 64, 512, 1024, 4096, 8192)
K = 3


def write(path: str, arrays) -> None:
    offset = 0
    with open(path + ".bin", "wb") as data, open(path + ".txt", "w") as manifest:
        for name, a in arrays.items():
            a = np.ascontiguousarray(a)
            rows = a.shape[0] if a.ndim else 1
            cols = a.shape[1] if a.ndim == 2 else 1
            manifest.write(f"{name} {a.dtype.name} {rows} {cols} {offset}\n")
            data.write(a.tobytes())
            offset += a.nbytes


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--bsz", type=int, nargs="+", default=list(GRAPH_BSZ))
    p.add_argument("--mask-cols", type=int, default=None,
                   help="attn_mask_offsets_full's columns (a prompt's most tokens); default random")
    p.add_argument("--widen", type=int, default=None,
                   help="then give attn_mask_offsets_full this many columns, the prompts as "
                        "drawn: a real engine's table has max_model_len columns")
    p.add_argument("--prefills", type=int, default=None,
                   help="instead of mask_state's draws: decodes with this many prompt chunks "
                        "at random slots (states.prefill_chunks_state), as a chunked-prefill "
                        "engine runs while requests arrive")
    p.add_argument("--chunk", type=int, default=512, help="with --prefills: a chunk's tokens")
    args = p.parse_args()
    if args.prefills is not None and args.mask_cols is not None:
        p.error("--prefills sets the table's columns from --chunk and --widen; not --mask-cols")
    os.makedirs(args.dir, exist_ok=True)
    rng = np.random.default_rng(1)  # the graph table's draws, in its order
    for bsz in args.bsz:
        write(os.path.join(args.dir, f"b{bsz}_pre"),
              states.repeatable_preprocess_state(rng, bsz, num_model_step=K))
        if args.prefills is not None:
            m = states.prefill_chunks_state(rng, bsz, prefills=min(args.prefills, bsz),
                                            chunk=args.chunk,
                                            cols=max(args.widen or 0, args.chunk))
        else:
            m = states.mask_state(rng, bsz, mask_cols=args.mask_cols)
            if args.widen:
                m = states.widen_mask_full(m, args.widen)
        write(os.path.join(args.dir, f"b{bsz}_mask"), m)
    print(f"wrote states for bsz {args.bsz} to {args.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
