"""The smallest state that shows a drifting row of the verdict table:
``python -m fastdeploy_mtp reproduce FORM [--role mixed|pd] [-k K] [--chunk N]``.

One request in one slot, and the op calls FastDeploy's runner makes on it
(``sim_fastdeploy``): where the drift starts at an insert, the insert's
values (``sim_fastdeploy.insert``); then ``draft_model_preprocess``, the
form's raw registered op called positionally with the runner's buffers in the
order its proposer passes them (``sim_fastdeploy.preprocess_call``, its
``batch_drop``/``is_block_step`` swap included); then the form's raw
``update_attn_mask_offsets`` on the substep's tokens. Every tensor is printed
before and after each call, so what is shown is what the op computes, on the
CPU.

The quantity that drifts is read from the runner's buffers after each call:

- the invariant ``attn_mask_offsets_decoder - mask_rollback -
  seq_lens_decoder`` (docs/contract.md, "In every branch": a form without
  drift keeps it through every call; 0 puts a decode's mask ends at its KV
  positions);
- the mask op's end for each token against the true end of its KV position
  (``draft_check.true_ends``): the drift of the ``pr5245`` form, whose
  preprocess has no ``mask_rollback``;
- after the preprocess, the alignment ``seq_lens_decoder -
  (base_model_seq_lens_decoder - accept_num)`` (docs/contract.md, "The
  invariant"): the drift of the ``rollback`` form on a decode node, whose mask
  follows its KV positions while those fall behind the base model's.

Then the one FastDeploy rule that causes it, with its file and lines at its
commit. A row of the verdict table that is exact (every form at k = 1, the
``rollback`` form on a mixed node, the ``shadow`` form) has nothing to
reproduce: the command says why and exits 0 after ``OK: ...``; a drift shown
exits 1 after ``FAILED: ...``, as ``simulate`` does for a failed check.

``--chunk N`` (1 <= N <= CHUNK_MAX) shows instead the drift of FastDeploy's
chunked prefill, which every form and role has (``verdict --chunk N``; pd is
then the prefill node, whose insert takes chunks: a decode node's never
does). One request with a text prompt of 2N tokens: FastDeploy's insert of
its first chunk [0, N) as a prefill task (``sim_fastdeploy.insert`` with
``spans``); the base model after that chunk as ``sim_models.ScriptedBase``
leaves it, its sample at position N - 1 (CHUNK_SAMPLE) one the runner does
not output; then the form's raw ``draft_model_preprocess``, which puts that
sample at the draft's input of position N - 1, where the prompt's token N
belongs. The next chunk starts at N, so nothing computes that position's
draft K/V again. The cause is the form's kernel line at its commit and the
runner's rules around it (CHUNK_CAUSES); it exits 1 after ``FAILED: ...``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from ..buffers import SLOT_FIELDS, draft_buffers, make_base_buffers, read, write
from ..proposer import ProposerConfig
from ..signature import FORMS
from ..slots import Request
from . import sim_fastdeploy
from .draft_check import true_ends
from .sim_models import EOS
from .verdict import KS, ROLES

# The one request: a text prompt (every position attends causally), the base
# model's first token, the prefill node's draft token (a decode node), the
# tokens the draft samples and the base model accepts.
PROMPT = (11, 12, 13, 14)
MASK_OFFSETS = tuple(range(len(PROMPT)))
FIRST_TOKEN = 15
PREFILL_NODE_DRAFT = 21
ACCEPTED = (31, 32)  # the base model's token at its first and second verification
MAX_MODEL_LEN = 12
MAX_DEC_LEN = 64  # the shadow form's per-request limit, past every state shown
# A decode node rolls back up to k - 1 positions of the prompt: each k of the
# verdict table leaves at least one, or the mask op would skip the request.
assert len(PROMPT) > max(KS) - 1

INVARIANT = "attn_mask_offsets_decoder - mask_rollback - seq_lens_decoder"
ALIGNMENT = "seq_lens_decoder - (base_model_seq_lens_decoder - accept_num)"
MASK_END = "the mask end of the first token fed against the true end of its KV position"
PREPROCESS_FILE = "custom_ops/gpu_ops/speculate_decoding/draft_model/draft_model_preprocess.cu"
MTP_PY = "fastdeploy/spec_decode/mtp.py"


@dataclass(frozen=True)
class RunnerCode:
    """Where FastDeploy's proposer of one commit makes the calls replayed
    (lines of fastdeploy/spec_decode/mtp.py there)."""

    commit: str
    preprocess: str  # the positional draft_model_preprocess call
    swap: str        # its batch_drop and is_block_step arguments
    mask: str        # the update_attn_mask_offsets call
    insert: str      # insert_tasks_v1's lines a decode node's insert runs through
    note: str = ""


RUNNER_9018CCF74 = RunnerCode("9018ccf74", "757-785", "766-767", "871-882", "552-574")
RUNNERS = {
    # Our 21-tensor op has no FastDeploy runner; the replay drives it with
    # 9018ccf74's, less recompute_token_num (line 770).
    "rollback": RunnerCode("9018ccf74", "757-785", "766-767", "871-882", "552-574",
                           note=", less recompute_token_num (line 770), which the rollback "
                                "form does not take"),
    "recompute": RUNNER_9018CCF74,
    "pr5738": RUNNER_9018CCF74,
    "pr5245": RunnerCode("ba915e03e", "685-709", "694-695", "797-808", "503-523"),
    "pr6403": RunnerCode("2178f2829", "698-725", "707-708", "828-841", ""),
    # The XPU path of c29e86fc9's proposer (_prepare_inputs_xpu, _propose_xpu).
    "xpu": RunnerCode("c29e86fc9", "766-793", "775-776", "1083-1096", "505-531"),
    # Its GPU path, the shadow form's 17 tensors in the op's own order (a
    # chunk's drift is shown up to the preprocess: no mask call, no
    # decode-node insert).
    "shadow": RunnerCode("c29e86fc9", "728-748", "", "", ""),
    # The corrected forms stand behind the ops of the version they correct
    # (the plugin's corrected mode), driven by that version's runner.
    "corrected_pr5245": RunnerCode("ba915e03e", "685-709", "694-695", "797-808", "503-523"),
    "corrected_pr5738": RUNNER_9018CCF74,
    "corrected_pr6403": RunnerCode("2178f2829", "698-725", "707-708", "828-841", ""),
}


@dataclass(frozen=True)
class Cause:
    """The FastDeploy rule a drift comes from: its commit, file, lines and, in
    our words, what it does."""

    commit: str
    path: str
    lines: str
    rule: str

    def line(self) -> str:
        where = f"FastDeploy {self.commit}, {self.path}"
        return f"cause: {where}{' lines ' + self.lines if self.lines else ''}: {self.rule}"


ROLLBACK_ON_A_DECODE_NODE = Cause(
    "9018ccf74", MTP_PY, "552-574",
    "a decode node's insert hands the draft seq_lens_decoder = the prompt length (552) and "
    "step_idx = 1 (554-556), and sets recompute_token_num = 0 (571) so that FastDeploy's own "
    "op rolls nothing back at the first decode; the rollback form rolls back num_model_step "
    "- 1 at every decode (docs/contract.md, draft_model_preprocess, step 3), so the draft "
    "falls k - 1 positions behind the base model and feeds the accepted tokens there (its "
    "mask follows its KV positions: the ends are wrong only where such a position lies in "
    "an image span)")
RECOMPUTE_RESYNC = Cause(
    "0956b09a", PREPROCESS_FILE, "",
    "a draft parked by a block step (its seq_lens_decoder zeroed, as 9018ccf74's kernel does "
    "at lines 252-255) re-syncs on the base model's resume: seq_lens_decoder = "
    "base_model_seq_lens_decoder - accept_num, but it adds r = min(recompute_token_num, "
    "max(base_model_seq_lens_this_time - 2, 0)) to mask_rollback, 0 where the resumed base "
    "model decodes its last token alone, so the mask cursor keeps the k - 1 positions the "
    "draft ran ahead before it was parked (a draft stopped by an end token re-syncs right: "
    "FastDeploy's draft update counts that token into base_model_seq_lens_this_time, and r "
    "is then the change of seq_lens_decoder). That commit is on none of FastDeploy's branches and is not in the "
    "history mirrored here, so no line numbers: the rule as this project restates it is "
    "custom_ops/mtp_bookkeeping.h (plan_preprocess) and docs/contract.md (\"FastDeploy's "
    "recompute form\")")
# Why a re-sync lands short even at k = 1: FastDeploy's draft_model_update
# (ba915e03e to 2178f2829) leaves a draft's end token among the base model's
# draft tokens, which draft_model_postprocess counts into
# base_model_seq_lens_this_time.
END_TOKEN_KEPT = ("; the end token the draft stopped on is among the base model's draft tokens "
                  "(draft_model_update.cu lines 65 and 79, before its end check at lines "
                  "83-91), so base_model_seq_lens_this_time counts it, and the re-sync lands "
                  "short of the accepted tokens at every k, k = 1 included")
PR5738_RESYNC = Cause(
    "9018ccf74", PREPROCESS_FILE, "225-231",
    "a draft that stopped while the base model went on re-syncs seq_lens_decoder = "
    "base_model_seq_lens_decoder - base_model_seq_lens_this_time (step_idx likewise) and "
    "leaves mask_rollback as it was: the mask cursor does not move with the KV positions, "
    "and those are the base model's verified tokens', not the accepted ones' the draft "
    "feeds again" + END_TOKEN_KEPT)
PR6403_RESYNC = Cause(
    "9018ccf74", PREPROCESS_FILE, "225-231",
    PR5738_RESYNC.rule + ". 2178f2829 left that file as 9018ccf74 has it; its change is the "
    "mask op's decode_states rule (update_attn_mask_offsets.cu lines 68-75 there), which no "
    "decode's mask offset reads")
PR5245_RESYNC = Cause(
    "ba915e03e", PREPROCESS_FILE, "220-224",
    "a draft that stopped while the base model went on re-syncs seq_lens_decoder = "
    "base_model_seq_lens_decoder - base_model_seq_lens_this_time (step_idx likewise), and "
    "the kernel (20 tensors) has no mask_rollback to tell the mask op: the cursor stays "
    "where it was" + END_TOKEN_KEPT)
PR5245_ROLLBACK = Cause(
    "ba915e03e", PREPROCESS_FILE, "226-230",
    "a running decode rolls seq_lens_decoder and step_idx back by num_model_step - 1, and "
    "the kernel (20 tensors) has no mask_rollback to tell the mask op: the cursor stays "
    "k - 1 positions ahead of the KV positions")
XPU_ROLLBACK = Cause(
    "c29e86fc9", "custom_ops/xpu_ops/src/plugin/src/wrapper/mtp_wrapper/draft_model_preprocess.cpp",
    "166-177",
    "FastDeploy's XPU op rolls a running decode's seq_lens_decoder and step_idx back by "
    "num_model_step - 1 and never touches the mask_rollback it is passed: the cursor stays "
    "k - 1 positions ahead of the KV positions, as at ba915e03e")
XPU_ON_A_DECODE_NODE = Cause(
    XPU_ROLLBACK.commit, XPU_ROLLBACK.path, XPU_ROLLBACK.lines,
    XPU_ROLLBACK.rule + "; on a decode node the insert's mask_rollback = 1 (" + MTP_PY
    + " line 531 there) is all the cursor gives back, and the first decode rolls back k - 1 "
    "positions its draft never wrote")
PR5245_ON_A_DECODE_NODE = Cause(
    PR5245_ROLLBACK.commit, PR5245_ROLLBACK.path, PR5245_ROLLBACK.lines,
    PR5245_ROLLBACK.rule + "; on a decode node the insert's mask_rollback = 1 (" + MTP_PY
    + " line 523 there) is all the cursor gives back, and the first decode rolls back k - 1 "
    "positions its draft never wrote")


@dataclass(frozen=True)
class Case:
    """How a drifting row is reproduced: the state (``scenario``), the
    quantity that drifts and its cause."""

    scenario: str  # "running", "resync", "resume" or "insert" (_SCENARIOS)
    quantity: str  # INVARIANT, MASK_END or ALIGNMENT
    cause: Cause


def _both(case: Case) -> Dict[str, Case]:
    return {role: case for role in ROLES}


# Each form's case in each role, for k >= 2; None: that row is exact (EXACT says why).
CASES: Dict[str, Dict[str, Optional[Case]]] = {
    "rollback": {"mixed": None, "pd": Case("insert", ALIGNMENT, ROLLBACK_ON_A_DECODE_NODE)},
    "recompute": _both(Case("resume", MASK_END, RECOMPUTE_RESYNC)),
    "pr5245": {"mixed": Case("running", MASK_END, PR5245_ROLLBACK),
               "pd": Case("insert", MASK_END, PR5245_ON_A_DECODE_NODE)},
    "pr5738": _both(Case("resync", INVARIANT, PR5738_RESYNC)),
    "pr6403": _both(Case("resync", INVARIANT, PR6403_RESYNC)),
    "xpu": {"mixed": Case("running", MASK_END, XPU_ROLLBACK),
            "pd": Case("insert", MASK_END, XPU_ON_A_DECODE_NODE)},
    "shadow": {role: None for role in ROLES},
    **{form: {role: None for role in ROLES}
       for form in ("corrected_pr5245", "corrected_pr5738", "corrected_pr6403")},
}
# The k = 1 rows that drift: a re-sync of a draft stopped by an end token,
# which FastDeploy's draft update of these versions counts into the base
# model's tokens (END_TOKEN_KEPT).
K1_CASES: Dict[str, Dict[str, Optional[Case]]] = {
    "pr5245": _both(Case("resync", INVARIANT, PR5245_RESYNC)),
    "pr5738": _both(Case("resync", INVARIANT, PR5738_RESYNC)),
    "pr6403": _both(Case("resync", INVARIANT, PR6403_RESYNC)),
}
K1 = ("with one draft substep a step (k = 1) nothing is rolled back (k - 1 = 0), and a draft "
      "that stops re-syncs to the positions it holds (this form's rule, or the replay's draft "
      "update, which hands the base model no end token): this k = 1 row is exact")
EXACT = {
    "rollback": "the rollback form adds every change of seq_lens_decoder to mask_rollback, so "
                "the mask cursor moves with the KV positions in every branch (docs/contract.md, "
                "\"In every branch\"), and its prefill clears what an earlier request left in "
                "the slot; its rows drift only on a decode node (--role pd) with k >= 2, where "
                "FastDeploy's insert expects its own op's first decode to roll nothing back",
    "shadow": "the shadow form keeps no state of its own from one step to the next: its KV "
              "positions are the base model's less the accepted tokens, and its mask ends "
              "follow them, so there is nothing to drift",
    **{form: "the corrected forms take every running decode's KV positions and step from the "
             "base model less the accepted tokens, as the shadow form does, and number a "
             "decode's mask ends from its KV positions, whatever the runner did to the cursor: "
             "there is nothing to drift"
       for form in ("corrected_pr5245", "corrected_pr5738", "corrected_pr6403")},
}


def case_for(form: str, role: str, k: int) -> Optional[Case]:
    """The case that reproduces `form`'s row (`role`, `k`) of the verdict
    table, or None where that row is exact."""
    return K1_CASES.get(form, {}).get(role) if k == 1 else CASES[form][role]


def exact_reason(form: str, role: str, k: int) -> str:
    return K1 if k == 1 else EXACT[form]


# ---------------------------------------------------------------------------
# The runner's buffers around one slot, and the states written into them


class Runner:
    """FastDeploy's runner's buffers for one slot (max_num_seqs 1) on the
    CPU: the draft's (``model_inputs``), the base model's
    (``target_model_inputs``) and, for a 22-tensor form,
    ``recompute_token_num``, shaped as the replay shapes them. ``config``,
    ``state`` and ``base`` are what ``sim_fastdeploy`` reads of a proposer."""

    def __init__(self, form: str, role: str, k: int, chunk: int = 0):
        import paddle

        self.form, self.role, self.k = form, role, k
        self.place = paddle.CPUPlace()
        # With chunks, pd is the prefill node: a decode node's insert takes none.
        node = ("prefill" if chunk else "decode") if role == "pd" else "mixed"
        max_model_len = max(MAX_MODEL_LEN, 2 * chunk + k + 1)  # chunk_prompt's 2N tokens
        self.config = ProposerConfig(num_model_steps=k, max_model_len=max_model_len,
                                     max_num_seqs=1, role=node,
                                     kvcache_scheduler_v1=True, truncate_first_token=True)
        self.state = draft_buffers(1, max_model_len, k, self.place)
        self.base = make_base_buffers(1, k, self.place)
        inputs = FORMS[form]["draft_model_preprocess"].input_names
        self.recompute = (sim_fastdeploy.recompute_counts(self)
                          if "recompute_token_num" in inputs else None)
        # The shadow form's preprocess takes each slot's max_dec_len (no other
        # form's does); the request's limit lies past anything shown here.
        self.max_dec_len = (sim_fastdeploy.max_dec_lens(self, MAX_DEC_LEN)
                            if "max_dec_len" in inputs else None)

    def buffers(self) -> Dict[str, object]:
        """Every buffer by FastDeploy's name for it."""
        named = {f'model_inputs["{n}"]': t for n, t in self.state.items()}
        if self.recompute is not None:
            named['model_inputs["recompute_token_num"]'] = self.recompute
        if self.max_dec_len is not None:
            named['model_inputs["max_dec_len"]'] = self.max_dec_len
        named.update({f'target_model_inputs["{n}"]': t for n, t in self.base.items()})
        return named

    def value(self, name: str) -> int:
        """Slot 0's value of the draft buffer `name` (or ``base_model_X``, the
        base model's X)."""
        if name.startswith("base_model_"):
            return int(read(self.base[name[len("base_model_"):]]).reshape(-1)[0])
        return int(read(self.state[name]).reshape(-1)[0])

    def invariant(self) -> int:
        return (self.value("attn_mask_offsets_decoder") - self.value("mask_rollback")
                - self.value("seq_lens_decoder"))

    def alignment(self) -> int:
        return self.value("seq_lens_decoder") - (self.value("base_model_seq_lens_decoder")
                                                 - self.value("base_model_accept_num"))

    def fill(self, draft: dict, base: dict) -> None:
        """Write slot 0 of the draft's and the base model's buffers: a value
        for a vector; for a matrix a pair (leading values, the value of every
        other column)."""
        for buffers, values in ((self.state, draft), (self.base, base)):
            for name, v in values.items():
                a = read(buffers[name])
                if isinstance(v, tuple):
                    lead, rest = v
                    a[0, :] = rest
                    a[0, :len(lead)] = lead
                else:
                    a.reshape(a.shape[0], -1)[0] = v
                write(buffers[name], a)


