"""Command line: ``python -m fastdeploy_mtp {check,bench,simulate} ...``."""

from __future__ import annotations

import argparse
import sys


def _check(args) -> int:
    from .registration import check_all

    problems = check_all()
    if problems:
        print(f"{len(problems)} difference(s) between the registration and the signature table")
        return 1
    print("registration matches fastdeploy_mtp/signature.py")
    return 0


def _signature(args) -> int:
    from pathlib import Path

    from .signature import HEADER_PATH, render_cpp_header

    path = Path(__file__).resolve().parent.parent / HEADER_PATH
    text = render_cpp_header()
    if args.write:
        path.write_text(text)
        print(f"wrote {path}")
        return 0
    same = path.is_file() and path.read_text() == text
    print(f"{HEADER_PATH} {'matches' if same else 'DIFFERS from'} fastdeploy_mtp/signature.py"
          + ("" if same else ": run `python -m fastdeploy_mtp signature --write`"))
    return 0 if same else 1


def _positive(name: str, values, high: int):
    """A one-line message when a count is outside [1, high], else None."""
    for v in values:
        if not 1 <= v <= high:
            return f"{name} must be within [1, {high}], got {v}"
    return None


def _bench(args) -> int:
    problem = (_positive("--bsz", args.bsz, 1 << 20) or _positive("--repeat", [args.repeat], 10**6))
    if problem:
        print(f"bench: {problem}", file=sys.stderr)
        return 2
    from .bench import main as bench_main

    return bench_main(args)


def _bench_gpu(args) -> int:
    problem = (_positive("--bsz", args.bsz, 1 << 20) or _positive("--calls", [args.calls], 10**6)
               or _positive("--rounds", [args.rounds], 1000))
    if problem:
        print(f"bench-gpu: {problem}", file=sys.stderr)
        return 2
    from .gpu_bench import main as gpu_bench_main

    return gpu_bench_main(args)


def _bench_sim(args) -> int:
    from .bench import simulator_bench

    simulator_bench()
    return 0


def _simulate(args) -> int:
    from .simulate_cli import main as simulate_main

    return simulate_main(args)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fastdeploy_mtp")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="compare the registered ops with the signature table")
    sg = sub.add_parser("signature", help="check (or --write) custom_ops/op_signatures.h "
                                         "against the signature table")
    sg.add_argument("--write", action="store_true")
    b = sub.add_parser("bench", help="per-call time of each op next to the numpy reference")
    b.add_argument("--device", choices=["cpu", "gpu"], default=None,
                   help="default: gpu where Paddle has CUDA and sees a GPU, else cpu")
    b.add_argument("--bsz", type=int, nargs="+", default=[1, 64, 512, 4096])
    b.add_argument("--repeat", type=int, default=200, help="op calls timed per size")
    from .simulate_cli import add_arguments

    sim = sub.add_parser("simulate", help="closed-loop simulation: do the mask offsets stay right?")
    add_arguments(sim)
    sub.add_parser("bench-sim", help="wall time of a 40-step simulation with the tiny draft "
                                     "model and its cache-free oracle")
    g = sub.add_parser("bench-gpu", help="GPU latency against the floor and a FastDeploy-shaped "
                                         "baseline (paddlepaddle-gpu, source checkout)")
    g.add_argument("--bsz", type=int, nargs="+", default=[1, 64, 512, 1024, 8192])
    g.add_argument("--calls", type=int, default=300, help="calls timed per round")
    g.add_argument("--rounds", type=int, default=7, help="interleaved rounds (the median is shown)")
    g.add_argument("--graph-only", action="store_true", help="only the captured-step table")
    args = parser.parse_args(argv)
    commands = {"check": _check, "signature": _signature, "bench": _bench, "bench-gpu": _bench_gpu,
                "bench-sim": _bench_sim, "simulate": _simulate}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
