"""The replay beside FastDeploy's real proposer, state for state.

``simulate --runner fastdeploy`` replays FastDeploy's runner through this
project's transcription of it (``sim_fastdeploy``: the preprocess call, the
mask op's call; ``sim_models``: FastDeploy's draft_model_update per version).
``real_fastdeploy`` runs FastDeploy's own proposer. This module keeps the
transcription honest: at every engine step of a real run it copies the
draft's and the base model's buffers just before FastDeploy's
``MTPProposer.run``, runs the transcription's step on the copy, and compares,
after each substep and at the end of the step:

- the tokens the draft is fed and their cu_seqlens_q (the replay's
  ``simulate.step_tokens`` against FastDeploy's padding removal);
- the mask offsets the form's op writes for them;
- the draft's buffers after the step (``COMPARED``) and the base model's
  draft tokens, which FastDeploy's draft update writes.

The draft's sampled tokens are the real run's (the replay's update takes
them as ``chosen``); nothing else passes from the real run to the copy. The
base model, the inserts and FastDeploy's ``draft_model_postprocess`` (which
``MTPProposer.run`` calls after the substeps, on the base model's buffers)
are the real run's alone: the copy is taken after the insert and the base
model's step.
"""

from __future__ import annotations

import types
from typing import Dict, List, Optional

import numpy as np

# The draft's buffers compared after each step: what the preprocess, the mask
# op and the draft update write (a buffer a version lacks is skipped).
COMPARED = ("seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "step_idx",
            "stop_flags", "pre_ids", "draft_tokens", "input_ids", "attn_mask_offsets_decoder",
            "mask_rollback", "decode_states", "is_block_step", "batch_drop", "not_need_stop",
            "recompute_token_num")
# The base model's buffers the draft's step reads (and, draft_tokens, writes).
BASE = ("accept_tokens", "accept_num", "seq_lens_encoder", "seq_lens_decoder", "step_idx",
        "stop_flags", "is_block_step", "draft_tokens", "seq_lens_this_time")


def replay_form(forms: Dict[str, str]) -> Optional[str]:
    """The replay's form for what the real run's ops are (``Result.forms``):
    the mask op's form where it tells the 22-tensor versions apart, else the
    preprocess op's. None where the run's ops are not one of the replay's forms."""
    from ..signature import FORMS

    pre, mask = forms.get("draft_model_preprocess"), forms.get("update_attn_mask_offsets")
    form = mask if mask == "pr6403" else pre
    return form if form in FORMS else None


def _host(t) -> np.ndarray:
    return np.array(t.numpy(), copy=True)


def _flat(a: np.ndarray) -> np.ndarray:
    """FastDeploy holds a per-request value as [N, 1]; the replay's proposer
    as [N]."""
    return a.reshape(-1) if a.ndim == 2 and a.shape[1] == 1 else a