def _verified(tokens: list) -> tuple:
    """The base model's draft_tokens row after the draft handed it `tokens`
    (its last accepted token, then the drafts; -1 after them), for
    ``Runner.fill``. Their count is what draft_model_postprocess makes
    base_model_seq_lens_this_time (FastDeploy 9018ccf74,
    draft_model_postprocess.cu lines 30-41)."""
    return (tokens, -1)


_KEPT = " (FastDeploy's draft_model_update left the end token among the base model's drafts)"


def _end_token_kept(r: Runner) -> bool:
    """Whether the draft update of the runner `r.form` stands behind leaves a
    draft's end token among the base model's draft tokens, as the replay
    applies it (sim_fastdeploy.draft_update_kernel)."""
    return sim_fastdeploy.draft_update_kernel(r.form) == "ends"


def after_prefill_step(r: Runner, ended: bool) -> str:
    """A mixed node: the request after its prefill step (the prompt and the
    first token, then k - 1 one-token substeps), the base model's first
    verification done. `ended`: the last substep sampled the end token and the
    draft stopped while the base model goes on."""
    k, n = r.k, len(PROMPT)
    drafts = [21 + j for j in range(k)]
    if ended:
        drafts[-1] = EOS
    kept = ended and _end_token_kept(r)
    handed = [FIRST_TOKEN] + (drafts[:-1] if ended and not kept else drafts)
    r.fill(dict(draft_tokens=([-1 if ended and not kept else drafts[-1]], -1),
                input_ids=(list(PROMPT[1:]) + [FIRST_TOKEN], 0), stop_flags=ended,
                seq_lens_this_time=0 if ended else 1, seq_lens_encoder=0,
                seq_lens_decoder=n + k - 1, step_idx=k, is_block_step=False, batch_drop=False,
                pre_ids=([FIRST_TOKEN] + drafts, -1), mask_rollback=0,
                attn_mask_offsets_full=(list(MASK_OFFSETS), 0),
                attn_mask_offsets_decoder=n + k - 1, decode_states=([], 0)),
           dict(accept_tokens=([ACCEPTED[0]], 0), accept_num=1, seq_lens_this_time=len(handed),
                seq_lens_encoder=0, seq_lens_decoder=n + 1, step_idx=2, stop_flags=False,
                is_block_step=False, draft_tokens=_verified(handed)))
    story = (f"after its prefill step on a mixed node: the base model's first token "
             f"{FIRST_TOKEN}, then {k} draft substeps (the prompt, then one token each) that "
             f"sampled {drafts}")
    if ended:
        story += (f", the last the end token {EOS}: the draft stopped{_KEPT if kept else ''}; "
                  f"the base model verified {handed}, accepted 1 token ({ACCEPTED[0]}) and "
                  "runs on")
    else:
        story += f"; the base model verified {handed} and accepted 1 token ({ACCEPTED[0]})"
    return story


