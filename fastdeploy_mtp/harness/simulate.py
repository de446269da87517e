"""Closed-loop simulator: proves the mask offsets stay right step after step.

``python -m fastdeploy_mtp simulate [--mode mixed|pd] [--num-model-steps K]
[--steps N] [--batch B] [--seed S] [--without-fix] [--draft-model tiny]
[--image-prob P] [--plot FILE.png]``

Drives MTPProposer(s) and a scripted base model through many engine steps:
random accepted counts, draft EOS, base EOS and re-use of the slot, block
steps and resumes; in ``pd`` mode a prefill-node proposer (one substep) hands
each request to a decode-node proposer. After every preprocess it checks the
alignment with the base model (``seq_lens_decoder`` and ``step_idx``,
``not_need_stop``); at every substep, that every token written gets the mask
end of its position (docs/contract.md, "The invariant") in the request as
the workload submitted it, whatever a runner inserted.

``--draft-model tiny`` puts a real attention model (``tiny_model``) in the
loop: it runs on the op's offsets with a KV cache, its greedy tokens are the
draft's, and every forward is compared with a cache-free recomputation
(``draft_check``). ``--image-prob P`` gives prompts image spans that attend
themselves bidirectionally. ``--without-fix`` runs without the fix: the
op's update of mask_rollback is undone and a decode node presets 1.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

import numpy as np

from ..buffers import make_base_buffers, read as _read, write as _write
from ..captured import CapturedDraft
from .draft_check import DraftRunner, ModelTally, true_ends
from . import sim_fastdeploy
from ..plugin import CORRECTED_OF
from ..proposer import MTPProposer, ProposerConfig, Request
from ..signature import DRAFT_MODEL_PREPROCESS, FORMS
from .sim_models import VOCAB, ScriptedBase, SlotLife, draft_substep_update
from .without_fix import ProposerWithoutFix


@dataclass
class Tally:
    tokens: int = 0
    mask_violations: int = 0
    reprefilled: int = 0  # dropped requests prefilled again (--kv-scheduler v0)
    align_violations: int = 0
    substeps: int = 0
    # Decoding requests the preprocess rolled back (each request, each step):
    # the only ones a wrong mask rollback can move.
    rolled_back: int = 0
    replays: int = 0  # with --graphs: op calls replayed from a captured CUDA graph
    step_error: List[int] = field(default_factory=list)  # max |offset error| per step
    first_violation: Optional[str] = None
    model: Optional[ModelTally] = None  # with --draft-model
    # With --runner fastdeploy: what FastDeploy's own kernels would write
    # outside a row or tensor on the loop's states.
    outside: Optional[sim_fastdeploy.OutsideWrites] = None

    @property
    def violations(self) -> int:
        return self.mask_violations + self.align_violations

    @property
    def failed(self) -> bool:
        """Whether any check fired (failures)."""
        return bool(self.failures)

    @property
    def failures(self) -> List[str]:
        """What failed the run, a phrase for each check that fired (none: it
        passed). A write outside a row fails it too: FastDeploy's kernels
        index a row of pre_ids or input_ids unchecked, so such a write lands
        in another request's row or outside the tensor."""
        said = []
        if self.violations > 0:
            said.append("the mask offsets drifted")
        if self.model is not None and self.model.disagreements > 0:
            said.append("the draft model computed otherwise than a cache-free recomputation")
        if self.outside is not None and self.outside.total > 0:
            said.append("FastDeploy's kernels would write outside a row or tensor")
        return said

    def note(self, msg: str) -> None:
        if self.first_violation is None:
            self.first_violation = msg


@dataclass(frozen=True)
class Submitted:
    """A request as the workload submitted it: its prompt's mask offsets. The
    checks' truth comes from here, never from what a runner inserted or the
    ops read: a runner that prefills a dropped request again
    (``--kv-scheduler v0``) feeds its prompt and the tokens generated since,
    which attend causally, so every position's true end is
    ``true_ends(mask_offsets, position)`` through any number of re-prefills."""

    mask_offsets: np.ndarray


