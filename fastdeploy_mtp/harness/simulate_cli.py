"""The simulator's command line: ``python -m fastdeploy_mtp simulate ...``.

Arguments, their checks (all before the run), the plot and the summary; the
loop itself is ``simulate.run``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Optional

from ..devices import gpu_problem
from ..plugin import CORRECTED_OF
from ..signature import DEFAULT_FORM, FORMS
from .simulate import run

# Bounds that keep a run within this machine's memory and a sensible time.
LIMITS = {"num_model_steps": 64, "steps": 100_000, "batch": 4096, "max_prompt": 8192,
          "max_dec_len": 8192}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=["mixed", "pd"], default="mixed",
                   help="mixed: one node prefills and decodes; pd: a prefill node (one draft "
                        "substep) hands each request to a decode node")
    p.add_argument("--num-model-steps", "-k", type=int, default=3, metavar="K",
                   help="draft tokens proposed per engine step (num_model_steps)")
    p.add_argument("--steps", type=int, default=60, metavar="N", help="engine steps to run")
    p.add_argument("--batch", type=int, default=8, metavar="N",
                   help="slots (max_num_seqs): the most requests running at once")
    p.add_argument("--seed", type=int, default=0, help="seed of the workload and the model")
    p.add_argument("--without-fix", action="store_true",
                   help="run without the fix (the op's rollback of the mask ignored, a "
                        "decode node presetting mask_rollback 1): fails for K >= 2")
    p.add_argument("--runner", choices=["ours", "fastdeploy"], default="ours",
                   help="who inserts requests: our MTPProposer, or FastDeploy's own "
                        "per-role inserts and presets (its decode node: the first token as "
                        "a one-token prefill: step_idx 1, seq_lens_decoder = prompt length, "
                        "mask_rollback 1, the cursor at that token's offset + 1; no release) "
                        "and its positional call, also counting what FastDeploy's kernels "
                        "would write outside a row")
    p.add_argument("--form", choices=list(FORMS), default=DEFAULT_FORM,
                   help="which form of the ops runs: rollback (21 tensors: "
                        "the reviewed design of FastDeploy PR #5738), recompute (22, with "
                        "recompute_token_num: FastDeploy commit 0956b09a's rules), pr5245 (20: "
                        "FastDeploy ba915e03e, no mask_rollback), pr5738 (22: PR #5738 as "
                        "merged, 9018ccf74), pr6403 (pr5738 with 2178f2829's decode_states "
                        "rule), xpu (22: FastDeploy's XPU op at c29e86fc9, pr5245's rules) "
                        "or shadow (17, develop's: the draft's state derived from the "
                        "target model's every step). A form other "
                        "than rollback is driven by FastDeploy's runner of that version: "
                        "needs --runner fastdeploy")
    p.add_argument("--plugin", action="store_true",
                   help="with --runner fastdeploy and a form FastDeploy shipped (pr5245, "
                        "pr5738, pr6403, shadow): FastDeploy of that version with our plugin "
                        "in its corrected mode, the default: the corrected form behind the "
                        "same signature and the plugin's patches of the proposer")
    p.add_argument("--chunk", type=int, default=0, metavar="N",
                   help="with --runner fastdeploy: chunked prefill, FastDeploy's scheduler "
                        "handing each prompt to the insert in chunks of N tokens (a chunk "
                        "never cuts an image span), one engine step each; on a mixed node "
                        "and a prefill node (a decode node's insert is the first token "
                        "alone); 0: each prompt whole")
    p.add_argument("--prefix-cache", type=float, default=0.0, metavar="P",
                   help="with --runner fastdeploy: probability that a new prompt's prefill "
                        "starts after a prefix-cache hit of whole 4-token blocks "
                        "(seq_lens_decoder = the cached tokens at insert), the draft's cached "
                        "K/V of the prefix taken as right; mixed and prefill nodes")
    p.add_argument("--draft-model", choices=["tiny"], default=None,
                   help="a real attention model as the draft, checked against a cache-free "
                        "recomputation at every forward (default: a scripted draft, no model)")
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                   help="where the draft state lives and the ops run (gpu: the CUDA kernels; "
                        "needs paddlepaddle-gpu and a GPU). The draft model always runs on "
                        "the CPU")
    p.add_argument("--graphs", action="store_true",
                   help="with --device gpu: capture preprocess and the mask call in CUDA graphs "
                        "once, then only replay them, as a production runner does")
    p.add_argument("--image-prob", type=float, default=0.0, metavar="P",
                   help="probability that a prompt has image spans (bidirectional mask)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="also run with and without the fix and draw the mask-offset error per "
                        "step (and the disagreements, with --draft-model); needs matplotlib")
    p.add_argument("--quiet", action="store_true", help="the summary only, no row per step")
    p.add_argument("--json", action="store_true",
                   help="print the result as one JSON document on stdout instead of the text "
                        "(no row per step; the same exit code)")
    p.add_argument("--max-prompt", type=int, default=24, metavar="N",
                   help="longest prompt, in tokens (each is 2..N, uniformly)")
    p.add_argument("--max-dec-len", type=int, default=40, metavar="N",
                   help="tokens after which the base model ends a request")
    p.add_argument("--arrival-prob", type=float, default=0.7, metavar="P",
                   help="per engine step, probability that a free slot gets a new request")
    p.add_argument("--finish-prob", type=float, default=0.04, metavar="P",
                   help="per verification, probability that the base model ends the request "
                        "early")
    p.add_argument("--block-prob", type=float, default=0.04, metavar="P",
                   help="per verification, probability that the request is parked for 1..3 "
                        "block steps")
    p.add_argument("--kv-scheduler", choices=["v1", "v0"], default="v1",
                   help="v1: a block step parks the request (kvcache_scheduler_v1); v0: it "
                        "drops the request, which the runner prefills again once the block "
                        "ends (its prompt and the tokens generated so far); mixed mode only")
    p.add_argument("--draft-eos-prob", type=float, default=0.05, metavar="P",
                   help="per draft token, probability that the draft proposes an end token "
                        "and stops while the base model goes on")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


# The README's words: the `plot` extra in a checkout, or the package itself.
MATPLOTLIB_MISSING = ('--plot needs matplotlib, which is not installed: pip install -e ".[plot]" '
                      "in a checkout, or pip install matplotlib")


def _write_problem(path: str) -> Optional[str]:
    """Why a file `path` cannot be written, found by writing in its place
    (os.access says yes to root everywhere, /proc included): an existing
    file is opened for appending and left as it was, else a scratch file is
    made beside it and removed."""
    try:
        if os.path.exists(path):
            with open(path, "ab"):
                pass
        else:
            fd, scratch = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)),
                                           prefix=".fastdeploy_mtp-plot-")
            os.close(fd)
            os.unlink(scratch)
    except OSError as e:
        return e.strerror or str(e)
    return None


def plot_problem(path: str):
    """Why `--plot path` could not be written, checked before the run."""
    try:
        import matplotlib
    except ImportError:
        return MATPLOTLIB_MISSING
    matplotlib.use("Agg")
    from matplotlib.backend_bases import FigureCanvasBase

    ext = os.path.splitext(path)[1].lstrip(".").lower()
    formats = FigureCanvasBase.get_supported_filetypes()
    if ext not in formats:
        return (f"--plot {path}: unknown image type {ext!r}; use one of "
                f"{', '.join(sorted(formats))}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"--plot {path}: the folder {folder} does not exist"
    if os.path.isdir(path):
        return f"--plot {path}: is a folder"
    why = _write_problem(path)
    if why:
        return f"--plot {path}: cannot write there ({why})"
    return None


def validate(args) -> Optional[str]:
    if args.seed < 0:
        return f"--seed must be >= 0, got {args.seed}"
    for name, low in (("num_model_steps", 1), ("steps", 1), ("batch", 1), ("max_prompt", 2),
                      ("max_dec_len", 2)):
        v, high = getattr(args, name), LIMITS[name]
        if not low <= v <= high:
            return f"{_flag(name)} must be within [{low}, {high}], got {v}"
    if not 0 <= args.chunk <= LIMITS["max_prompt"]:
        return f"--chunk must be within [0, {LIMITS['max_prompt']}] (0: off), got {args.chunk}"
    for name in ("arrival_prob", "finish_prob", "block_prob", "draft_eos_prob", "image_prob",
                 "prefix_cache"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            return f"{_flag(name)} must be within [0, 1], got {getattr(args, name)}"
    if args.runner == "fastdeploy" and (args.graphs or args.without_fix):
        return "--runner fastdeploy replays FastDeploy's runner eagerly, with today's ops: " \
               "not with --graphs or --without-fix"
    if (args.chunk or args.prefix_cache) and args.runner != "fastdeploy":
        return "--chunk and --prefix-cache replay FastDeploy's inserts of a prefill chunk: add " \
               "--runner fastdeploy (our proposer's insert takes a prompt whole)"
    if getattr(args, "plugin", False) and (args.runner != "fastdeploy"
                                           or args.form not in CORRECTED_OF):
        return f"--plugin is FastDeploy's runner with our plugin: add --runner fastdeploy and " \
               f"--form one of {', '.join(CORRECTED_OF)}"
    if args.form != "rollback" and args.runner != "fastdeploy":
        return f"--form {args.form} is driven by FastDeploy's runner of that version: add " \
               "--runner fastdeploy"
    if args.kv_scheduler == "v0" and (args.mode != "mixed" or args.runner != "ours"):
        return "--kv-scheduler v0 runs a mixed node with our runner (a dropped request is " \
               "prefilled again on the node that dropped it)"
    if args.graphs and args.device != "gpu":
        return "--graphs needs --device gpu (CUDA graphs capture GPU work)"
    if args.device == "gpu":
        problem = gpu_problem("--device gpu")
        if problem:
            return problem
    if args.plot and args.runner == "fastdeploy":
        # The run without the fix is our proposer's: FastDeploy's runner
        # inserts and presets by its own rules either way, so both curves
        # would be one.
        return "--plot draws our runner with and without the fix; FastDeploy's runner has " \
               "no run without it: leave out --plot or --runner fastdeploy (the verdict " \
               "compares the forms under FastDeploy's runner)"
    if args.plot:
        return plot_problem(args.plot)
    return None


def plot(args, path: str, say=print):
    """Per step, with and without the fix: the worst mask-offset error, and
    with --draft-model the disagreements with the cache-free recomputation.
    What it drew (a dict), or None (said on stderr) where the file could not
    be written. `say` prints its line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fixed = run(args, legacy=False, print_rows=False)
    old = run(args, legacy=True, print_rows=False)
    panels = [("max |mask offset - true end|", lambda t: t.step_error)]
    if fixed.model is not None:
        panels.append(("disagreements with the cache-free model",
                       lambda t: t.model.step_disagreements))
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 3.2 * len(panels)), squeeze=False)
    for ax, (label, series) in zip(axes[:, 0], panels):
        ax.plot(series(old), label="without the fix", color="tab:red")
        ax.plot(series(fixed), label="with the fix", color="tab:green")
        ax.set_ylabel(label)
        ax.legend()
    axes[-1, 0].set_xlabel("engine step")
    what = "mask-offset error" + (" and draft disagreements" if fixed.model is not None else "")
    mode = {"mixed": "mixed node", "pd": "PD-split"}[args.mode]
    axes[0, 0].set_title(f"{what} per step, {mode}, num_model_steps {args.num_model_steps}"
                         + (f", image prob {args.image_prob}" if args.image_prob else ""))
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100)
    except OSError as e:  # the place was checked before the run; it changed since
        print(f"simulate: --plot {path}: could not write it ({e.strerror or e})", file=sys.stderr)
        return None
    said = f"{fixed.violations} violations"
    said_old = f"{old.violations} violations"
    if fixed.model is not None:
        said += f", {fixed.model.disagreements} disagreements"
        said_old += f", {old.model.disagreements} disagreements"
    say(f"plot: {path} (with the fix: {said}; without: {said_old})")

    def counts(t):
        return {"violations": t.violations,
                "disagreements": t.model.disagreements if t.model is not None else None}

    return {"path": path, "with_the_fix": counts(fixed), "without_the_fix": counts(old)}