def after_first_decode_step(r: Runner) -> str:
    """A decode node: the request handed over and inserted by FastDeploy's
    runner, its first decode step done (the base model accepted one token, the
    draft fed it and sampled k tokens, the last the end token: it stopped),
    and the base model's next verification done."""
    k, n = r.k, len(PROMPT)
    sampled = [41 + j for j in range(k)]
    sampled[-1] = EOS
    kept = _end_token_kept(r)
    handed = [ACCEPTED[0]] + (sampled if kept else sampled[:-1])
    r.fill(dict(draft_tokens=([EOS if kept else -1], -1), input_ids=([], 0), stop_flags=True,
                seq_lens_this_time=0, seq_lens_encoder=0, seq_lens_decoder=n + k,
                step_idx=k + 1, is_block_step=False, batch_drop=False,
                pre_ids=([-1, ACCEPTED[0]] + sampled, -1), mask_rollback=0,
                attn_mask_offsets_full=([n], 0), attn_mask_offsets_decoder=n + k,
                decode_states=([], 0)),
           dict(accept_tokens=([ACCEPTED[1]], 0), accept_num=1, seq_lens_this_time=len(handed),
                seq_lens_encoder=0, seq_lens_decoder=n + 2, step_idx=3, stop_flags=False,
                is_block_step=False, draft_tokens=_verified(handed)))
    return (f"handed to the decode node with its first token {FIRST_TOKEN} and the prefill "
            f"node's draft token {PREFILL_NODE_DRAFT}, after its first decode step: the base "
            f"model accepted 1 token ({ACCEPTED[0]}), the draft fed it and sampled {sampled}, "
            f"the last the end token {EOS}: the draft stopped{_KEPT if kept else ''}; the base "
            f"model verified {handed}, accepted 1 token ({ACCEPTED[1]}) and runs on")