def check_mask_offsets(truth: Dict[int, Submitted], out: np.ndarray, fed: List[tuple],
                       tally: Tally, where: str) -> int:
    """The invariant: every token the op wrote (`fed`, from fed_requests) gets
    the true end of its position (draft_check.true_ends) in the request its
    slot holds (`truth`, slot -> the request as submitted)."""
    worst = 0
    for slot, q, n, start in fed:
        got = out[(q + np.arange(n)) * 2 + 1]
        want = true_ends(truth[slot].mask_offsets, start + np.arange(n))
        tally.tokens += n
        bad = got != want
        if bad.any():
            tally.mask_violations += int(bad.sum())
            worst = max(worst, int(np.abs(got - want).max()))
            tally.note(f"{where}: slot {slot}: mask offsets {got.tolist()}, true ends "
                       f"{want.tolist()}")
    return worst


def check_alignment(p: MTPProposer, base: ScriptedBase, running: bool, tally: Tally,
                    where: str) -> None:
    """After preprocess a running decode request has S == base S - accept_num
    and step_idx == base step_idx - accept_num; not_need_stop == any runs."""
    st = {n: _read(p.state[n]) for n in ("stop_flags", "seq_lens_encoder", "seq_lens_decoder",
                                          "step_idx")}
    if running != bool((~st["stop_flags"]).any()):
        tally.align_violations += 1
        tally.note(f"{where}: not_need_stop {running}, but "
                   f"{int((~st['stop_flags']).sum())} requests run")
    for i, life in enumerate(base.slots):
        if not life.active or base.a["stop_flags"][i] or st["stop_flags"][i]:
            continue
        if st["seq_lens_encoder"][i] != 0:
            continue
        tally.rolled_back += 1
        a = base.a["accept_num"][i]
        for name in ("seq_lens_decoder", "step_idx"):
            want = base.a[name][i] - a
            if st[name][i] != want:
                tally.align_violations += 1
                tally.note(f"{where}: slot {i}: draft {name} {st[name][i]}, base "
                           f"{base.a[name][i]} - accept_num {a} = {want}")


class EagerDraft:
    """The ops called eagerly, each preprocess and mask call a fresh op call
    (``captured.CapturedDraft`` replays them from CUDA graphs instead)."""

    replays = 0  # none: every call is an eager one

    def __init__(self, proposer: MTPProposer):
        self.proposer = proposer

    def prepare_inputs(self) -> bool:
        return self.proposer.prepare_inputs()

    def mask_offsets(self, ids: np.ndarray, cu: np.ndarray) -> np.ndarray:
        import paddle

        p = self.proposer
        return p.update_attn_mask_offsets(paddle.to_tensor(ids, place=p.place),
                                          paddle.to_tensor(cu, place=p.place)).numpy()

    def release(self) -> None:
        pass


class FastDeployDraft(EagerDraft):
    """The ops called eagerly as FastDeploy's proposer calls them
    (``--runner fastdeploy``)."""

    def __init__(self, proposer: MTPProposer, outside: sim_fastdeploy.OutsideWrites,
                 form: str = "rollback", max_dec_len: int = 0, patched: bool = False):
        super().__init__(proposer)
        self.outside, self.step, self.form = outside, 0, form
        # The plugin's patches of FastDeploy's proposer (--plugin): the chunks'
        # next tokens its insert notes for the next preprocess.
        self.pending = {} if patched else None
        # The 22-tensor forms' recompute_token_num and the shadow form's
        # max_dec_len, FastDeploy's runner's own.
        inputs = FORMS[form][DRAFT_MODEL_PREPROCESS.name].input_names
        self.recompute = (sim_fastdeploy.recompute_counts(proposer)
                          if "recompute_token_num" in inputs else None)
        self.max_dec_len = (sim_fastdeploy.max_dec_lens(proposer, max_dec_len)
                            if form == "shadow" else None)

    def prepare_inputs(self) -> bool:
        where = f"step {self.step} {self.proposer.config.role}"
        self.step += 1
        return sim_fastdeploy.prepare_inputs(self.proposer, self.outside, where, self.recompute,
                                             self.max_dec_len, self.form, self.pending)

    def mask_offsets(self, ids: np.ndarray, cu: np.ndarray) -> np.ndarray:
        import paddle

        p = self.proposer
        return sim_fastdeploy.mask_offsets(p, self.form, paddle.to_tensor(ids, place=p.place),
                                           paddle.to_tensor(cu, place=p.place)).numpy()


