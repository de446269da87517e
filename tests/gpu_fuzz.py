"""Fuzz run for compute-sanitizer: both ops on the GPU over random valid and
corrupted states, each result compared with the numpy reference.

python tests/gpu_fuzz.py [--iterations N] [--max-bsz B] [--mask-cols M] [--seed S]; exits 1
on any mismatch. --mask-cols gives attn_mask_offsets_full M columns, so prompts run to
M tokens (past 64, a prompt is shared out among its block's threads). --seed draws
other states than CI's runs (its default, 2026).
Corrupted states get one random field of one request set to an extreme value;
the op must then either refuse (leaving every tensor unchanged) or agree with
the reference, and never touch memory outside a tensor (the sanitizer's part).
Every fourth iteration also moves one cell of a fresh state onto a bound
(bad_states.seek_bound: the value where the reference's verdict changes) and
calls both ops on both sides of it: where a check is one off, the op writes
one past a tensor, and the sanitizer sees it. Every fifth iteration also
calls both ops on fresh states whose tables are cut to 0, 1 or 2 columns.

--device guarded runs the same calls (but the hostile ones, which need Paddle
tensors) through the CPU driver with a guard page on each side of every
tensor (tests/guarded.py): the CPU's own memory check, at any batch size.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastdeploy_mtp import ops, reference
from fastdeploy_mtp.harness import states  # noqa: E402
from fastdeploy_mtp.signature import DRAFT_MODEL_PREPROCESS, UPDATE_ATTN_MASK_OFFSETS  # noqa: E402
from helpers import GUARDED, call_op, to_tensors  # noqa: E402
from bad_states import (corrupt, mismatch_at_bound, narrow_tables, outcome_mismatch,  # noqa: E402
                        seek_bound)

PRE_FIELDS = ["seq_lens_encoder", "seq_lens_decoder", "accept_num", "base_model_step_idx",
              "base_model_seq_lens_decoder", "step_idx", "mask_rollback"]
MASK_FIELDS = ["seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "cu_seqlens_q",
               "attn_mask_offsets_full", "attn_mask_offsets_decoder", "mask_rollback"]


def hostile_calls(rng, s, device) -> bool:
    """The classes the value checks cannot see: a None, two written arguments
    sharing memory, a written tensor requiring grad. Each must be refused with
    every other tensor unchanged (and, under the sanitizer, no bad access)."""
    import paddle

    from helpers import place_of

    attrs = dict(num_model_step=2, truncate_first_token=False, splitwise_prefill=False,
                 kvcache_scheduler_v1=True)
    ok = True
    cases = ("none", "overlap", "grad")
    for case in cases:
        t = to_tensors(s, device)
        names = [n for n in t if n != "not_need_stop"]
        victim = names[int(rng.integers(len(names)))]
        if case == "none":
            t[victim] = None
        elif case == "overlap":
            buf = paddle.to_tensor(np.zeros(2 * s["mask_rollback"].size + 4, np.int32),
                                   place=place_of(device))
            n = s["mask_rollback"].shape[0]
            t["mask_rollback"], t["accept_num"] = buf[0:n].reshape(s["mask_rollback"].shape), \
                buf[2:n + 2].reshape(s["accept_num"].shape)
        else:
            t["seq_lens_decoder"].stop_gradient = False
        before = {k: v.numpy().copy() for k, v in t.items() if v is not None}
        try:
            ops.draft_model_preprocess(**t, **attrs)
            ok = False  # must have been refused
        except ops.BadInputError:
            pass
        after = {k: v.numpy() for k, v in t.items() if v is not None}
        ok &= all(after[k].tobytes() == before[k].tobytes() for k in before)
    return ok


def runners(attrs) -> tuple:
    """(run_op, run_ref) for each op on a numpy state: draft_model_preprocess
    with `attrs`, then update_attn_mask_offsets."""
    return ((lambda t: call_op(DRAFT_MODEL_PREPROCESS, t, attrs),
             lambda r: reference.draft_model_preprocess(r, **attrs)),
            (lambda t: call_op(UPDATE_ATTN_MASK_OFFSETS, t),
             reference.update_attn_mask_offsets))


def preprocess_state(rng, bsz, attrs, extra_rows):
    """A valid draft_model_preprocess state drawn for `attrs`' flags."""
    return states.preprocess_state(rng, bsz, num_model_step=attrs["num_model_step"],
                                   splitwise_prefill=attrs["splitwise_prefill"],
                                   truncate_first_token=attrs["truncate_first_token"],
                                   extra_rows=extra_rows)


