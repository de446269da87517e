"""The two models the simulator drives around the proposer, in numpy:

- ScriptedBase: the base (target) model's buffers and its scripted behaviour:
  prefill, verification accepting 1..(valid drafts + 1) tokens, finishing,
  block steps and resumes (docs/contract.md, "The invariant, and the loop").
- draft_substep_update: the draft model's own state update after each
  substep's forward and sampling.

Both keep numpy mirrors and copy them into the Paddle buffers the ops read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..buffers import read as _read, write as _write
from ..proposer import MTPProposer

EOS = 2  # the end token of the simulated vocabulary
VOCAB = 1000


def sample_tokens(rng, n: int, eos_prob: float, chosen=None) -> np.ndarray:
    """n sampled tokens: random, or where `chosen` ({row: token}, a model's
    greedy pick) says; then the end token with probability eos_prob."""
    toks = rng.integers(3, VOCAB, n)
    eos = rng.random(n) < eos_prob
    for i, tok in (chosen or {}).items():
        toks[i] = tok
    toks[eos] = EOS
    return toks


@dataclass
class SlotLife:
    """What the scripted runner knows of one slot's request."""

    prompt: List[int] = field(default_factory=list)
    mask_offsets: Optional[np.ndarray] = None  # the prompt's (text: 0..n-1)
    active: bool = False        # a request lives in the slot
    finished: bool = False      # the base finished it this step (freed next step)
    blocked_for: int = 0        # engine steps left in a block step
    new: bool = False           # inserted this step (base prefill / first verification)
    handover: Optional[tuple] = None  # decode node: (first_token, draft_token)
    generated: List[int] = field(default_factory=list)  # tokens the base produced
    dropped: bool = False       # dropped by a block step (no kvcache_scheduler_v1)
    decoded: int = 0            # tokens generated before its last prefill (a dropped request)
    # The prompt's positions [start, end) prefilled this step (--chunk,
    # --prefix-cache); None: the whole prompt.
    span: Optional[Tuple[int, int]] = None