@dataclass
class Node:
    proposer: MTPProposer
    base: ScriptedBase
    name: str
    draft: Union[EagerDraft, CapturedDraft]  # how the ops are called (--graphs: replayed)
    runner: Optional[DraftRunner] = None  # the real draft model, with --draft-model
    fastdeploy: bool = False  # --runner fastdeploy: FastDeploy's inserts, no release
    # Slot -> the request it holds, as the workload submitted it (admit_new
    # alone writes it): the truth of the checks and of the oracle.
    truth: Dict[int, Submitted] = field(default_factory=dict)
    # --chunk, --prefix-cache: slot -> (the request, its prefill spans still
    # to insert), for the requests whose prompt is not all prefilled yet.
    chunks: Dict[int, tuple] = field(default_factory=dict)


def sim_place(device: str):
    """Where the base and draft buffers live, and so where the ops run."""
    import paddle

    return paddle.CUDAPlace(0) if device == "gpu" else paddle.CPUPlace()


def make_node(name, role, k, args, rng, legacy, outside=None) -> Node:
    """`outside` (--runner fastdeploy): FastDeploy's runner drives the node and
    counts its kernels' writes outside a row there."""
    v1 = getattr(args, "kv_scheduler", "v1") == "v1"
    cfg = ProposerConfig(num_model_steps=k, max_model_len=args.max_prompt + args.max_dec_len + 2 * k + 8,
                         max_num_seqs=args.batch, role=role, kvcache_scheduler_v1=v1,
                         truncate_first_token=True)
    place = sim_place(args.device)
    buffers = make_base_buffers(args.batch, k, place)
    # The form is the command line's (--form), never the process's
    # (FASTDEPLOY_MTP_FORM chooses fastdeploy_mtp.ops' form, not this run's).
    # With --plugin, FastDeploy's runner calls the corrected form of its version's.
    form = getattr(args, "form", "rollback")
    plugin = outside is not None and getattr(args, "plugin", False)
    form = CORRECTED_OF[form] if plugin else form
    proposer = (ProposerWithoutFix if legacy else MTPProposer)(cfg, buffers, place, form=form)
    base = ScriptedBase(buffers, k, args.max_dec_len,
                        finish_prob=0.0 if role == "prefill" else args.finish_prob,
                        block_prob=0.0 if role == "prefill" else args.block_prob, rng=rng,
                        drop_blocked=not v1)
    runner = None
    if args.draft_model == "tiny":  # both nodes hold the same weights
        runner = DraftRunner(args.batch, cfg.max_model_len, VOCAB, seed=0)
    # A substep feeds a request at most its prompt or k + 1 tokens.
    if outside is not None:
        draft = FastDeployDraft(proposer, outside, form, args.max_dec_len, patched=plugin)
    elif args.graphs:
        draft = CapturedDraft(proposer, args.batch * (args.max_prompt + k + 1))
    else:
        draft = EagerDraft(proposer)
    return Node(proposer, base, name, draft, runner, outside is not None)


def step_tokens(p: MTPProposer, n_all: np.ndarray, cu: np.ndarray) -> np.ndarray:
    """The draft's flat input this substep: a prompt's input_ids, else its draft tokens."""
    E = _read(p.state["seq_lens_encoder"])
    source = {"input_ids": _read(p.state["input_ids"]),
              "draft_tokens": _read(p.state["draft_tokens"])}
    ids = np.zeros(int(cu[-1]), np.int64)
    for i in np.nonzero(n_all > 0)[0]:
        row = source["input_ids" if E[i] > 0 else "draft_tokens"][i]
        ids[cu[i]:cu[i] + n_all[i]] = row[:n_all[i]]
    return ids


def fed_requests(p: MTPProposer, n_all: np.ndarray, cu: np.ndarray) -> List[tuple]:
    """(slot, q, n, kv_start) of each request the mask op wrote offsets for."""
    E, S = _read(p.state["seq_lens_encoder"]), _read(p.state["seq_lens_decoder"])
    block = _read(p.state["is_block_step"])
    return [(int(i), int(cu[i]), int(n_all[i]), int(S[i])) for i in np.nonzero(n_all > 0)[0]
            if not block[i] and not (E[i] <= 0 and S[i] <= 0)]


