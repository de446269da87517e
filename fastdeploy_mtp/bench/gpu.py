"""GPU benchmark (not a test): the ops against the floor and a FastDeploy-shaped baseline.

``python -m fastdeploy_mtp bench-gpu [--bsz ...] [--calls N] [--rounds R]`` on a machine
with paddlepaddle-gpu (the reference ops in ``custom_ops/bench/`` are compiled
on first use).

Per-call latency, median over interleaved rounds, every variant measured in
the same run on the same state:
- sync: ``draft_model_preprocess`` with ``not_need_stop`` on the CPU (the op
  returns once the flag is on the host), against the *floor* (an op of the same
  signature that launches one empty kernel, copies one byte to the host and
  synchronises; the same with a one-tensor op is shown too, the difference
  being Paddle's dispatch of 21 tensors) and the *baseline* (one block of 512
  threads, ``not_need_stop`` copied to the device and back with Paddle tensor
  copies, no checks);
- async: ``not_need_stop`` on the GPU (no copy, no synchronise), against an op
  of the same signature that launches one empty kernel; per-call time of
  back-to-back calls, one sync at the end. "ours async" goes through the
  Python wrapper (``forms.py``, whose ``_library._check_boundary`` checks what
  C++ cannot see), "raw op" calls the registered op positionally, as
  FastDeploy does and as the empty-kernel op is called: the two apart show
  what the wrapper costs;
- the same for ``update_attn_mask_offsets`` (async through
  ``FASTDEPLOY_MTP_ASYNC_MASK=1``).
The baseline's result is compared with our op's at every size (the tests hold
our op to the numpy references).

The captured-step tables (``graph_table``) replay one engine step from a CUDA
graph against a graph of empty kernels, the same launches agreeing only, and
the step as FastDeploy launches it; a corrected form's table times the exact
form of the version it corrects beside it.
"""

from __future__ import annotations

import functools
import os
import statistics
import time

import numpy as np

from .. import _build, ops
from ..buffers import tensors
from ..harness import states
from ..signature import FORMS

K = 3


@functools.lru_cache(maxsize=None)
def bench_library():
    """The benchmark's reference library (every form's FastDeploy-shaped
    baseline), built once like the op library (ops.cached_library)."""
    d = _build.SOURCE_DIR / "bench"
    flags = _build.compile_flags(True)
    return ops.cached_library(
        "bench-" + _build.source_hash(True, d), "fastdeploy_mtp_bench_ops",
        "the benchmark's reference library",
        [str(d / "bench_ops.cc"), str(d / "bench_baselines.cc"), str(d / "bench_kernels.cu"),
         str(d / "agreement_floor.cu")],
        flags, _build.link_flags(True))


class _Env:
    """Sets environment variables for the duration of a timing loop."""

    def __init__(self, env):
        self.env = env or {}

    def __enter__(self):
        self.old = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)

    def __exit__(self, *exc):
        for k, v in self.old.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v


def _per_call(fn, calls: int, sync=None, env=None) -> float:
    with _Env(env):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        if sync is not None:
            sync()
        return (time.perf_counter() - t0) / calls


def _interleaved(variants: dict, calls: int, rounds: int) -> dict:
    """{name: (fn, sync[, env])} -> {name: median seconds per call}."""
    for v in variants.values():
        _per_call(v[0], 1, v[1], v[2] if len(v) > 2 else None)
    times = {n: [] for n in variants}
    for _ in range(rounds):
        for n, v in variants.items():
            times[n].append(_per_call(v[0], calls, v[1], v[2] if len(v) > 2 else None))
    return {n: statistics.median(v) for n, v in times.items()}


def _check_floor_signatures() -> None:
    """The floors must cost what the ops' signatures cost: Paddle's dispatch of
    in-place outputs alone is several microseconds. Compared with the table."""
    from ..registration import differences, read_registered
    from ..signature import DRAFT_MODEL_PREPROCESS, FORMS, UPDATE_ATTN_MASK_OFFSETS

    pairs = [(DRAFT_MODEL_PREPROCESS, n) for n in
             ("bench_floor_preprocess", "bench_empty_preprocess", "bench_agreement_preprocess")]
    pairs += [(UPDATE_ATTN_MASK_OFFSETS, n) for n in
              ("bench_floor_mask", "bench_empty_mask", "bench_agreement_mask")]
    for form, table in FORMS.items():
        pairs.append((table["draft_model_preprocess"], f"bench_baseline_preprocess_{form}"))
        pairs.append((table["update_attn_mask_offsets"], f"bench_baseline_mask_{form}"))
    problems = [f"{name}: {d}" for sig, name in pairs
                for d in differences(sig, read_registered(name))]
    if problems:
        raise RuntimeError("benchmark ops differ from the ops' signatures:\n" + "\n".join(problems))