def after_block_step(r: Runner) -> str:
    """A request decoding (its base model's second verification done, the
    draft k - 1 positions ahead of it, as every decode step leaves it), then
    parked by a block step: the base model blocked, the draft's preprocess
    stopped it, set its parked flag and zeroed its lengths (FastDeploy
    9018ccf74, draft_model_preprocess.cu lines 188-190 and 252-255); the base
    model then resumed and decoded its last token alone."""
    k, n = r.k, len(PROMPT)
    D = n + 2  # the base model's KV positions after its second verification
    r.fill(dict(draft_tokens=([-1], -1), input_ids=([], 0), stop_flags=True,
                seq_lens_this_time=0, seq_lens_encoder=0, seq_lens_decoder=0, step_idx=0,
                # The op's is_block_step is the runner's batch_drop buffer
                # (RunnerCode.swap): the parked flag the op wrote is there.
                is_block_step=False, batch_drop=True,
                pre_ids=([FIRST_TOKEN, ACCEPTED[0]], -1), mask_rollback=0,
                attn_mask_offsets_full=(list(MASK_OFFSETS), 0),
                attn_mask_offsets_decoder=D + k - 1, decode_states=([], 0)),
           dict(accept_tokens=([ACCEPTED[1]], 0), accept_num=1, seq_lens_this_time=1,
                seq_lens_encoder=0, seq_lens_decoder=D + 1, step_idx=3, stop_flags=False,
                is_block_step=False, draft_tokens=_verified([ACCEPTED[0]])))
    node = "a decode node" if r.role == "pd" else "a mixed node"
    return (f"decoding on {node}: the base model's KV positions at {D}, the draft's mask cursor "
            f"at {D + k - 1} ({k - 1} ahead, its run-ahead substeps); then a block step: the "
            f"base model blocked and the draft's preprocess parked it (seq_lens_decoder 0, "
            f"is_block_step); the base model resumed, decoded its last token "
            f"{ACCEPTED[0]} alone and accepted 1 token ({ACCEPTED[1]})")


