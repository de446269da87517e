"""Benchmark (not a test): per-call time of each op next to the numpy reference.

``python -m fastdeploy_mtp bench [--device cpu|gpu] [--bsz ...] [--repeat N] [--rounds R]``

On the CPU it also times MTPProposer.insert of 256 requests against one slice
assignment per field per request (FastDeploy's way).

Op and reference run on the same state, alternating in rounds, so the ratio
is measured side by side on whatever else the machine is doing; the figure of
each is the median over rounds of the mean per-call time.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from .. import forms, ops, reference
from ..buffers import tensors
from ..devices import gpu_problem
from ..harness import states

ROUNDS = 5  # the default of --rounds
K = 3  # num_model_step of the benchmark states


def _bench_state(bsz: int, rng):
    return states.repeatable_preprocess_state(rng, bsz, num_model_step=K)


def _ratio(r: float) -> str:
    """A ratio with the digits that matter: 0.42x, 3.1x, 107x."""
    return f"{r:.2f}x" if r < 1 else f"{r:.1f}x" if r < 10 else f"{r:.0f}x"


def _time_calls(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def _side_by_side(op_fn, ref_fn, op_calls: int, rounds: int):
    op_fn(), ref_fn()  # warm-up (and the library load)
    ref_calls = max(1, min(op_calls, 20))
    op_t, ref_t = [], []
    for _ in range(rounds):
        op_t.append(_time_calls(op_fn, op_calls))
        ref_t.append(_time_calls(ref_fn, ref_calls))
    return statistics.median(op_t), statistics.median(ref_t)


def main(args) -> int:
    import paddle

    problem = gpu_problem("--device gpu")
    device = args.device or ("cpu" if problem else "gpu")
    if device == "gpu" and problem:
        print(f"bench: {problem}; use --device cpu", file=sys.stderr)
        return 2
    place = paddle.CUDAPlace(0) if device == "gpu" else paddle.CPUPlace()
    ops.load_library()
    typed = forms.load("rollback")  # the reference's form
    rng = np.random.default_rng(0)
    attrs = dict(num_model_step=K, truncate_first_token=False, splitwise_prefill=False,
                 kvcache_scheduler_v1=True)
    print(f"device: {device} (paddle {paddle.__version__}); per-call medians of {args.rounds} "
          f"rounds of {args.repeat} op calls; num_model_step = {K}")
    header = f"{'op':<26}{'bsz':>6}{'op us':>12}{'numpy ref us':>15}{'ref / op':>10}"
    print(header)
    print("-" * len(header))
    for bsz in args.bsz:
        s = _bench_state(bsz, rng)
        t = tensors(s, place)
        r = states.copy_state(s)
        op_s, ref_s = _side_by_side(lambda: typed.draft_model_preprocess(**t, **attrs),
                                    lambda: reference.draft_model_preprocess(r, **attrs),
                                    args.repeat, args.rounds)
        print(f"{'draft_model_preprocess':<26}{bsz:>6}{op_s * 1e6:>12.1f}{ref_s * 1e6:>15.1f}"
              f"{_ratio(ref_s / op_s):>10}", flush=True)
    for bsz in args.bsz:
        s = states.mask_state(rng, bsz)
        t = {n: paddle.to_tensor(a, place=place) for n, a in s.items()}
        r = states.copy_state(s)
        op_s, ref_s = _side_by_side(lambda: typed.update_attn_mask_offsets(**t),
                                    lambda: reference.update_attn_mask_offsets(r),
                                    args.repeat, args.rounds)
        print(f"{'update_attn_mask_offsets':<26}{bsz:>6}{op_s * 1e6:>12.1f}{ref_s * 1e6:>15.1f}"
              f"{_ratio(ref_s / op_s):>10}", flush=True)
    if device == "cpu":
        print()
        insert_bench(rounds=args.rounds)
    return 0


def insert_per_field(p, requests) -> None:
    """FastDeploy's way: one slice assignment per field of each request."""
    import paddle

    def host(a):
        return paddle.to_tensor(a, place=paddle.CPUPlace())

    s = p.state
    for r in requests:
        i, n = r.slot, len(r.prompt)
        s["draft_tokens"][i:i + 1, :] = -1
        s["pre_ids"][i:i + 1, :] = -1
        s["input_ids"][i:i + 1, : n - 1] = host(np.asarray(r.prompt[1:], np.int64)[None])
        s["attn_mask_offsets_full"][i:i + 1, :n] = host(np.arange(n, dtype=np.int32)[None])
        s["decode_states"][i:i + 1, :] = 0
        s["stop_flags"][i:i + 1] = False
        s["is_block_step"][i:i + 1] = False
        s["batch_drop"][i:i + 1] = False
        s["seq_lens_encoder"][i:i + 1] = n
        s["seq_lens_decoder"][i:i + 1] = 0
        s["step_idx"][i:i + 1] = 0
        s["seq_lens_this_time"][i:i + 1] = n
        s["attn_mask_offsets_decoder"][i:i + 1] = n
        s["mask_rollback"][i:i + 1] = 0


def insert_bench(n_requests: int = 256, rounds: int = ROUNDS) -> None:
    """Batched insert vs one write per field per request, side by side."""
    from ..proposer import MTPProposer, ProposerConfig, Request, make_base_buffers

    cfg = ProposerConfig(num_model_steps=K, max_model_len=512, max_num_seqs=n_requests)
    p = MTPProposer(cfg, make_base_buffers(n_requests, K), form="rollback")
    rng = np.random.default_rng(1)
    reqs = [Request(slot=i, prompt=rng.integers(3, 1000, rng.integers(8, 128)).tolist())
            for i in range(n_requests)]
    batched, per_field = [], []
    slots = [r.slot for r in reqs]
    for _ in range(rounds):
        p.release(slots)  # untimed: insert takes free slots only
        batched.append(_time_calls(lambda: p.insert(reqs), 1))
        per_field.append(_time_calls(lambda: insert_per_field(p, reqs), 1))
    b, f = statistics.median(batched), statistics.median(per_field)
    print(f"insert {n_requests} requests: batched {b * 1e3:.2f} ms, one write per field per "
          f"request {f * 1e3:.2f} ms, ratio {f / b:.1f}x")


def simulator_bench(steps: int = 40, batch: int = 8, k: int = 3, image_prob: float = 0.5) -> None:
    """Wall time of a simulator run with the tiny draft model and its oracle,
    next to the same run with the scripted draft, per mode."""
    import argparse

    from ..harness.simulate import run
    from ..harness.simulate_cli import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    ops.load_library()  # not timed: the first use may build it
    print(f"simulate, {steps} steps, batch {batch}, num_model_steps {k}, image prob {image_prob}")
    print(f"{'mode':<7}{'scripted s':>12}{'tiny model s':>14}{'ratio':>8}{'tokens checked':>16}"
          f"{'disagreements':>15}")
    for mode in ("mixed", "pd"):
        times = {}
        for model in (None, "tiny"):
            a = parser.parse_args(["--mode", mode, "-k", str(k), "--steps", str(steps),
                                   "--batch", str(batch), "--image-prob", str(image_prob)])
            a.draft_model = model
            t0 = time.perf_counter()
            tally = run(a, legacy=False, print_rows=False)
            times[model] = time.perf_counter() - t0
        print(f"{mode:<7}{times[None]:>12.2f}{times['tiny']:>14.2f}"
              f"{times['tiny'] / times[None]:>7.1f}x{tally.model.tokens:>16}"
              f"{tally.model.disagreements:>15}", flush=True)