def engine_step(node: Node, step: int, rng, args, tally: Tally) -> dict:
    """Base run, preprocess, then the draft substeps; returns table counts."""
    p, base = node.proposer, node.base
    counts = base.run()
    running = node.draft.prepare_inputs()
    where = f"step {step} {node.name}"
    if p.config.role != "prefill":
        check_alignment(p, base, running, tally, where)
    worst = 0
    sampled = None
    for sub in range(p.config.substeps):
        if node.fastdeploy and not bool(_read(p.state["not_need_stop"]).reshape(-1)[0]):
            # FastDeploy's proposer runs a substep only while not_need_stop
            # holds (mtp.py _propose_cuda, 9018ccf74 line 851), which its
            # preprocess and its draft update write.
            break
        n_all = _read(p.state["seq_lens_this_time"])
        cu = np.zeros(n_all.shape[0] + 1, np.int32)
        cu[1:] = np.cumsum(n_all)
        ids = step_tokens(p, n_all, cu)
        out = node.draft.mask_offsets(ids, cu)
        here = f"{where} substep {sub}"
        fed = fed_requests(p, n_all, cu)
        # After a prefill chunk that is not its prompt's last, a request's
        # later substeps run on the draft's own samples at positions the next
        # chunk prefills again: FastDeploy's base model verifies no draft of a
        # prefill, so their outputs are dropped, and the next chunk's forward
        # writes those positions' K/V again before anything attends them.
        # Nothing of theirs is checked.
        ahead = set(node.chunks) if sub > 0 else set()
        checked = [f for f in fed if f[0] not in ahead]
        worst = max(worst, check_mask_offsets(node.truth, out, checked, tally, here))
        chosen = None
        if node.runner is not None:
            chosen = node.runner.substep(ids, fed, out, tally.model, here, unchecked=ahead)
        kernel = (sim_fastdeploy.draft_update_kernel(getattr(args, "form", "rollback"))
                  if tally.outside is not None else None)
        sampled = draft_substep_update(p, sub, rng, args.draft_eos_prob, args.max_dec_len, chosen,
                                       tally.outside, kernel)
        tally.substeps += 1
    draft_stopped = _read(p.state["stop_flags"])
    counts["stopped"] = sum(1 for i, s in enumerate(base.slots)
                            if s.active and draft_stopped[i] and not base.a["stop_flags"][i])
    counts["worst"] = worst
    counts["sampled"] = sampled
    return counts


def new_prompt(rng, args):
    """A prompt and its mask offsets: text, or with probability --image-prob
    one or two image spans of 4..16 tokens that attend themselves whole."""
    n = int(rng.integers(2, args.max_prompt + 1))
    prompt = rng.integers(3, VOCAB, n).tolist()
    offsets = np.arange(n)
    if args.image_prob > 0 and rng.random() < args.image_prob and n >= 4:
        at = int(rng.integers(0, n - 3))
        for _ in range(int(rng.integers(1, 3))):
            if n - at < 4:
                break
            length = int(rng.integers(4, min(16, n - at) + 1))
            offsets[at:at + length] = at + length - 1
            at += length + int(rng.integers(0, 4))
    return prompt, offsets