def bound_calls(rng, bsz, attrs, device, mask_cols) -> tuple:
    """Both ops on both sides of a bound in a fresh state of each (its own
    random stream: the other iterations' states stay as they were). Returns
    (whether every outcome matched the reference, op calls made)."""
    s = preprocess_state(rng, bsz, attrs, extra_rows=1)
    m = states.mask_state(rng, bsz, extra_rows=1, mask_cols=mask_cols)
    ok, calls = True, 0
    for state, fields, (run_op, run_ref) in zip((s, m), (PRE_FIELDS, MASK_FIELDS), runners(attrs)):
        found = seek_bound(rng, state, fields, run_ref)
        if found is not None:
            mismatch = mismatch_at_bound(state, found, run_op, run_ref, device)
            if mismatch is not None:
                print(f"at a bound: {mismatch}", flush=True)
            ok &= mismatch is None
            calls += 2
    return ok, calls


def narrow_calls(rng, bsz, attrs, device) -> tuple:
    """Both ops on a fresh state of each whose 2-D inputs are cut to 0, 1 or 2
    columns (bad_states.narrow_tables: a request's first column may lie past
    its row), one cell corrupted besides, from a random stream of its own.
    Returns (whether both outcomes matched the reference, op calls made)."""
    s = preprocess_state(rng, bsz, attrs, extra_rows=int(rng.integers(2)))
    m = states.mask_state(rng, bsz, extra_rows=int(rng.integers(2)))
    ok = True
    sigs = (DRAFT_MODEL_PREPROCESS, UPDATE_ATTN_MASK_OFFSETS)
    for state, fields, run, sig in zip((s, m), (PRE_FIELDS, MASK_FIELDS), runners(attrs), sigs):
        narrow_tables(rng, state, keep=("decode_states",))
        corrupt(rng, state, fields)
        mismatch = outcome_mismatch(*run, state, device, field=True, sig=sig)
        if mismatch is not None:
            print(f"narrow tables: {mismatch}", flush=True)
        ok &= mismatch is None
    return ok, 2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--max-bsz", type=int, default=2048)
    p.add_argument("--mask-cols", type=int, default=None)
    p.add_argument("--device", choices=["gpu", "cpu", GUARDED], default="gpu")
    p.add_argument("--seed", type=int, default=2026)
    args = p.parse_args()
    rng, bound_rng = np.random.default_rng(args.seed), np.random.default_rng(args.seed + 1)
    narrow_rng = np.random.default_rng(args.seed + 2)
    counts = {"valid": 0, "corrupted": 0, "at a bound": 0, "narrow": 0, "hostile": 0,
              "mismatch": 0}
    for it in range(args.iterations):
        bsz = int(rng.integers(1, args.max_bsz + 1))
        bad = it % 2 == 1
        k = int(rng.integers(1, 6))
        attrs = dict(num_model_step=k, truncate_first_token=bool(rng.integers(2)),
                     splitwise_prefill=bool(rng.integers(2)), kvcache_scheduler_v1=bool(rng.integers(2)))
        s = preprocess_state(rng, bsz, attrs, extra_rows=1)
        preprocess, mask = runners(attrs)
        if bad:
            corrupt(rng, s, PRE_FIELDS)
        # Both refuse with the same request, or both agree on every array.
        ok = outcome_mismatch(*preprocess, s, args.device) is None
        m = states.mask_state(rng, bsz, extra_rows=1, padding_tokens=int(rng.integers(0, 3)),
                              mask_cols=args.mask_cols)
        if bad:
            corrupt(rng, m, MASK_FIELDS)
        ok &= outcome_mismatch(*mask, m, args.device) is None
        if it % 4 == 3:
            bound_ok, calls = bound_calls(bound_rng, bsz, attrs, args.device, args.mask_cols)
            ok &= bound_ok
            counts["at a bound"] += calls
        if it % 5 == 4:
            narrow_ok, calls = narrow_calls(narrow_rng, bsz, attrs, args.device)
            ok &= narrow_ok
            counts["narrow"] += calls
        if it % 10 == 9 and args.device != GUARDED:
            ok &= hostile_calls(rng, s, args.device)
            counts["hostile"] += 3
        counts["corrupted" if bad else "valid"] += 2
        counts["mismatch"] += 0 if ok else 1
        if not ok:
            print(f"MISMATCH at iteration {it} (bsz {bsz}, attrs {attrs})", flush=True)
    print(f"gpu_fuzz: seed {args.seed}: {counts['valid']} valid, {counts['corrupted']} corrupted, "
          f"{counts['at a bound']} at a bound, {counts['narrow']} with narrow tables and "
          f"{counts['hostile']} hostile (None, overlap, grad) op calls, "
          f"{counts['mismatch']} mismatches", flush=True)
    return 1 if counts["mismatch"] else 0


if __name__ == "__main__":
    sys.exit(main())