@dataclass
class ScriptedBase:
    """Base-model buffers of one node and its scripted behaviour."""

    buffers: Dict[str, object]
    num_model_steps: int
    max_dec_len: int
    finish_prob: float
    block_prob: float
    rng: np.random.Generator
    # Without kvcache_scheduler_v1: a block step drops the request, and the
    # runner prefills it again later (simulate.prefill_dropped).
    drop_blocked: bool = False
    slots: List[SlotLife] = field(default_factory=list)

    def __post_init__(self):
        self.a = {k: _read(t) for k, t in self.buffers.items()}
        self.slots = [SlotLife() for _ in range(self.a["accept_num"].shape[0])]

    def free_slots(self) -> List[int]:
        return [i for i, s in enumerate(self.slots) if not s.active]

    def admit(self, slot: int, prompt: List[int], handover=None, mask_offsets=None,
              decoded: int = 0, span: Optional[Tuple[int, int]] = None) -> None:
        offsets = np.arange(len(prompt)) if mask_offsets is None else np.asarray(mask_offsets)
        self.slots[slot] = SlotLife(prompt=list(prompt), mask_offsets=offsets, active=True,
                                    new=True, handover=handover, decoded=decoded, span=span)

    def prefill_chunk(self, slot: int, span: Tuple[int, int]) -> None:
        """The scheduler hands the slot's request its next prefill chunk."""
        self.slots[slot].span = span

    def _valid_drafts(self, i: int) -> int:
        row = self.a["draft_tokens"][i, 1:]
        bad = np.nonzero(row == -1)[0]
        return int(bad[0]) if bad.size else row.shape[0]

    def _accept(self, i: int, a: int, fed: int, own: bool = True) -> None:
        """Accept a tokens: a - 1 drafts and a token of the base's own, or
        (not `own`) a drafts, the last an end token."""
        a_ = self.a
        a_["accept_num"][i] = a
        a_["accept_tokens"][i] = 0
        if own:
            a_["accept_tokens"][i, : a - 1] = a_["draft_tokens"][i, 1:a]
            a_["accept_tokens"][i, a - 1] = self.rng.integers(3, VOCAB)
        else:
            a_["accept_tokens"][i, :a] = a_["draft_tokens"][i, 1:a + 1]
        self.slots[i].generated += a_["accept_tokens"][i, :a].tolist()
        a_["seq_lens_decoder"][i] += a
        a_["step_idx"][i] += a
        # The tokens the base model fed: the last token and the drafts verified
        # (the recompute form bounds its recomputed tokens by it).
        a_["seq_lens_this_time"][i] = fed

    def run(self) -> Dict[str, int]:
        """One base forward over every slot; returns counts for the step table."""
        a_, rng = self.a, self.rng
        a_["draft_tokens"][:] = _read(self.buffers["draft_tokens"])  # the draft wrote its tokens
        counts = dict(new=0, blocked=0, finished=0, verified=0)
        for i, s in enumerate(self.slots):
            if not s.active:
                continue
            if s.finished:  # freed by the runner; the slot waits for a new request
                s.active = False
                continue
            a_["stop_flags"][i] = False
            a_["is_block_step"][i] = False
            a_["seq_lens_encoder"][i] = 0
            if s.new and s.handover is None:
                # Prefill: the prompt's KV and the first token.
                a_["seq_lens_decoder"][i] = len(s.prompt)
                a_["step_idx"][i] = 1
                a_["accept_num"][i] = 1
                a_["accept_tokens"][i] = 0
                a_["accept_tokens"][i, 0] = rng.integers(3, VOCAB)
                a_["seq_lens_this_time"][i] = len(s.prompt)
                if s.span is not None:
                    start, end = s.span
                    a_["seq_lens_decoder"][i] = end
                    a_["seq_lens_this_time"][i] = end - start
                    if end < len(s.prompt):
                        # A chunk before the last: the base model samples a
                        # token at its last position all the same, which the
                        # runner does not output (sim_fastdeploy says where).
                        continue
                s.generated = [int(a_["accept_tokens"][i, 0])]
                s.new = False
                counts["new"] += 1
                continue
            if s.new:
                # Decode node: the prefill node's KV arrived; the first
                # verification checks [first token, the prefill node's draft].
                first, draft = s.handover
                a_["seq_lens_decoder"][i] = len(s.prompt)
                a_["step_idx"][i] = 1
                a_["draft_tokens"][i] = -1
                a_["draft_tokens"][i, 0] = first
                a_["draft_tokens"][i, 1] = draft
                s.new = False
                counts["new"] += 1
            if s.blocked_for == 0 and rng.random() < self.block_prob:
                s.blocked_for = int(rng.integers(1, 4))
                s.dropped = self.drop_blocked
            if s.blocked_for > 0:
                s.blocked_for -= 1
                a_["stop_flags"][i] = True
                a_["is_block_step"][i] = True
                a_["accept_num"][i] = 0
                a_["seq_lens_this_time"][i] = 0
                counts["blocked"] += 1
                continue
            drafts = self._valid_drafts(i)
            take = int(rng.integers(1, drafts + 2))
            # An accepted end token ends the request there, the base sampling
            # nothing after it (speculate_verify.cu 9018ccf74:127-135 and
            # 144-152). Only FastDeploy's draft update leaves an end token among
            # the drafts (sim_models._fastdeploy_update).
            ends = np.nonzero(a_["draft_tokens"][i, 1:take] == EOS)[0]
            if ends.size:
                self._accept(i, int(ends[0]) + 1, drafts + 1, own=False)
            else:
                self._accept(i, take, drafts + 1)
            counts["verified"] += 1
            if (ends.size or a_["step_idx"][i] + s.decoded >= self.max_dec_len
                    or rng.random() < self.finish_prob):
                a_["stop_flags"][i] = True  # finished: the slot is re-used later
                s.finished = True
                counts["finished"] += 1
        for k, t in self.buffers.items():
            _write(t, a_[k])
        return counts