def admit_new(node: Node, rng, args, handovers=None) -> List[int]:
    """Insert requests into free slots: new prompts, or handed-over ones
    (prompt, mask offsets, first token, draft token, the prefill node's KV,
    the request as submitted). Each slot's truth is the request as submitted."""
    free = node.base.free_slots()
    if handovers is None:
        free = [s for s in free if rng.random() < args.arrival_prob]
        made = [new_prompt(rng, args) for _ in free]
        reqs = [Request(slot=s, prompt=pr, mask_offsets=off.tolist()) for s, (pr, off) in zip(free, made)]
        submitted = [Submitted(np.array(off, np.int64)) for _, off in made]
    else:
        reqs = [Request(slot=s, prompt=h[0], mask_offsets=h[1].tolist(), first_token=h[2],
                        draft_token=h[3]) for s, h in zip(free, handovers)]
        submitted = [h[5] for h in handovers[:len(reqs)]]
    if not reqs:
        return []
    spans = staged_prefill(node, reqs, rng, args) if handovers is None else None
    if node.fastdeploy:
        sim_fastdeploy.insert(node.proposer, reqs, node.draft.recompute, node.draft.form,
                              None if spans is None else {i: ss[0] for i, ss in spans.items()},
                              node.draft.pending)
    else:
        node.proposer.insert(reqs)
    for k, r in enumerate(reqs):
        node.truth[r.slot] = submitted[k]
        node.base.admit(r.slot, r.prompt, mask_offsets=r.mask_offsets,
                        handover=None if r.first_token is None else (r.first_token, r.draft_token),
                        span=None if spans is None else spans[r.slot][0])
        if node.runner is not None:
            node.runner.admit(r.slot, submitted[k].mask_offsets,
                              prompt=r.prompt if staged(args) else None)
            if handovers is not None:
                node.runner.import_prompt(r.slot, handovers[k][4])
            elif spans is not None and spans[r.slot][0][0] > 0:
                node.runner.cached_prefix(r.slot, spans[r.slot][0][0])
        if spans is not None and len(spans[r.slot]) > 1:
            node.chunks[r.slot] = (r, spans[r.slot][1:])
    return [r.slot for r in reqs]


def staged(args) -> bool:
    """Whether FastDeploy's scheduler prefills a prompt from a prefix-cache
    hit or in chunks in this run (--prefix-cache, --chunk)."""
    return bool(getattr(args, "chunk", 0) or getattr(args, "prefix_cache", 0.0))


def staged_prefill(node: Node, reqs: List[Request], rng, args):
    """Each new prompt's prefill spans (sim_fastdeploy.prefill_spans), {slot:
    [(start, end), ...]}, where this run has --chunk or --prefix-cache; else
    None (each prompt prefilled whole)."""
    if not staged(args):
        return None
    spans = {}
    for r in reqs:
        offsets = np.asarray(r.mask_offsets, np.int64)
        n = offsets.shape[0]
        start = sim_fastdeploy.prefix_cache_start(rng, offsets, getattr(args, "prefix_cache", 0.0))
        spans[r.slot] = sim_fastdeploy.prefill_spans(n, start, getattr(args, "chunk", 0), offsets)
    return spans


def insert_next_chunks(node: Node) -> List[int]:
    """FastDeploy's scheduler hands each request still prefilling its next
    chunk first (resource_manager_v1.py 9018ccf74:548-549 and 643-671: the
    running requests before the waiting ones), through the same insert as a
    new prompt. Returns the slots whose last chunk this is."""
    if not node.chunks:
        return []
    done, reqs, spans = [], [], {}
    for slot, (r, rest) in list(node.chunks.items()):
        reqs.append(r)
        spans[slot] = rest[0]
        node.base.prefill_chunk(slot, rest[0])
        if len(rest) > 1:
            node.chunks[slot] = (r, rest[1:])
        else:
            del node.chunks[slot]
            done.append(slot)
    sim_fastdeploy.insert(node.proposer, reqs, node.draft.recompute, node.draft.form, spans,
                          node.draft.pending)
    return done


def reprefill_request(slot: int, life: SlotLife) -> Request:
    """The request a runner prefills again once a dropped request's block
    ends: its prompt and the tokens generated so far, the prompt's mask
    offsets and causal ones after them."""
    prompt = life.prompt + life.generated
    offsets = list(life.mask_offsets) + list(range(len(life.prompt), len(prompt)))
    return Request(slot=slot, prompt=prompt, mask_offsets=offsets)


def prefill_dropped(node: Node) -> int:
    """Without kvcache_scheduler_v1 a block step drops its request (the draft
    marks batch_drop); once the block ends the runner prefills it again as a
    new request (reprefill_request). The slot's truth stays the request as
    submitted: what the runner inserts here is what the checks hold to it.
    Returns how many."""
    again = [i for i, s in enumerate(node.base.slots) if s.active and s.dropped
             and s.blocked_for == 0 and not s.finished]
    if not again:
        return 0
    reqs = []
    for i in again:
        s = node.base.slots[i]
        reqs.append((reprefill_request(i, s), s.decoded + len(s.generated)))
    node.proposer.release(again)
    node.proposer.insert([r for r, _ in reqs])
    for r, decoded in reqs:
        node.base.admit(r.slot, r.prompt, mask_offsets=r.mask_offsets, decoded=decoded)
    return len(again)


