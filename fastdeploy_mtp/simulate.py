"""Closed-loop simulator: proves the mask offsets stay right step after step.

``python -m fastdeploy_mtp simulate [--mode mixed|pd] [--num-model-steps K]
[--steps N] [--batch B] [--seed S] [--without-fix] [--plot FILE.png]``

Drives MTPProposer(s) and a scripted base model through many engine steps:
random accepted counts, draft EOS, base EOS and re-use of the slot, block
steps and resumes; in ``pd`` mode a prefill-node proposer (one substep) hands
each request to a decode-node proposer. It checks the contract's invariant for
every token written at every substep, and the alignment with the base model
after every preprocess, and exits 0 if and only if nothing was violated.

``--without-fix`` replays the old behaviour: the op's update of mask_rollback
is undone and a decode node presets mask_rollback to 1.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

from .buffers import make_base_buffers, read as _read, write as _write
from .proposer import MTPProposer, ProposerConfig, Request
from .sim_models import VOCAB, ScriptedBase, draft_substep_update


@dataclass
class Tally:
    tokens: int = 0
    mask_violations: int = 0
    align_violations: int = 0
    substeps: int = 0
    step_error: List[int] = field(default_factory=list)  # max |offset error| per step
    first_violation: Optional[str] = None

    @property
    def violations(self) -> int:
        return self.mask_violations + self.align_violations

    def note(self, msg: str) -> None:
        if self.first_violation is None:
            self.first_violation = msg


def check_mask_offsets(p: MTPProposer, out: np.ndarray, cu: np.ndarray, tally: Tally,
                       where: str) -> int:
    """The invariant: every token written gets offset == its KV position + 1."""
    n_all = _read(p.state["seq_lens_this_time"])
    E, S = _read(p.state["seq_lens_encoder"]), _read(p.state["seq_lens_decoder"])
    block = _read(p.state["is_block_step"])
    worst = 0
    for i in np.nonzero(n_all > 0)[0]:
        if block[i] or (E[i] == 0 and S[i] == 0):
            continue  # the op writes nothing for it
        j = np.arange(n_all[i])
        got = out[(cu[i] + j) * 2 + 1]
        want = S[i] + j + 1
        tally.tokens += len(j)
        bad = got != want
        if bad.any():
            tally.mask_violations += int(bad.sum())
            worst = max(worst, int(np.abs(got - want).max()))
            tally.note(f"{where}: slot {i}: mask offsets {got.tolist()}, KV positions + 1 "
                       f"{want.tolist()}")
    return worst


def check_alignment(p: MTPProposer, base: ScriptedBase, tally: Tally, where: str) -> None:
    """After preprocess a running decode request has S == base S - accept_num."""
    st = {n: _read(p.state[n]) for n in ("stop_flags", "seq_lens_encoder", "seq_lens_decoder")}
    for i, life in enumerate(base.slots):
        if not life.active or base.a["stop_flags"][i] or st["stop_flags"][i]:
            continue
        if st["seq_lens_encoder"][i] != 0:
            continue
        want = base.a["seq_lens_decoder"][i] - base.a["accept_num"][i]
        if st["seq_lens_decoder"][i] != want:
            tally.align_violations += 1
            tally.note(f"{where}: slot {i}: draft seq_lens_decoder {st['seq_lens_decoder'][i]}, "
                       f"base {base.a['seq_lens_decoder'][i]} - accept_num "
                       f"{base.a['accept_num'][i]} = {want}")


@dataclass
class Node:
    proposer: MTPProposer
    base: ScriptedBase
    name: str


def make_node(name, role, k, args, rng, legacy) -> Node:
    cfg = ProposerConfig(num_model_steps=k, max_model_len=args.max_prompt + args.max_dec_len + 2 * k + 8,
                         max_num_seqs=args.batch, role=role, kvcache_scheduler_v1=True,
                         truncate_first_token=True, without_fix=legacy)
    buffers = make_base_buffers(args.batch, k)
    proposer = MTPProposer(cfg, buffers)
    base = ScriptedBase(buffers, k, args.max_dec_len,
                        finish_prob=0.0 if role == "prefill" else args.finish_prob,
                        block_prob=0.0 if role == "prefill" else args.block_prob, rng=rng)
    return Node(proposer, base, name)


def engine_step(node: Node, step: int, rng, args, tally: Tally) -> dict:
    """Base run, preprocess, then the draft substeps; returns table counts."""
    import paddle

    p, base = node.proposer, node.base
    counts = base.run()
    p.prepare_inputs()
    where = f"step {step} {node.name}"
    if p.config.role != "prefill":
        check_alignment(p, base, tally, where)
    worst = 0
    sampled = None
    for sub in range(p.config.substeps):
        n_all = _read(p.state["seq_lens_this_time"])
        cu = np.zeros(n_all.shape[0] + 1, np.int32)
        cu[1:] = np.cumsum(n_all)
        ids = paddle.to_tensor(np.zeros(int(cu[-1]), np.int64), place=p.place)
        out = p.update_attn_mask_offsets(ids, paddle.to_tensor(cu, place=p.place)).numpy()
        worst = max(worst, check_mask_offsets(p, out, cu, tally, f"{where} substep {sub}"))
        sampled = draft_substep_update(p, sub, rng, args.draft_eos_prob, args.max_dec_len)
        tally.substeps += 1
    draft_stopped = _read(p.state["stop_flags"])
    counts["stopped"] = sum(1 for i, s in enumerate(base.slots)
                            if s.active and draft_stopped[i] and not base.a["stop_flags"][i])
    counts["worst"] = worst
    counts["sampled"] = sampled
    return counts


def admit_new(node: Node, rng, args, handovers=None) -> List[int]:
    """Insert requests into free slots: new prompts, or handed-over ones."""
    free = node.base.free_slots()
    if handovers is None:
        free = [s for s in free if rng.random() < args.arrival_prob]
        reqs = [Request(slot=s, prompt=rng.integers(3, VOCAB, rng.integers(2, args.max_prompt + 1)).tolist())
                for s in free]
    else:
        reqs = [Request(slot=s, prompt=h[0], first_token=h[1], draft_token=h[2])
                for s, h in zip(free, handovers)]
    if not reqs:
        return []
    node.proposer.insert(reqs)
    for r in reqs:
        node.base.admit(r.slot, r.prompt,
                        handover=None if r.first_token is None else (r.first_token, r.draft_token))
    return [r.slot for r in reqs]


def release_finished(node: Node) -> None:
    done = [i for i, s in enumerate(node.base.slots) if s.active and s.finished]
    node.proposer.release(done)


def run(args, legacy: bool, print_rows: bool = True, out=print) -> Tally:
    rng = np.random.default_rng(args.seed)
    k = args.num_model_steps
    tally = Tally()
    if args.mode == "mixed":
        nodes = [make_node("mixed", "mixed", k, args, rng, legacy)]
    else:
        nodes = [make_node("prefill", "prefill", k, args, rng, legacy),
                 make_node("decode", "decode", k, args, rng, legacy)]
    if print_rows:
        out(f"{'step':>5} {'new':>4} {'verif':>5} {'block':>5} {'fin':>4} {'dstop':>5} "
            f"{'tokens':>7} {'viol':>5} {'max err':>7}")
    pending: List[tuple] = []  # prefill node -> decode node
    for step in range(args.steps):
        row = dict(new=0, verified=0, blocked=0, finished=0, stopped=0, worst=0)
        before_tokens, before_viol = tally.tokens, tally.violations
        for node in nodes:
            if node.name == "decode":
                room = len(node.base.free_slots())
                admit_new(node, rng, args, handovers=pending[:room])
                pending = pending[room:]
            else:
                admitted = admit_new(node, rng, args)
            c = engine_step(node, step, rng, args, tally)
            for key in ("new", "verified", "blocked", "finished", "stopped"):
                row[key] += c[key]
            row["worst"] = max(row["worst"], c["worst"])
            if node.name == "prefill":
                # Hand each prefilled request over and free the prefill slot.
                for i in admitted:
                    first = int(node.base.a["accept_tokens"][i, 0])
                    pending.append((node.base.slots[i].prompt, first, int(c["sampled"][i])))
                    node.base.slots[i].finished = True
                    node.base.a["stop_flags"][i] = True
                _write(node.base.buffers["stop_flags"], node.base.a["stop_flags"])
            release_finished(node)
        tally.step_error.append(row["worst"])
        if print_rows:
            out(f"{step:>5} {row['new']:>4} {row['verified']:>5} {row['blocked']:>5} "
                f"{row['finished']:>4} {row['stopped']:>5} {tally.tokens - before_tokens:>7} "
                f"{tally.violations - before_viol:>5} {row['worst']:>7}")
    return tally


def plot(args, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fixed = run(args, legacy=False, print_rows=False)
    old = run(args, legacy=True, print_rows=False)
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(old.step_error, label="without the fix", color="tab:red")
    ax.plot(fixed.step_error, label="with the fix", color="tab:green")
    ax.set_xlabel("engine step")
    ax.set_ylabel("max |mask offset - (KV position + 1)|")
    ax.set_title(f"mask-offset error per step, mode {args.mode}, num_model_steps {args.num_model_steps}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"plot: {path} (with the fix: {fixed.violations} violations; "
          f"without: {old.violations})")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=["mixed", "pd"], default="mixed")
    p.add_argument("--num-model-steps", "-k", type=int, default=3)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=8, help="slots (max_num_seqs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--without-fix", action="store_true")
    p.add_argument("--plot", metavar="FILE.png")
    p.add_argument("--quiet", action="store_true", help="summary only")
    p.add_argument("--max-prompt", type=int, default=24)
    p.add_argument("--max-dec-len", type=int, default=40)
    p.add_argument("--arrival-prob", type=float, default=0.7)
    p.add_argument("--finish-prob", type=float, default=0.04)
    p.add_argument("--block-prob", type=float, default=0.04)
    p.add_argument("--draft-eos-prob", type=float, default=0.05)


# Bounds that keep a run within this machine's memory and a sensible time.
LIMITS = {"num_model_steps": 64, "steps": 100_000, "batch": 4096, "max_prompt": 8192,
          "max_dec_len": 8192}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def plot_problem(path: str):
    """Why `--plot path` could not be written, checked before the run."""
    try:
        import matplotlib
    except ImportError:
        return "--plot needs matplotlib (pip install matplotlib)"
    import os

    matplotlib.use("Agg")
    from matplotlib.backend_bases import FigureCanvasBase

    ext = os.path.splitext(path)[1].lstrip(".").lower()
    formats = FigureCanvasBase.get_supported_filetypes()
    if ext not in formats:
        return (f"--plot {path}: unknown image type {ext!r}; use one of "
                f"{', '.join(sorted(formats))}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        return f"--plot {path}: the folder {folder} does not exist or is not writable"
    if os.path.isdir(path):
        return f"--plot {path}: is a folder"
    return None


def validate(args) -> Optional[str]:
    if args.seed < 0:
        return "--seed must be >= 0"
    for name, low in (("num_model_steps", 1), ("steps", 1), ("batch", 1), ("max_prompt", 2),
                      ("max_dec_len", 2)):
        v, high = getattr(args, name), LIMITS[name]
        if not low <= v <= high:
            return f"{_flag(name)} must be within [{low}, {high}], got {v}"
    for name in ("arrival_prob", "finish_prob", "block_prob", "draft_eos_prob"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            return f"{_flag(name)} must be within [0, 1]"
    if args.plot:
        return plot_problem(args.plot)
    return None


def main(args) -> int:
    problem = validate(args)
    if problem:
        print(f"simulate: {problem}", file=sys.stderr)
        return 2
    behaviour = "WITHOUT the fix (old behaviour)" if args.without_fix else "with the fix"
    print(f"simulate: mode {args.mode}, num_model_steps {args.num_model_steps}, {args.steps} steps, "
          f"batch {args.batch}, seed {args.seed}, {behaviour}")
    t = run(args, legacy=args.without_fix, print_rows=not args.quiet)
    print(f"summary: {args.steps} steps, {t.substeps} substeps, {t.tokens} tokens checked, "
          f"{t.violations} violations ({t.mask_violations} mask offsets, "
          f"{t.align_violations} alignment)")
    if t.first_violation:
        print(f"first violation: {t.first_violation}")
    if args.without_fix and t.violations == 0 and args.num_model_steps == 1:
        print("with num_model_steps 1 there is nothing to roll back: the old behaviour was "
              "already right")
    if args.plot:
        plot(args, args.plot)
    print("OK: the mask offsets stayed right" if t.violations == 0
          else "FAILED: the mask offsets drifted")
    return 0 if t.violations == 0 else 1
