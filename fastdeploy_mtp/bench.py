"""Benchmark (not a test): per-call time of each op next to the numpy reference.

``python -m fastdeploy_mtp bench [--device cpu|gpu] [--bsz ...] [--repeat N]``

Op and reference run on the same state, alternating in rounds, so the ratio
is measured side by side on whatever else the machine is doing; the figure of
each is the median over rounds of the mean per-call time.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from . import ops, reference, states

ROUNDS = 5
K = 3  # num_model_step of the benchmark states


def _bench_state(bsz: int, rng):
    s = states.preprocess_state(rng, bsz, num_model_step=K)
    # Repeated calls roll the draft back K-1 positions each time; start far from zero.
    s["seq_lens_decoder"] += 1_000_000
    s["base_model_seq_lens_decoder"] += 1_000_000
    return s


def _time_calls(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def _side_by_side(op_fn, ref_fn, op_calls: int):
    op_fn(), ref_fn()  # warm-up (and the library load)
    ref_calls = max(1, min(op_calls, 20))
    op_t, ref_t = [], []
    for _ in range(ROUNDS):
        op_t.append(_time_calls(op_fn, op_calls))
        ref_t.append(_time_calls(ref_fn, ref_calls))
    return statistics.median(op_t), statistics.median(ref_t)


def main(args) -> int:
    import paddle

    device = args.device or ("gpu" if paddle.is_compiled_with_cuda() else "cpu")
    if device == "gpu" and not paddle.is_compiled_with_cuda():
        print("bench: this Paddle has no CUDA; use --device cpu", file=sys.stderr)
        return 2
    place = paddle.CUDAPlace(0) if device == "gpu" else paddle.CPUPlace()
    ops.load_library()
    rng = np.random.default_rng(0)
    attrs = dict(num_model_step=K, truncate_first_token=False, splitwise_prefill=False,
                 kvcache_scheduler_v1=True)
    print(f"device: {device} (paddle {paddle.__version__}); per-call medians of {ROUNDS} rounds "
          f"of {args.repeat} op calls; num_model_step = {K}")
    header = f"{'op':<26}{'bsz':>6}{'op us':>12}{'numpy ref us':>15}{'ref / op':>10}"
    print(header)
    print("-" * len(header))
    for bsz in args.bsz:
        s = _bench_state(bsz, rng)
        t = {n: paddle.to_tensor(a, place=paddle.CPUPlace() if n == "not_need_stop" else place)
             for n, a in s.items()}
        r = states.copy_state(s)
        op_s, ref_s = _side_by_side(lambda: ops.draft_model_preprocess(**t, **attrs),
                                    lambda: reference.draft_model_preprocess(**r, **attrs),
                                    args.repeat)
        print(f"{'draft_model_preprocess':<26}{bsz:>6}{op_s * 1e6:>12.1f}{ref_s * 1e6:>15.1f}"
              f"{ref_s / op_s:>9.0f}x", flush=True)
    for bsz in args.bsz:
        s = states.mask_state(rng, bsz)
        t = {n: paddle.to_tensor(a, place=place) for n, a in s.items()}
        r = states.copy_state(s)
        op_s, ref_s = _side_by_side(lambda: ops.update_attn_mask_offsets(**t),
                                    lambda: reference.update_attn_mask_offsets(**r),
                                    args.repeat)
        print(f"{'update_attn_mask_offsets':<26}{bsz:>6}{op_s * 1e6:>12.1f}{ref_s * 1e6:>15.1f}"
              f"{ref_s / op_s:>9.0f}x", flush=True)
    return 0