def decode_node_base(r: Runner) -> None:
    """The base model after its first verification on the decode node: it
    checked the first token and the prefill node's draft token and accepted
    one token."""
    n = len(PROMPT)
    r.fill({}, dict(accept_tokens=([ACCEPTED[0]], 0), accept_num=1, seq_lens_this_time=2,
                    seq_lens_encoder=0, seq_lens_decoder=n + 1, step_idx=2, stop_flags=False,
                    is_block_step=False,
                    draft_tokens=_verified([FIRST_TOKEN, PREFILL_NODE_DRAFT])))


# ---------------------------------------------------------------------------
# The calls, each tensor before and after


@dataclass
class Row:
    op_input: str  # the op's name for the argument ("" for an insert's buffer)
    buffer: str    # the runner's buffer passed there
    before: list
    after: list


@dataclass
class Block:
    title: str
    rows: List[Row] = field(default_factory=list)
    returned: Optional[list] = None  # the mask op's attn_mask_offsets
    notes: List[str] = field(default_factory=list)


def _snapshot(tensors: Dict[str, object]) -> Dict[str, list]:
    return {n: read(t).tolist() for n, t in tensors.items()}


def _invariant_note(before: int, after: int) -> str:
    return f"invariant {INVARIANT}: {before} -> {after}"


def _insert_buffers(r: Runner) -> Dict[str, object]:
    """The draft buffers an insert may write, by FastDeploy's names."""
    watched = {f'model_inputs["{f}"]': r.state[f] for f in SLOT_FIELDS}
    if r.recompute is not None:
        watched['model_inputs["recompute_token_num"]'] = r.recompute
    return watched


def insert_block(r: Runner) -> Block:
    """FastDeploy's insert of the request on a decode node
    (sim_fastdeploy.insert), every buffer it may write before and after."""
    code = RUNNERS[r.form]
    n = len(PROMPT)
    watched = _insert_buffers(r)
    before, inv = _snapshot(watched), r.invariant()
    sim_fastdeploy.insert(r, [Request(slot=0, prompt=list(PROMPT), mask_offsets=list(MASK_OFFSETS),
                                      first_token=FIRST_TOKEN, draft_token=PREFILL_NODE_DRAFT)],
                          r.recompute, r.form)
    after = _snapshot(watched)
    b = Block(f"insert_tasks_v1 as FastDeploy {code.commit}'s decode node runs it ({MTP_PY} "
              f"lines {code.insert}): the request handed over with its first token "
              f"{FIRST_TOKEN} and the prefill node's draft token {PREFILL_NODE_DRAFT}, "
              f"inserted as the one-token span [{n}, {n + 1})")
    b.rows = [Row("", name, before[name], after[name]) for name in watched]
    b.notes.append(_invariant_note(inv, r.invariant()))
    return b


def preprocess_block(r: Runner, chunk: bool = False) -> Block:
    """draft_model_preprocess, the form's raw op, positionally, as
    FastDeploy's proposer calls it (sim_fastdeploy.preprocess_call). With
    `chunk`, no notes: the caller reads the quantity of a chunk."""
    from .. import forms

    code = RUNNERS[r.form]
    form, inputs, attrs = sim_fastdeploy.preprocess_call(r, r.recompute, r.max_dec_len, r.form)
    named = {id(t): name for name, t in r.buffers().items()}
    before, inv = _snapshot(inputs), r.invariant()
    forms.load(form).library.draft_model_preprocess(*inputs.values(), *attrs.values())
    after = _snapshot(inputs)
    shown = ", ".join(f"{a}={v}" for a, v in attrs.items())
    order = (f"its batch_drop where the op declares is_block_step and its is_block_step where "
             f"the op declares batch_drop (lines {code.swap})" if code.swap
             else "each buffer where the op declares it")
    b = Block(f"draft_model_preprocess, the {form} form's raw op, positionally, as FastDeploy "
              f"{code.commit}'s proposer calls it ({MTP_PY} lines {code.preprocess}{code.note}): "
              f"{order}; {shown}")
    b.rows = [Row(name, named[id(t)], before[name], after[name]) for name, t in inputs.items()]
    if chunk:
        return b
    b.notes.append(_invariant_note(inv, r.invariant()))
    if r.value("seq_lens_encoder") == 0 and not r.value("stop_flags"):
        S, B, a = (r.value(n) for n in ("seq_lens_decoder", "base_model_seq_lens_decoder",
                                        "base_model_accept_num"))
        b.notes.append(f"alignment {ALIGNMENT}: {S} - ({B} - {a}) = {r.alignment()}")
    return b


def mask_block(r: Runner):
    """The form's raw update_attn_mask_offsets on the substep's tokens, as
    FastDeploy's proposer calls it; the block, and (KV position, mask end,
    true end) of each token."""
    import paddle

    from .. import forms

    code = RUNNERS[r.form]
    n = r.value("seq_lens_this_time")
    tokens = read(r.state["draft_tokens"])[0, :n]
    given = {"ids_remove_padding": paddle.to_tensor(tokens, place=r.place),
             "cu_seqlens_q": paddle.to_tensor(np.array([0, n], np.int32), place=r.place)}
    labels = {"ids_remove_padding": "(the substep's tokens)",
              "cu_seqlens_q": "(their prefix sums)"}
    names = FORMS[r.form]["update_attn_mask_offsets"].input_names
    inputs = {name: given[name] if name in given else r.state[name] for name in names}
    before, inv, S = _snapshot(inputs), r.invariant(), r.value("seq_lens_decoder")
    outs = forms.load(r.form).library.update_attn_mask_offsets(*inputs.values())
    offsets = read(outs[0] if isinstance(outs, (list, tuple)) else outs)
    after = _snapshot(inputs)
    b = Block(f"update_attn_mask_offsets, the {r.form} form's raw op, positionally, as "
              f"FastDeploy {code.commit}'s proposer calls it ({MTP_PY} lines {code.mask}), on "
              f"the {n} token(s) the preprocess left to feed")
    b.rows = [Row(name, labels.get(name, f'model_inputs["{name}"]'), before[name], after[name])
              for name in names]
    b.returned = offsets.tolist()
    # The op advances the cursor by the tokens it numbered; the draft's own
    # update adds them to seq_lens_decoder after the forward (contract, "One
    # engine step"): counted here, the invariant of a form without drift holds.
    b.notes.append(f"invariant {INVARIANT}, the {n} token(s) fed counted in seq_lens_decoder "
                   f"as the draft's update counts them next: {inv} -> {r.invariant() - n}")
    positions = S + np.arange(n)
    ends = true_ends(np.asarray(MASK_OFFSETS, np.int64), positions)
    fed = [(int(p), int(offsets[2 * j + 1]), int(ends[j])) for j, p in enumerate(positions)]
    for j, (p, got, want) in enumerate(fed):
        b.notes.append(f"token {j} (KV position {p}): mask end {got}, true end {want}: "
                       f"{got - want:+d}")
    return b, fed