class Twin:
    """The replay's step on a copy of one node's buffers; counts where it and
    FastDeploy's real proposer part (``mismatches``, ``first``)."""

    def __init__(self, form: str, role: str, k: int, batch: int, max_model_len: int,
                 max_dec_len: int):
        from ..proposer import ProposerConfig

        self.form, self.max_dec_len = form, max_dec_len
        self.config = ProposerConfig(num_model_steps=k, max_model_len=max_model_len,
                                     max_num_seqs=batch, role=role, kvcache_scheduler_v1=True,
                                     truncate_first_token=True)
        self.steps = 0
        self.substeps = 0
        self.mismatches = 0
        self.outside = 0  # writes outside a row the replay counted (and compared)
        self.first: Optional[str] = None
        self.kinds: Dict[str, int] = {}  # what parted (a buffer, the mask offsets, ...): how often
        self.fed: List[tuple] = []       # each real substep: (ids, cu_seqlens_q, offsets)
        self.sampled: List[dict] = []    # each real substep: {slot: the token sampled}
        self._copy = None

    # -- what the real run hands over -----------------------------------------

    def before(self, draft_inputs, base_inputs) -> None:
        """Copy the buffers just before FastDeploy's ``MTPProposer.run``."""
        state = {}
        for name in COMPARED + ("attn_mask_offsets_full", "max_dec_len"):
            t = _get(draft_inputs, name)
            if t is not None:
                state[name] = _host(t)
        base = {n: _host(base_inputs[n]) for n in BASE if _get(base_inputs, n) is not None}
        self._copy = (state, base)
        self.fed, self.sampled = [], []

    def substep(self, ids: np.ndarray, cu: np.ndarray, offsets: np.ndarray) -> None:
        """The real draft's forward of one substep: its tokens, their
        cu_seqlens_q and the mask offsets it was given."""
        self.fed.append((ids.copy(), cu.copy(), offsets.copy()))

    def sample(self, tokens: dict) -> None:
        """The tokens FastDeploy's draft_model_update took, by slot."""
        self.sampled.append(dict(tokens))

    # -- the replay's step, and the comparison ---------------------------------

    def _part(self, where: str, what: str, ours, theirs) -> None:
        self.mismatches += 1
        self.kinds[what] = self.kinds.get(what, 0) + 1
        if self.first is None:
            self.first = f"{where}: {what}: replay {ours}, FastDeploy {theirs}"

    def after(self, draft_inputs, base_inputs, where: str) -> None:
        """Run the replay's step on the copy and compare it with the real
        buffers after ``MTPProposer.run``."""
        import paddle

        from ..buffers import read
        from . import sim_fastdeploy
        from .sim_models import draft_substep_update
        from .simulate import step_tokens

        state, base = self._copy
        place = paddle.CPUPlace()
        t = types.SimpleNamespace(
            state={n: paddle.to_tensor(_flat(a), place=place) for n, a in state.items()
                   if n not in ("recompute_token_num", "max_dec_len")},
            base={n: paddle.to_tensor(_flat(a), place=place) for n, a in base.items()},
            config=self.config, place=place)
        recompute = (paddle.to_tensor(_flat(state["recompute_token_num"]), place=place)
                     if "recompute_token_num" in state and self.form != "shadow" else None)
        limit = (paddle.to_tensor(_flat(state["max_dec_len"]), place=place)
                 if self.form == "shadow" else None)
        kernel = sim_fastdeploy.draft_update_kernel(self.form)
        outside = sim_fastdeploy.OutsideWrites()
        sim_fastdeploy.prepare_inputs(t, outside, where, recompute, limit, self.form)
        rng = np.random.default_rng(0)
        self.steps += 1
        ran = 0
        for sub in range(self.config.num_model_steps):
            # FastDeploy's proposer runs a substep only while not_need_stop
            # holds (mtp.py _propose_cuda, 9018ccf74 line 851); the replay the
            # same (simulate.engine_step).
            if not bool(read(t.state["not_need_stop"]).reshape(-1)[0]):
                break
            ran += 1
            if sub >= len(self.fed):
                break
            (ids_r, cu_r, offs_r), chosen = self.fed[sub], self.sampled[sub]
            here = f"{where} substep {sub}"
            self.substeps += 1
            n_all = read(t.state["seq_lens_this_time"]).reshape(-1)
            cu = np.zeros(n_all.shape[0] + 1, np.int32)
            cu[1:] = np.cumsum(n_all)
            ids = step_tokens(t, n_all, cu)
            if not np.array_equal(cu, cu_r.reshape(-1)[:cu.shape[0]]):
                self._part(here, "cu_seqlens_q", cu.tolist(), cu_r.tolist())
            if not np.array_equal(ids, ids_r):
                self._part(here, "the tokens fed", ids.tolist(), ids_r.tolist())
            out = sim_fastdeploy.mask_offsets(
                t, self.form, paddle.to_tensor(ids, place=place),
                paddle.to_tensor(cu, place=place)).numpy().reshape(-1)[:2 * ids.shape[0]]
            if not np.array_equal(out, offs_r[:out.shape[0]]):
                self._part(here, "the mask offsets", out.tolist(), offs_r.tolist())
            draft_substep_update(t, sub, rng, 0.0, self.max_dec_len, chosen, outside, kernel)
        if ran != len(self.fed):
            self._part(where, "the substeps run", ran, len(self.fed))
        # A write of FastDeploy's draft update outside a row, which the replay
        # counts instead of writing: the kernel's row pointer puts it in the
        # row before (real_fastdeploy_ops._put_pre, the same rule).
        pre = read(t.state["pre_ids"])
        for row, column, token in outside.update_cells:
            flat = row * pre.shape[1] + column
            if 0 <= flat < pre.size:
                pre.reshape(-1)[flat] = token
        t.state["pre_ids"] = paddle.to_tensor(pre, place=place)
        self.outside += outside.total
        for name in COMPARED:
            real = _get(draft_inputs, name)
            if real is None:
                continue
            if name == "recompute_token_num":
                ours = None if recompute is None else read(recompute)
            else:
                ours = read(t.state[name]) if name in t.state else None
            if ours is not None and not np.array_equal(ours.reshape(-1),
                                                       _host(real).reshape(-1)):
                self._part(where, name, ours.reshape(-1).tolist(),
                           _host(real).reshape(-1).tolist())
        ours = read(t.base["draft_tokens"])
        if not np.array_equal(ours, _host(base_inputs["draft_tokens"])):
            self._part(where, "the base model's draft_tokens", ours.tolist(),
                       _host(base_inputs["draft_tokens"]).tolist())


def _get(inputs, name):
    """A buffer of FastDeploy's (a dict up to 9018ccf74, an InputBatch from
    2178f2829), or None where this version has none of that name."""
    try:
        return inputs[name] if name in inputs else None
    except (KeyError, TypeError, AttributeError):
        return None