def _repeatable_state(form: str, rng, bsz: int):
    """A state of `form`'s tensors that stays valid through many calls: the
    shadow form's own, else those of the recompute form's (every other form
    takes a subset of its 22 tensors)."""
    if form == "shadow":
        return states.repeatable_shadow_state(rng, bsz, num_model_step=K)
    s = states.repeatable_recompute_state(rng, bsz, num_model_step=K)
    return {n: s[n] for n in FORMS[form]["draft_model_preprocess"].input_names}


# Each form's FastDeploy-shaped preprocess, its repeatable state and its attributes.
def _form_parts(lib, form: str):
    sig = FORMS[form]["draft_model_preprocess"]
    values = dict(num_model_step=K, truncate_first_token=False, splitwise_prefill=False,
                  kvcache_scheduler_v1=True, is_splitwise_prefill=False)
    return (getattr(lib, f"bench_baseline_preprocess_{form}"),
            lambda rng, bsz, num_model_step: _repeatable_state(form, rng, bsz),
            {a: values[a] for a in sig.attr_names})


def _baseline_correct(lib, s, attrs, place, form: str = "rollback") -> bool:
    """Whether the FastDeploy-shaped preprocess leaves the state our op
    leaves (it checks nothing, but on valid states it must agree; our op is
    held to the references by the tests)."""
    from .. import forms

    shaped = _form_parts(lib, form)[0]
    t, want = tensors(s, place), tensors(s, place)
    shaped(*t.values(), *attrs.values())
    forms.load(form).draft_model_preprocess(**want, **attrs)
    return all(np.array_equal(t[n].numpy(), want[n].numpy()) for n in s)