_SCENARIOS = {"running": lambda r: after_prefill_step(r, ended=False),
              "resume": after_block_step,
              "resync": lambda r: (after_prefill_step(r, ended=True) if r.role == "mixed"
                                   else after_first_decode_step(r))}


@dataclass
class Reproduction:
    form: str
    role: str
    k: int
    case: Case
    story: str
    blocks: List[Block]
    drift: int
    said: str  # what drifted, in a sentence
    here: str  # the cause's values on this state


def reproduce(form: str, role: str, k: int) -> Optional[Reproduction]:
    """`form`'s drift on one request, or None where its row is exact."""
    case = case_for(form, role, k)
    if case is None:
        return None
    r = Runner(form, role, k)
    blocks = []
    if case.scenario == "insert":
        blocks.append(insert_block(r))
        decode_node_base(r)
        story = (f"handed to the decode node with its first token {FIRST_TOKEN} and the "
                 f"prefill node's draft token {PREFILL_NODE_DRAFT}; after the insert the base "
                 f"model verifies [{FIRST_TOKEN}, {PREFILL_NODE_DRAFT}] and accepts 1 token "
                 f"({ACCEPTED[0]})")
    else:
        story = _SCENARIOS[case.scenario](r)
    inv_before = r.invariant()
    S_before, M_before = r.value("seq_lens_decoder"), r.value("mask_rollback")
    blocks.append(preprocess_block(r))
    inv_after, alignment = r.invariant(), r.alignment()
    here = (f"here: seq_lens_decoder {S_before} -> {r.value('seq_lens_decoder')}, mask_rollback "
            f"{M_before} -> {r.value('mask_rollback')}, attn_mask_offsets_decoder "
            f"{r.value('attn_mask_offsets_decoder')}")
    mask, fed = mask_block(r)
    blocks.append(mask)
    if case.quantity == INVARIANT:
        drift = inv_after - inv_before
        said = (f"the invariant {INVARIANT} went from {inv_before} to {inv_after} in "
                "draft_model_preprocess")
    elif case.quantity == MASK_END:
        p, got, want = fed[0]
        drift = got - want
        said = (f"the mask op gave the first token fed (KV position {p}) the end {got}; the true "
                f"end of that position is {want}")
    else:
        drift = alignment
        said = (f"after draft_model_preprocess the draft's {ALIGNMENT} is {alignment}: it feeds "
                "the accepted tokens at KV positions other than the base model's")
    if drift == 0:  # the case table says this row drifts: the state is wrong
        raise RuntimeError(f"reproduce: the {form} form's state for role {role}, k {k} shows no "
                           f"drift of {case.quantity}")
    return Reproduction(form, role, k, case, story, blocks, drift, said, here)


# ---------------------------------------------------------------------------
# A prefill chunk before the prompt's last (--chunk N)
#
# Every form drifts there, and for one reason in the runner, not the ops:
# the base model samples a token at the chunk's last position, which the
# runner does not output, and the draft's preprocess puts it at that
# position's input, where the prompt's next token belongs; the next chunk
# starts one position later, so nothing computes that K/V again
# (sim_fastdeploy's docstring, on chunks).

SAVE_OUTPUT = "custom_ops/gpu_ops/speculate_decoding/speculate_save_output.cc"
XPU_SAVE_OUTPUT = "custom_ops/xpu_ops/src/ops/mtp/speculate_save_output.cc"
SHADOW_PREPROCESS = PREPROCESS_FILE
XPU_PREPROCESS = XPU_ROLLBACK.path
# The base model's sample at the first chunk's last position: no token of
# chunk_prompt (whose tokens lie below it for every N up to CHUNK_MAX).
CHUNK_SAMPLE = 99
CHUNK_MAX = 32


def chunk_prompt(chunk: int) -> tuple:
    """The prompt of a chunked reproduction: 2N text tokens, two chunks of N."""
    return tuple(range(PROMPT[0], PROMPT[0] + 2 * chunk))


assert PROMPT[0] + 2 * CHUNK_MAX - 1 < CHUNK_SAMPLE


def chunk_argument(text: str) -> int:
    """--chunk's value: an int in [1, CHUNK_MAX] (argparse says so in one line)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if not 1 <= n <= CHUNK_MAX:
        raise argparse.ArgumentTypeError(
            f"must be within [1, {CHUNK_MAX}] (the prompt is 2N tokens, two chunks of N), "
            f"got {n}")
    return n


@dataclass(frozen=True)
class ChunkRunner:
    """Where FastDeploy's runner of one commit inserts a prefill task and
    drops a chunk's sample from its output."""

    commit: str
    insert: str       # insert_tasks_v1's prefill-task lines (mtp.py)
    start: str        # its line seq_lens_decoder = the task's start
    save_output: str  # the file that skips a request short of its prompt
    skip: str         # its lines


CHUNK_RUNNERS = {
    "9018ccf74": ChunkRunner("9018ccf74", "527-566", "552", SAVE_OUTPUT, "106"),
    "ba915e03e": ChunkRunner("ba915e03e", "478-517", "503", SAVE_OUTPUT, "106"),
    "2178f2829": ChunkRunner("2178f2829", "461-500", "486", SAVE_OUTPUT, "107-108"),
    "c29e86fc9": ChunkRunner("c29e86fc9", "478-521", "504", SAVE_OUTPUT, "108-109"),
}
XPU_CHUNK_RUNNER = ChunkRunner("c29e86fc9", "478-521", "504", XPU_SAVE_OUTPUT, "109-110")


