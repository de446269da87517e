"""A captured-step workload for Nsight Compute (not a test, not in CI).

    ncu --kernel-name regex:"preprocess_kernel|mask_kernel" \
        --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size \
        python benchmarks/gpu_profile.py --bsz 64

Runs, after a warm-up, a few steps of draft_model_preprocess (asynchronous,
not_need_stop on the GPU) and three update_attn_mask_offsets calls, with the
benchmark's states, so the profiler sees each kernel's own time.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastdeploy_mtp import ops
from fastdeploy_mtp.harness import states  # noqa: E402


def main():
    import paddle

    p = argparse.ArgumentParser()
    p.add_argument("--bsz", type=int, default=64)
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    place = paddle.CUDAPlace(0)
    rng = np.random.default_rng(1)
    s = states.repeatable_preprocess_state(rng, args.bsz, num_model_step=3)
    m = states.mask_state(rng, args.bsz)
    pre = {n: paddle.to_tensor(a, place=place) for n, a in s.items()}
    mask = {n: paddle.to_tensor(a, place=place) for n, a in m.items()}
    attrs = dict(num_model_step=3, truncate_first_token=False, splitwise_prefill=False,
                 kvcache_scheduler_v1=True)
    os.environ["FASTDEPLOY_MTP_ASYNC_MASK"] = "1"
    for _ in range(args.steps + 1):  # the first is the warm-up
        ops.draft_model_preprocess(**pre, **attrs)
        for _ in range(3):
            ops.update_attn_mask_offsets(**mask)
    ops.raise_pending_errors(pre["seq_lens_decoder"])
    tokens = int(m["seq_lens_this_time"].sum())
    print(f"gpu_profile: bsz {args.bsz}, {tokens} mask tokens, {args.steps} steps: ok")


if __name__ == "__main__":
    main()