def run(bsz_list, calls: int, rounds: int = 7, print_fn=print) -> None:
    import paddle

    place = paddle.CUDAPlace(0)
    lib = bench_library()
    ops.load_library()
    _check_floor_signatures()
    attrs = dict(num_model_step=K, truncate_first_token=False, splitwise_prefill=False,
                 kvcache_scheduler_v1=True)
    from .. import forms

    typed, raw = forms.load("rollback"), forms.load("rollback").library
    rng = np.random.default_rng(0)
    probe = paddle.to_tensor(np.zeros(8, np.int32), place=place)
    sync = functools.partial(lib.bench_floor, probe)  # kernel + 1-byte copy + sync

    print_fn(f"paddle {paddle.__version__}; {paddle.device.cuda.get_device_name(0)}; "
             f"medians of {rounds} interleaved rounds of {calls} calls; num_model_step = {K}")
    print_fn("")
    print_fn("draft_model_preprocess, per call (us)")
    print_fn("| bsz | ours sync | floor | ours/floor | floor, 1-tensor op | baseline | ours/baseline "
             "| baseline correct | ours async | empty kernel | async/empty | empty, 1-tensor op "
             "| raw op async | raw/empty |")
    print_fn("|---:|---:|---:|---:|---:|---:|---:|:---|---:|---:|---:|---:|---:|---:|")
    for bsz in bsz_list:
        s = states.repeatable_preprocess_state(rng, bsz, num_model_step=K)
        ours, base, asyn = tensors(s, place), tensors(s, place), tensors(s, place, True)
        r = _interleaved({
            "ours": (lambda: typed.draft_model_preprocess(**ours, **attrs), None),
            "floor": (lambda: lib.bench_floor_preprocess(*base.values(), *attrs.values()), None),
            "floor1": (lambda: lib.bench_floor(probe), None),
            "baseline": (lambda: lib.bench_baseline_preprocess_rollback(*base.values(),
                                                                         *attrs.values()), None),
            "async": (lambda: typed.draft_model_preprocess(**asyn, **attrs), sync),
            "raw": (lambda: raw.draft_model_preprocess(*asyn.values(), *attrs.values()), sync),
            "empty": (lambda: lib.bench_empty_preprocess(*base.values(), *attrs.values()), sync),
            "empty1": (lambda: lib.bench_empty(probe), sync),
        }, calls, rounds)
        ok = _baseline_correct(lib, s, attrs, place)
        us = {k: v * 1e6 for k, v in r.items()}
        print_fn(f"| {bsz} | {us['ours']:.1f} | {us['floor']:.1f} | {us['ours'] / us['floor']:.2f} "
                 f"| {us['floor1']:.1f} | {us['baseline']:.1f} | {us['ours'] / us['baseline']:.2f} "
                 f"| {'yes' if ok else 'NO'} | {us['async']:.1f} | {us['empty']:.1f} "
                 f"| {us['async'] / us['empty']:.2f} | {us['empty1']:.1f} "
                 f"| {us['raw']:.1f} | {us['raw'] / us['empty']:.2f} |")

    print_fn("")
    print_fn("update_attn_mask_offsets, per call (us)")
    print_fn("| bsz | ours sync | floor | ours/floor | ours async | empty kernel | async/empty "
             "| raw op async | raw/empty |")
    print_fn("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for bsz in bsz_list:
        s = states.mask_state(rng, bsz)
        t = tensors(s, place)
        mask = lambda: typed.update_attn_mask_offsets(**t)  # noqa: E731
        r = _interleaved({
            "ours": (mask, None),
            "floor": (lambda: lib.bench_floor_mask(*t.values()), None),
            "async": (mask, sync, {"FASTDEPLOY_MTP_ASYNC_MASK": "1"}),
            "raw": (lambda: raw.update_attn_mask_offsets(*t.values()), sync,
                    {"FASTDEPLOY_MTP_ASYNC_MASK": "1"}),
            "empty": (lambda: lib.bench_empty_mask(*t.values()), sync),
        }, calls, rounds)
        us = {k: v * 1e6 for k, v in r.items()}
        print_fn(f"| {bsz} | {us['ours']:.1f} | {us['floor']:.1f} | {us['ours'] / us['floor']:.2f} "
                 f"| {us['async']:.1f} | {us['empty']:.1f} | {us['async'] / us['empty']:.2f} "
                 f"| {us['raw']:.1f} | {us['raw'] / us['empty']:.2f} |")
    typed.raise_pending_errors(probe)


CALL_BSZ = (1, 64, 512, 1024, 8192)
GRAPH_BSZ = (1, 64, 512, 1024, 4096, 8192)
# The second table: attn_mask_offsets_full as wide as a real engine's
# (max_model_len columns), so its prompts run to thousands of tokens.
LONG_PROMPT_BSZ = (1, 8, 64, 512)
LONG_PROMPT_COLS = 4096
# The third: the first table's draws, attn_mask_offsets_full widened to this
# many columns, as a real engine's is. Its batches of decodes and short prompts
# then run the kernels that may share out long prompts.
WIDE_TABLE_COLS = 1024
MASK_CALLS = 3  # update_attn_mask_offsets calls in one captured step (K = 3 substeps)


def _replay_us(graph, steps_in_graph: int, replays: int) -> float:
    """GPU time per captured step: the graph holds several steps back to back,
    so the CPU's cudaGraphLaunch does not hide the GPU's time."""
    import paddle

    graph.replay()
    paddle.device.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(replays):
        graph.replay()
    paddle.device.cuda.synchronize()
    return (time.perf_counter() - t0) / (replays * steps_in_graph) * 1e6


def _baseline_mask_correct(lib, m, place, form: str = "rollback") -> bool:
    """Whether the FastDeploy-shaped mask call gives our op's output and
    state (it checks nothing, but on valid states it must agree)."""
    from .. import forms

    t, want = tensors(m, place), tensors(m, place)
    out = getattr(lib, f"bench_baseline_mask_{form}")(*t.values())
    out = out[0] if isinstance(out, (list, tuple)) else out
    want_out = forms.load(form).update_attn_mask_offsets(**want)
    return (np.array_equal(out.numpy(), want_out.numpy())
            and all(np.array_equal(t[n].numpy(), want[n].numpy()) for n in m))


def graph_table(bsz_list=GRAPH_BSZ, steps_in_graph: int = 20, replays: int = 50, rounds: int = 5,
                print_fn=print, mask_cols=None, widen=None, form: str = "rollback") -> None:
    """One captured step (preprocess with not_need_stop on the GPU, then
    MASK_CALLS mask calls) against a captured graph of as many empty kernels,
    against the same launches with kernels that only agree (the floor the
    launch shapes put under the step, before any request is read), and
    against the step as FastDeploy launches it (one block of 512 threads a
    call, nothing checked, the mask op's output zeroed first; its preprocess
    skips every request past 511: "FastDeploy-shaped correct").
    `mask_cols`: attn_mask_offsets_full's columns, which bound a prompt's
    tokens (states.mask_state's short default unless given); `widen`: then
    give attn_mask_offsets_full that many columns, the prompts as drawn.
    `form`: FastDeploy's form of draft_model_preprocess, against
    FastDeploy's launch of that form. A corrected form is also timed against
    the exact form of the version it corrects (the same tensors, the same
    state), which is what switching the plugin's mode changes."""
    import paddle
    from paddle.device.cuda import graphs

    place = paddle.CUDAPlace(0)
    lib = bench_library()
    _check_floor_signatures()
    shaped_preprocess, repeatable, attrs = _form_parts(lib, form)
    floor_attrs = _form_parts(lib, "rollback")[2]
    rng = np.random.default_rng(1)
    probe = paddle.to_tensor(np.zeros(8, np.int32), place=place)
    print_fn("")
    prompts = (f"prompts of up to {mask_cols} tokens" if mask_cols else
               "the short prompts of states.mask_state")
    if widen:
        prompts += f", attn_mask_offsets_full {widen} columns wide"
    if form != "rollback":
        prompts += f", the {form} form"
    from .. import forms

    form_ops = forms.load(form)
    exact = form.removeprefix("corrected_") if form.startswith("corrected_") else None
    exact_ops = forms.load(exact) if exact else None
    mask_names = FORMS[form]["update_attn_mask_offsets"].input_names
    shaped_mask_op = getattr(lib, f"bench_baseline_mask_{form}")
    print_fn(f"captured step (CUDA graph replay): draft_model_preprocess + {MASK_CALLS} x "
             f"update_attn_mask_offsets, {prompts}, per step (us); {steps_in_graph} steps a "
             f"graph, medians of {rounds} rounds of {replays} replays")
    print_fn("| bsz | tokens | replayed step | graph of empty kernels | ratio "
             "| launches agreeing only | step / agreeing only | FastDeploy-shaped step "
             "| step / FastDeploy-shaped | FastDeploy-shaped correct |"
             + (f" {exact} form's step | step / {exact}'s |" if exact else ""))
    print_fn("|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---|" + ("---:|---:|" if exact else ""))
    for bsz in bsz_list:
        s = repeatable(rng, bsz, num_model_step=K)
        m_all = states.mask_state(rng, bsz, mask_cols=mask_cols)
        if widen:
            m_all = states.widen_mask_full(m_all, widen)
        m = {n: m_all[n] for n in mask_names}  # the form's tensors
        tokens = m["ids_remove_padding"].shape[0]
        pre, mask = tensors(s, place, True), tensors(m, place)
        form_ops.draft_model_preprocess(**pre, **attrs)  # warm-up: error record, grid scratch
        with _Env({"FASTDEPLOY_MTP_ASYNC_MASK": "1"}):
            form_ops.update_attn_mask_offsets(**mask)
        form_ops.raise_pending_errors(probe)
        # The agreeing launches take the rollback form's tensors (they only
        # agree, and read nothing but the batch's sizes): a rollback state of
        # as many requests, and the mask state with its cursor.
        floor_pre = tensors(states.repeatable_preprocess_state(rng, bsz, num_model_step=K),
                            place, True)
        floor_mask = tensors(m_all, place)
        agreeing = lambda: (lib.bench_agreement_preprocess(*floor_pre.values(),  # noqa: E731
                                                           *floor_attrs.values()),
                            [lib.bench_agreement_mask(*floor_mask.values())
                             for _ in range(MASK_CALLS)])
        agreeing()  # warm-up: the agreement launches' scratch
        shaped_pre, shaped_mask = tensors(s, place, True), tensors(m, place)
        fastdeploy = lambda: (  # noqa: E731
            shaped_preprocess(*shaped_pre.values(), *attrs.values()),
            [shaped_mask_op(*shaped_mask.values()) for _ in range(MASK_CALLS)])
        correct = (_baseline_mask_correct(lib, m, place, form)
                   and _baseline_correct(lib, s, attrs, place, form))
        ours, empty, floor = graphs.CUDAGraph(), graphs.CUDAGraph(), graphs.CUDAGraph()
        shaped = graphs.CUDAGraph()
        ours.capture_begin()
        for _ in range(steps_in_graph):
            form_ops.draft_model_preprocess(**pre, **attrs)
            for _ in range(MASK_CALLS):
                form_ops.update_attn_mask_offsets(**mask)
        ours.capture_end()
        empty.capture_begin()
        for _ in range(steps_in_graph * (1 + MASK_CALLS)):
            lib.bench_empty(probe)
        empty.capture_end()
        floor.capture_begin()
        for _ in range(steps_in_graph):
            agreeing()
        floor.capture_end()
        shaped.capture_begin()
        for _ in range(steps_in_graph):
            fastdeploy()
        shaped.capture_end()
        graphs_of = [("ours", ours), ("empty", empty), ("floor", floor), ("shaped", shaped)]
        if exact:
            # The exact form on a copy of the same state: its registration is
            # the corrected form's, so the same tensors stay valid through it.
            exact_pre, exact_mask = tensors(s, place, True), tensors(m, place)
            exact_ops.draft_model_preprocess(**exact_pre, **attrs)  # warm-up
            with _Env({"FASTDEPLOY_MTP_ASYNC_MASK": "1"}):
                exact_ops.update_attn_mask_offsets(**exact_mask)
            exact_ops.raise_pending_errors(probe)
            exact_graph = graphs.CUDAGraph()
            exact_graph.capture_begin()
            for _ in range(steps_in_graph):
                exact_ops.draft_model_preprocess(**exact_pre, **attrs)
                for _ in range(MASK_CALLS):
                    exact_ops.update_attn_mask_offsets(**exact_mask)
            exact_graph.capture_end()
            graphs_of.append(("exact", exact_graph))
        times = {name: [] for name, _ in graphs_of}
        for _ in range(rounds):
            for name, g in graphs_of:
                times[name].append(_replay_us(g, steps_in_graph, replays))
        form_ops.raise_pending_errors(probe)  # every replayed call was valid
        if exact:
            exact_ops.raise_pending_errors(probe)
        o, e, f, d = (statistics.median(times[k]) for k in ("ours", "empty", "floor", "shaped"))
        row = (f"| {bsz} | {tokens} | {o:.1f} | {e:.1f} | {o / e:.2f} | {f:.1f} | {o / f:.2f} "
               f"| {d:.1f} | {o / d:.2f} | {'yes' if correct else 'NO'} |")
        if exact:
            x = statistics.median(times["exact"])
            row += f" {x:.1f} | {o / x:.2f} |"
        print_fn(row)
        for _, g in graphs_of:
            g.reset()


def main(args) -> int:
    import sys

    from ..devices import gpu_problem

    problem = gpu_problem("bench-gpu")
    if problem:
        print(f"{problem}. `bench --device cpu` times the CPU path", file=sys.stderr)
        return 2
    if args.form != "rollback":
        # Another form: its captured step against FastDeploy's launch of it.
        graph_table(args.bsz or GRAPH_BSZ, rounds=args.rounds, form=args.form)
        return 0
    if not args.graph_only:
        run(args.bsz or CALL_BSZ, args.calls, args.rounds)
    graph_table(args.bsz or GRAPH_BSZ, rounds=args.rounds)
    graph_table(args.bsz or LONG_PROMPT_BSZ, rounds=args.rounds, mask_cols=LONG_PROMPT_COLS)
    graph_table(args.bsz or GRAPH_BSZ, rounds=args.rounds, widen=WIDE_TABLE_COLS)
    return 0