def _chunk_runner(form: str) -> ChunkRunner:
    return XPU_CHUNK_RUNNER if form == "xpu" else CHUNK_RUNNERS[RUNNERS[form].commit]


def _chunk_cause(commit: str, path: str, lines: str, kernel: str, form: str,
                 when: str = " whose base model has not stopped nor a block step dropped it"
                 ) -> Cause:
    """`when`: what besides seq_lens_encoder > 0 the branch asks of a request."""
    run = _chunk_runner(form)
    return Cause(
        commit, path, lines,
        f"{kernel}: a request with seq_lens_encoder > 0{when} gets accept_tokens[i, 0] at "
        "input_ids[i, seq_lens_encoder - 1] and feeds seq_lens_encoder tokens from "
        "seq_lens_decoder: after a chunk before the prompt's last, that token is "
        "the base model's sample at the chunk's last position, which the runner does not "
        f"output (FastDeploy {run.commit}, {run.save_output} "
        f"{'lines' if '-' in run.skip else 'line'} {run.skip}: a request whose "
        "seq_lens_decoder is short of its prompt outputs nothing), put where the prompt's "
        "next token belongs; the next chunk's insert starts seq_lens_decoder at this chunk's "
        f"end ({MTP_PY} line {run.start} there), so the draft's K/V at the chunk's last "
        "position is never computed again. The fix is the runner's: give the draft the "
        "prompt's next token there")


def _gpu_cause(commit: str, mixed: str, prefill: str, form: str, kernel: str) -> Dict[str, Cause]:
    return {"mixed": _chunk_cause(commit, PREPROCESS_FILE, mixed,
                                  f"{kernel}, in draft_model_preprocess_kernel", form),
            "pd": _chunk_cause(commit, PREPROCESS_FILE, prefill,
                               f"{kernel}, in process_splitwise_prefill (the prefill node's "
                               "kernel)", form, when="")}


CHUNK_CAUSES: Dict[str, Dict[str, Cause]] = {
    # Our 21-tensor op places the first token as FastDeploy's does
    # (docs/contract.md, "Place the first token"), under 9018ccf74's runner.
    "rollback": _gpu_cause("9018ccf74", "204-213", "99-111", "rollback",
                           "FastDeploy's 22-tensor op, whose rule the rollback form's op "
                           "keeps (docs/contract.md, \"Place the first token\")"),
    "recompute": _gpu_cause("9018ccf74", "204-213", "99-111", "recompute",
                            "FastDeploy's 22-tensor op"),
    "pr5738": _gpu_cause("9018ccf74", "204-213", "99-111", "pr5738",
                         "FastDeploy's 22-tensor op"),
    "pr6403": _gpu_cause("9018ccf74", "204-213", "99-111", "pr6403",
                         "FastDeploy's 22-tensor op (2178f2829 left this file as 9018ccf74 "
                         "has it)"),
    "pr5245": _gpu_cause("ba915e03e", "200-213", "97-109", "pr5245",
                         "FastDeploy's 20-tensor op"),
    "xpu": {"mixed": _chunk_cause("c29e86fc9", XPU_PREPROCESS, "145-158",
                                  "FastDeploy's XPU op, off a prefill node", "xpu"),
            "pd": _chunk_cause("c29e86fc9", XPU_PREPROCESS, "94-106",
                               "FastDeploy's XPU op, on a prefill node (splitwise_prefill)",
                               "xpu", when="")},
    # One branch on every node: is_splitwise_prefill only lifts the
    # max_dec_len skip (lines 87-91 there).
    "shadow": _both(_chunk_cause("c29e86fc9", SHADOW_PREPROCESS, "107-113",
                                 "FastDeploy's shadow op (17 tensors), which names chunked "
                                 "prefill among the cases of this branch", "shadow",
                                 when=" whose target model has not stopped")),
}


@dataclass
class ChunkReproduction:
    form: str
    role: str
    k: int
    chunk: int
    prompt: tuple
    blocks: List[Block]
    base_lines: List[str]  # the base model's state after the chunk, shown after [1]
    column: int            # the draft's input column of the chunk's last position
    position: int          # the KV position the draft computes there
    got: int               # the draft's input there
    cause: Cause


def chunk_insert_block(r: Runner, prompt: tuple, chunk: int) -> Block:
    """FastDeploy's insert of the prompt's first chunk [0, N) as a prefill
    task (sim_fastdeploy.insert with spans), every buffer before and after."""
    run = _chunk_runner(r.form)
    watched = _insert_buffers(r)
    before = _snapshot(watched)
    sim_fastdeploy.insert(r, [Request(slot=0, prompt=list(prompt),
                                      mask_offsets=list(range(len(prompt))))],
                          r.recompute, r.form, spans={0: (0, chunk)})
    after = _snapshot(watched)
    node = "the prefill node" if r.config.role == "prefill" else "a mixed node"
    b = Block(f"insert_tasks_v1 as FastDeploy {run.commit}'s runner runs it on {node} "
              f"({MTP_PY} lines {run.insert}): the prompt's first chunk, the prefill task "
              f"[0, {chunk}) of its {len(prompt)} tokens")
    b.rows = [Row("", name, before[name], after[name]) for name in watched]
    return b


def base_after_chunk(r: Runner, prompt: tuple, chunk: int) -> List[str]:
    """The base model's buffers after it ran the chunk, as
    sim_models.ScriptedBase leaves them, its sample at the chunk's last
    position set to CHUNK_SAMPLE; lines saying so."""
    from .sim_models import ScriptedBase

    before = _snapshot(r.base)
    base = ScriptedBase(r.base, r.k, MAX_DEC_LEN, 0.0, 0.0, np.random.default_rng(0))
    base.admit(0, list(prompt), mask_offsets=list(range(len(prompt))), span=(0, chunk))
    base.run()
    r.fill({}, dict(accept_tokens=([CHUNK_SAMPLE], 0)))
    after = _snapshot(r.base)
    width = max(len(f'target_model_inputs["{n}"]') for n in r.base)
    lines = [f"the base model after the chunk (sim_models.ScriptedBase): its verify samples "
             f"{CHUNK_SAMPLE} at the chunk's last position {chunk - 1}, accept_num 1, and its "
             f"update moves seq_lens_decoder to the chunk's end {chunk}; the prompt's token "
             f"{chunk} is {prompt[chunk]}. The runner does not output that sample: "
             f"seq_lens_decoder {chunk} is short of the prompt's {len(prompt)} tokens"]
    lines += [f"    {name:<{width}} {_values(Row('', name, before[n], after[n]))}"
              for n in r.base for name in [f'target_model_inputs["{n}"]']]
    return lines