def summary(args, t, plotted=None) -> dict:
    """The run's result as `--json` prints it."""
    options = {name: getattr(args, name) for name in (
        "mode", "num_model_steps", "steps", "batch", "seed", "without_fix", "runner", "form",
        "chunk", "prefix_cache", "draft_model", "device", "graphs", "image_prob",
        "kv_scheduler")}
    model = None if t.model is None else {
        "tokens": t.model.tokens, "disagreements": t.model.disagreements,
        "max_logit_diff": float(t.model.max_diff), "first": t.model.first}
    outside = None if t.outside is None else {
        "total": t.outside.total, "preprocess": t.outside.preprocess,
        "draft_update": t.outside.draft_update, "first": t.outside.first or None}
    return {"command": "simulate", "options": options, "ok": not t.failed,
            "failures": t.failures, "substeps": t.substeps, "tokens_checked": t.tokens,
            "violations": {"total": t.violations, "mask_offsets": t.mask_violations,
                           "alignment": t.align_violations},
            "first_violation": t.first_violation, "draft_model": model,
            "fastdeploy_writes_outside": outside,
            "replays": t.replays if args.graphs else None,
            "reprefilled": t.reprefilled if args.kv_scheduler == "v0" else None,
            "plot": plotted}


def main(args) -> int:
    problem = validate(args)
    if problem:
        print(f"simulate: {problem}", file=sys.stderr)
        return 2
    behaviour = "WITHOUT the fix" if args.without_fix else "with the fix"
    extra = ", ops on the GPU" if args.device == "gpu" else ""
    extra += ", replayed from CUDA graphs" if args.graphs else ""
    extra += f", draft model {args.draft_model}" if args.draft_model else ""
    extra += f", image prob {args.image_prob}" if args.image_prob else ""
    extra += ", FastDeploy's runner" if args.runner == "fastdeploy" else ""
    extra += f", the {args.form} form" if args.form != "rollback" else ""
    extra += f" with our plugin (the {CORRECTED_OF[args.form]} form and its patches)" \
        if getattr(args, "plugin", False) else ""
    extra += ", block steps drop requests (v0)" if args.kv_scheduler == "v0" else ""
    extra += f", prefill chunks of {args.chunk}" if args.chunk else ""
    extra += f", prefix-cache prob {args.prefix_cache}" if args.prefix_cache else ""
    if args.json:
        return _main_json(args)
    print(f"simulate: mode {args.mode}, num_model_steps {args.num_model_steps}, {args.steps} steps, "
          f"batch {args.batch}, seed {args.seed}, {behaviour}{extra}")
    t = run(args, legacy=args.without_fix, print_rows=not args.quiet)
    print(f"summary: {args.steps} steps, {t.substeps} substeps, {t.tokens} tokens checked, "
          f"{t.violations} violations ({t.mask_violations} mask offsets, "
          f"{t.align_violations} alignment)"
          + (f"; {t.replays} op calls replayed from CUDA graphs" if args.graphs else "")
          + (f"; {t.reprefilled} dropped requests prefilled again"
             if args.kv_scheduler == "v0" else ""))
    if t.model is not None:
        print(f"draft model: {t.model.tokens} draft tokens checked against a cache-free "
              f"recomputation, {t.model.disagreements} disagreements, max |logit diff| "
              f"{t.model.max_diff:.3g}")
    if t.outside is not None:
        print(f"FastDeploy's kernels on these states: {t.outside.total} writes outside a row or "
              f"tensor ({t.outside.preprocess} by draft_model_preprocess, "
              f"{t.outside.draft_update} by draft_model_update)"
              + (f"; first: {t.outside.first}" if t.outside.first else ""))
    if t.first_violation:
        print(f"first violation: {t.first_violation}")
    if t.model is not None and t.model.first:
        print(f"first disagreement: {t.model.first}")
    if args.without_fix and not t.failed and args.num_model_steps == 1:
        print("with num_model_steps 1 there is nothing to roll back: without the fix "
              "the mask is right as well")
    elif args.without_fix and not t.failed and t.rolled_back == 0:
        print(f"no request reached a decode step (each ended first, --max-dec-len "
              f"{args.max_dec_len}): nothing was rolled back, so the run without the fix "
              f"could not drift; raise --max-dec-len or --steps to see it")
    plotted = plot(args, args.plot) is not None if args.plot else True
    if not t.failed:
        print("OK: the mask offsets stayed right" + (" and the draft model computed exactly "
                                                     "what a cache-free one does"
                                                     if t.model is not None else ""))
    else:
        print("FAILED: " + "; ".join(t.failures))
    if not plotted:
        return 2
    return 1 if t.failed else 0


def _main_json(args) -> int:
    """`simulate --json`: the run, then its result as one JSON document."""
    import json

    t = run(args, legacy=args.without_fix, print_rows=False)
    plotted = plot(args, args.plot, say=lambda line: None) if args.plot else None
    print(json.dumps(summary(args, t, plotted), indent=2))
    if args.plot and plotted is None:
        return 2
    return 1 if t.failed else 0