def draft_substep_update(p: MTPProposer, substep: int, rng, eos_prob: float,
                         max_dec_len: int, chosen=None, outside=None,
                         kernel: Optional[str] = None) -> np.ndarray:
    """The draft model's sampling and state update after one substep's forward.

    `chosen`: {slot: token} from a real draft model (default: random tokens).
    `outside` (sim_fastdeploy.OutsideWrites), if given, counts each
    ``pre_ids[i, step_idx]`` that would land outside its row (not written).
    `kernel` (sim_fastdeploy.draft_update_kernel): the rules of FastDeploy's
    own draft_model_update of that version ("ends" or "shadow") instead of
    this project's proposer's.
    Returns the tokens sampled (one a request; -1 where the request did not run).
    """
    names = ("seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "step_idx",
             "stop_flags", "pre_ids", "draft_tokens")
    s = {n: _read(p.state[n]) for n in names}
    base_draft = _read(p.base["draft_tokens"])
    n_all, E, S, step, stop = (s["seq_lens_this_time"], s["seq_lens_encoder"],
                               s["seq_lens_decoder"], s["step_idx"], s["stop_flags"])
    N = n_all.shape[0]
    toks = sample_tokens(rng, N, eos_prob, chosen)
    col = substep + 1
    prefill_node = p.config.role == "prefill"
    if kernel is not None:
        _fastdeploy_update(kernel, s, base_draft, toks, col, max_dec_len, substep, outside)
        if prefill_node:
            # FastDeploy's proposer on a prefill node, after each draft update:
            # a stopped request's step_idx is zeroed so that its first token is
            # saved once (mtp.py _post_process: ba915e03e 747-767, 9018ccf74
            # 821-841, 2178f2829 770-796, 7a6c28781 833-859).
            s["step_idx"][s["stop_flags"].astype(bool)] = 0
        for n in names:
            _write(p.state[n], s[n])
        _write(p.base["draft_tokens"], base_draft)
        # The kernel's not_need_stop: whether any request is left unstopped
        # (draft_model_update.cu 9018ccf74 lines 109-111, 7a6c28781 97-99).
        flag = _read(p.state["not_need_stop"])
        flag[...] = not s["stop_flags"].astype(bool).all()
        _write(p.state["not_need_stop"], flag)
        return toks
    for i in range(N):
        if stop[i]:
            toks[i] = -1
            continue
        n = int(n_all[i])
        if S[i] > 0 and E[i] == 0:
            S[i] += n
            step[i] += n
            if 0 <= step[i] < s["pre_ids"].shape[1]:
                s["pre_ids"][i, step[i]] = toks[i]
            elif outside is not None:
                outside.draft_update += 1
                outside.note(f"substep {substep}: slot {i}: draft_model_update writes "
                             f"pre_ids[{i}, {int(step[i])}], outside its "
                             f"{s['pre_ids'].shape[1]} columns")
            else:
                raise IndexError(f"pre_ids[{i}, {int(step[i])}] outside the row")
        else:
            S[i] = E[i] + S[i]
            E[i] = 0
            step[i] += 1
            s["pre_ids"][i, 1] = toks[i]
        s["draft_tokens"][i, 0] = toks[i]
        if col < base_draft.shape[1]:
            base_draft[i, col] = toks[i]
        if toks[i] == EOS or prefill_node or step[i] >= max_dec_len:
            stop[i] = True
            s["draft_tokens"][i, 0] = -1
            if col < base_draft.shape[1]:
                base_draft[i, col] = -1
    n_all[:] = np.where(stop, 0, 1)
    E[stop] = 0
    for n in names:
        _write(p.state[n], s[n])
    _write(p.base["draft_tokens"], base_draft)
    return toks