def release_finished(node: Node) -> None:
    if node.fastdeploy:  # FastDeploy releases nothing: the next insert overwrites the slot
        return
    done = [i for i, s in enumerate(node.base.slots) if s.active and s.finished]
    node.proposer.release(done)


class Progress:
    """A line on stderr every few seconds of a long run."""

    def __init__(self, total: int, every_s: float = 5.0):
        self.total, self.every_s = total, every_s
        self.t0 = self.last = time.time()

    def tick(self, step: int) -> None:
        now = time.time()
        if now - self.last >= self.every_s:
            self.last = now
            print(f"simulate: step {step + 1}/{self.total}, {now - self.t0:.0f} s", file=sys.stderr,
                  flush=True)


def run(args, legacy: bool, print_rows: bool = True, out=print) -> Tally:
    rng = np.random.default_rng(args.seed)
    k = args.num_model_steps
    fastdeploy = getattr(args, "runner", "ours") == "fastdeploy"
    tally = Tally(model=ModelTally() if args.draft_model else None,
                  outside=sim_fastdeploy.OutsideWrites() if fastdeploy else None)
    if args.mode == "mixed":
        nodes = [make_node("mixed", "mixed", k, args, rng, legacy, tally.outside)]
    else:
        nodes = [make_node("prefill", "prefill", k, args, rng, legacy, tally.outside),
                 make_node("decode", "decode", k, args, rng, legacy, tally.outside)]
    model_cols = f" {'checked':>7} {'disagree':>8}" if tally.model else ""
    if print_rows:
        out(f"{'step':>5} {'new':>4} {'verif':>5} {'block':>5} {'fin':>4} {'dstop':>5} "
            f"{'tokens':>7} {'viol':>5} {'max err':>7}{model_cols}")
    progress = Progress(args.steps)
    pending: List[tuple] = []  # prefill node -> decode node
    for step in range(args.steps):
        row = dict(new=0, verified=0, blocked=0, finished=0, stopped=0, worst=0)
        before_tokens, before_viol = tally.tokens, tally.violations
        before_model = (tally.model.tokens, tally.model.disagreements) if tally.model else None
        for node in nodes:
            if node.name == "decode":
                room = len(node.base.free_slots())
                admit_new(node, rng, args, handovers=pending[:room])
                pending = pending[room:]
            else:
                tally.reprefilled += prefill_dropped(node)
                prefilled = insert_next_chunks(node)
                admitted = admit_new(node, rng, args)
                # The requests whose prompt this step's prefill completes.
                prefilled += [i for i in admitted if i not in node.chunks]
            c = engine_step(node, step, rng, args, tally)
            for key in ("new", "verified", "blocked", "finished", "stopped"):
                row[key] += c[key]
            row["worst"] = max(row["worst"], c["worst"])
            if node.name == "prefill":
                # Hand each prefilled request over (with its draft KV) and free the slot.
                for i in prefilled:
                    life = node.base.slots[i]
                    first = int(node.base.a["accept_tokens"][i, 0])
                    kv = node.runner.export_prompt(i, len(life.prompt)) if node.runner else None
                    pending.append((life.prompt, life.mask_offsets, first, int(c["sampled"][i]), kv,
                                    node.truth[i]))
                    life.finished = True
                    node.base.a["stop_flags"][i] = True
                _write(node.base.buffers["stop_flags"], node.base.a["stop_flags"])
            release_finished(node)
        tally.step_error.append(row["worst"])
        model_row = ""
        if tally.model:
            d = tally.model.disagreements - before_model[1]
            tally.model.step_disagreements.append(d)
            model_row = f" {tally.model.tokens - before_model[0]:>7} {d:>8}"
        if print_rows:
            out(f"{step:>5} {row['new']:>4} {row['verified']:>5} {row['blocked']:>5} "
                f"{row['finished']:>4} {row['stopped']:>5} {tally.tokens - before_tokens:>7} "
                f"{tally.violations - before_viol:>5} {row['worst']:>7}{model_row}")
        progress.tick(step)
    for node in nodes:
        tally.replays += node.draft.replays
        node.draft.release()
    return tally