def reproduce_chunk(form: str, role: str, k: int, chunk: int) -> ChunkReproduction:
    """`form`'s drift on one request whose prompt is prefilled in chunks of
    `chunk` tokens: the first chunk's last draft position computed on the
    base model's sample. Every form and role drifts so."""
    prompt = chunk_prompt(chunk)
    r = Runner(form, role, k, chunk)
    blocks = [chunk_insert_block(r, prompt, chunk)]
    base_lines = base_after_chunk(r, prompt, chunk)
    blocks.append(preprocess_block(r, chunk=True))
    fed, start = r.value("seq_lens_this_time"), r.value("seq_lens_decoder")
    column = fed - 1
    position = start + column
    got = int(read(r.state["input_ids"])[0, column])
    # The draft's input at KV position p is the prompt's token p + 1; past
    # the prompt, the base model's sample is the first token and belongs there.
    if column < 0 or position + 1 >= len(prompt) or got == prompt[position + 1]:
        raise RuntimeError(f"reproduce: the {form} form's chunk state for role {role}, k {k}, "
                           f"chunk {chunk} shows no drift of input_ids[0, {column}]")
    return ChunkReproduction(form, role, k, chunk, prompt, blocks, base_lines, column, position,
                             got, CHUNK_CAUSES[form][role])


def render_chunk(rep: ChunkReproduction) -> List[str]:
    node = "the prefill node" if rep.role == "pd" else "a mixed node"
    p = rep.position
    lines = [f"reproduce: the {rep.form} form, role {rep.role}, k {rep.k}, chunk {rep.chunk}: "
             "one request, FastDeploy's runner's op calls on it",
             f"state: slot 0 on {node}, a text prompt of {len(rep.prompt)} tokens "
             f"{list(rep.prompt)} (mask offsets {list(range(len(rep.prompt)))}), prefilled in "
             f"chunks of {rep.chunk}: [0, {rep.chunk}) then [{rep.chunk}, {len(rep.prompt)})"]
    for number, b in enumerate(rep.blocks, 1):
        lines.append(f"[{number}] {b.title}")
        lines += _row_lines(b)
        if number == 1:
            lines += rep.base_lines
    lines += [f"drift: input_ids[0, {rep.column}] = {rep.got} where the prompt's token {p + 1} "
              f"({rep.prompt[p + 1]}) belongs: the draft computes KV position {p} on the base "
              f"model's sample, and the next chunk starts at {rep.chunk}, so nothing computes "
              "it again",
              rep.cause.line(),
              f"FAILED: the {rep.form} form's draft computes a chunk's last position on a token "
              f"that is not the prompt's (input_ids[0, {rep.column}]: {rep.got}, the prompt's "
              f"{rep.prompt[p + 1]})"]
    return lines


# ---------------------------------------------------------------------------
# Printing


def _values(row: Row) -> str:
    if row.before == row.after:
        return f"{row.before} (unchanged)"
    return f"{row.before} -> {row.after}"


def _row_lines(b: Block) -> List[str]:
    """A block's tensors, each before and after (an op's numbered by its
    position in the call)."""
    width = max(len(r.buffer) for r in b.rows)
    return [f"    {i:>2} {row.op_input:<30} {row.buffer:<{width}} {_values(row)}" if row.op_input
            else f"    {row.buffer:<{width}} {_values(row)}" for i, row in enumerate(b.rows)]


def render(rep: Reproduction) -> List[str]:
    lines = [f"reproduce: the {rep.form} form, role {rep.role}, k {rep.k}: one request, "
             "FastDeploy's runner's op calls on it",
             f"state: slot 0, a {len(PROMPT)}-token text prompt {list(PROMPT)} (mask offsets "
             f"{list(MASK_OFFSETS)}), {rep.story}"]
    for number, b in enumerate(rep.blocks, 1):
        lines.append(f"[{number}] {b.title}")
        lines += _row_lines(b)
        if b.returned is not None:
            lines.append(f"    returned attn_mask_offsets {b.returned}")
        lines += [f"    {note}" for note in b.notes]
    lines += [f"drift: {rep.drift:+d}: {rep.said}", rep.case.cause.line(), rep.here,
              f"FAILED: the {rep.form} form drifts on one request ({rep.case.quantity}: "
              f"{rep.drift:+d})"]
    return lines


def main(args) -> int:
    """Print the reproduction; 1 when it shows a drift, 0 for an exact row."""
    if getattr(args, "chunk", None):
        for line in render_chunk(reproduce_chunk(args.form, args.role, args.k, args.chunk)):
            print(line)
        return 1
    rep = reproduce(args.form, args.role, args.k)
    if rep is None:
        print(f"reproduce: the {args.form} form, role {args.role}, k {args.k}: "
              f"{exact_reason(args.form, args.role, args.k)}")
        print(f"OK: nothing to reproduce: the {args.form} form's {args.role} k = {args.k} row of "
              "the verdict table is exact")
        return 0
    for line in render(rep):
        print(line)
    return 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("form", choices=list(CASES), metavar="FORM",
                   help=f"the form whose drift to show ({', '.join(CASES)})")
    p.add_argument("--role", choices=ROLES, default="mixed",
                   help="mixed: one node; pd: the decode node of a PD-split deployment "
                        "(with --chunk its prefill node: a decode node's insert takes no chunk)")
    p.add_argument("-k", type=int, choices=KS, default=2, metavar="K",
                   help=f"num_model_steps ({', '.join(map(str, KS))})")
    p.add_argument("--chunk", type=chunk_argument, default=None, metavar="N",
                   help=f"show instead the drift of FastDeploy's chunked prefill, in every form "
                        f"and role (pd: the prefill node): a prompt of 2N tokens prefilled in "
                        f"chunks of N, N from 1 to {CHUNK_MAX}")