def _fastdeploy_update(kernel: str, s: dict, base_draft: np.ndarray, toks: np.ndarray, col: int,
                       max_dec_len: int, substep: int, outside) -> None:
    """FastDeploy's draft_model_update on the numpy state `s`, per request
    (speculate_decoding/draft_model/draft_model_update.cu):

    - "ends" (ba915e03e, 9018ccf74, 2178f2829; lines 56-106 at 9018ccf74): a
      decode adds its tokens to seq_lens_decoder and step_idx and writes its
      sampled token to draft_tokens[0], to the base model's draft_tokens[col]
      and to pre_ids[step_idx] (lines 59-66); a prefill moves
      seq_lens_encoder into seq_lens_decoder (lines 69-79). An end token then
      stops the draft and stays in both rows (lines 83-86: the base model
      verifies it, draft_model_postprocess counting it); step_idx reaching
      max_dec_len stops it with the end token written (lines 87-92). The
      prefill node's one-step stop reads PREFILL_NODE_ONE_STEP_STOP, which the
      v1 scheduler's path does not set (worker_process.py lines 1005-1006
      set the _V1 variable). A stopped request writes -1 to both rows (lines
      94-97).
    - "shadow" (7a6c28781, lines 56-85): nothing stops the draft; a prefill
      writes the base model's column only while step_idx < max_dec_len; a
      decode at step_idx >= max_dec_len - 1 writes -1 there and nothing else.
    Then seq_lens_this_time is 1 for a running request, else 0 with
    seq_lens_encoder 0 (lines 99-105)."""
    n_all, E, S, step, stop = (s["seq_lens_this_time"], s["seq_lens_encoder"],
                               s["seq_lens_decoder"], s["step_idx"], s["stop_flags"])
    pre, dt = s["pre_ids"], s["draft_tokens"]
    width = base_draft.shape[1]

    def put_pre(i, at, tok):
        if 0 <= at < pre.shape[1]:
            pre[i, at] = tok
        elif outside is not None:
            outside.draft_update += 1
            outside.update_cells.append((i, int(at), int(tok)))
            outside.note(f"substep {substep}: slot {i}: draft_model_update writes "
                         f"pre_ids[{i}, {int(at)}], outside its {pre.shape[1]} columns")
        else:
            raise IndexError(f"pre_ids[{i}, {int(at)}] outside the row")

    def put_base(i, tok):
        if col < width:
            base_draft[i, col] = tok

    for i in range(n_all.shape[0]):
        n = int(n_all[i])
        if stop[i]:
            dt[i, 0] = -1
            put_base(i, -1)
            toks[i] = -1
        else:
            tok = int(toks[i])
            if kernel == "ends":
                if S[i] > 0 and E[i] <= 0:
                    S[i] += n
                    step[i] += n
                    put_pre(i, step[i], tok)
                else:
                    S[i] = E[i] + S[i]
                    E[i] = 0
                    put_pre(i, 1, tok)
                    step[i] += 1
                dt[i, 0] = tok
                put_base(i, tok)
                if tok == EOS:
                    stop[i] = True
                elif step[i] >= max_dec_len:
                    stop[i] = True
                    dt[i, max(n, 1) - 1] = EOS
                    put_base(i, EOS)
            elif E[i] > 0:
                S[i] = E[i] + S[i]
                E[i] = 0
                put_pre(i, 1, tok)
                step[i] += 1
                dt[i, 0] = tok
                if step[i] < max_dec_len:
                    put_base(i, tok)
            elif S[i] > 0:
                if step[i] >= max_dec_len - 1:
                    put_base(i, -1)
                    toks[i] = -1
                else:
                    S[i] += n
                    dt[i, 0] = tok
                    put_base(i, tok)
                    step[i] += n
                    put_pre(i, step[i], tok)
            else:
                toks[i] = -1
        if stop[i]:
            n_all[i] = 0
            E[i] = 0
        else:
            n_all[i] = 1
