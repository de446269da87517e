"""The check that keeps the replay honest against FastDeploy's real proposer
(fastdeploy_mtp.harness.replay_twin), without FastDeploy: the "real" step here
is the replay's own, run on the original buffers, so the twin must agree with
it exactly and must name whatever is changed on the real side afterwards.
(tests/test_real_fastdeploy.py runs it against FastDeploy's own code.)"""

import numpy as np
import pytest

from fastdeploy_mtp.buffers import read, write
from fastdeploy_mtp.harness import sim_fastdeploy, simulate
from fastdeploy_mtp.harness.replay_twin import Twin, replay_form
from fastdeploy_mtp.harness.sim_models import EOS, draft_substep_update
from helpers import sim_args


def _node(form, role, k, steps=6):
    """A node of the replay after a few engine steps (running decodes, a
    prefill or two, drafts that ended early)."""
    a = sim_args(runner="fastdeploy", form=form, mode=role, num_model_steps=k, batch=4,
                 draft_eos_prob=0.3, seed=3)
    rng = np.random.default_rng(3)
    tally = simulate.Tally(outside=sim_fastdeploy.OutsideWrites())
    node = simulate.make_node(role, role, k, a, rng, False, tally.outside)
    for step in range(steps):
        simulate.admit_new(node, rng, a)
        simulate.engine_step(node, step, rng, a, tally)
        simulate.release_finished(node)
    simulate.admit_new(node, rng, a)
    node.base.run()  # the base model's step; the draft's is the test's
    return node, a


def _draft_buffers(node):
    buffers = dict(node.proposer.state)
    if node.draft.recompute is not None:
        buffers["recompute_token_num"] = node.draft.recompute
    if node.draft.max_dec_len is not None:
        buffers["max_dec_len"] = node.draft.max_dec_len
    return buffers


def _real_step(node, twin, form, k, max_dec_len, sampled):
    """The replay's step on the node's own buffers, standing in for
    FastDeploy's: what the twin is told is what it fed and sampled."""
    p = node.proposer
    node.draft.prepare_inputs()
    for sub in range(k):
        if not bool(read(p.state["not_need_stop"]).reshape(-1)[0]):
            break
        n_all = read(p.state["seq_lens_this_time"]).reshape(-1)
        cu = np.zeros(n_all.shape[0] + 1, np.int32)
        cu[1:] = np.cumsum(n_all)
        ids = simulate.step_tokens(p, n_all, cu)
        out = node.draft.mask_offsets(ids, cu).reshape(-1)[:2 * ids.shape[0]]
        twin.substep(ids, cu, out)
        chosen = {i: sampled[(sub + i) % len(sampled)] for i in range(n_all.shape[0])}
        twin.sample(chosen)
        draft_substep_update(p, sub, np.random.default_rng(0), 0.0, max_dec_len, chosen,
                             sim_fastdeploy.OutsideWrites(),
                             sim_fastdeploy.draft_update_kernel(form))


def _told_of_a_step(form, role, k, sampled, steps=6):
    """A node and a twin told of one "real" step on it (the replay's own,
    _real_step); the twin has not compared yet."""
    node, a = _node(form, role, k, steps=steps)
    twin = Twin(form, role, k, a.batch, node.proposer.config.max_model_len, a.max_dec_len)
    twin.before(_draft_buffers(node), node.proposer.base)
    _real_step(node, twin, form, k, a.max_dec_len, sampled)
    return node, twin


@pytest.mark.parametrize("form,role,k", [("pr5738", "mixed", 2), ("pr5245", "mixed", 3),
                                         ("recompute", "mixed", 2), ("shadow", "mixed", 2),
                                         ("pr6403", "mixed", 4), ("pr5738", "prefill", 2)])
def test_the_twin_agrees_with_the_same_step_and_names_what_differs(form, role, k):
    node, twin = _told_of_a_step(form, role, k, [17, EOS, 23],
                                 steps=1 if role == "prefill" else 6)
    twin.after(_draft_buffers(node), node.proposer.base, "here")
    assert twin.steps == 1 and twin.substeps >= 1
    assert twin.mismatches == 0, twin.first
    # One buffer changed on the real side after the step: named, with both values.
    step = read(node.proposer.state["step_idx"])
    step[0] += 1
    write(node.proposer.state["step_idx"], step)
    twin.after(_draft_buffers(node), node.proposer.base, "there")
    assert twin.mismatches == 1
    assert twin.first.startswith("there: step_idx: replay ["), twin.first


def test_the_twin_names_a_substep_s_mask_offsets_and_tokens_that_differ():
    node, twin = _told_of_a_step("pr5738", "mixed", 2, [17, 23])
    ids, cu, offsets = twin.fed[0]
    offsets = offsets.copy()
    offsets[1] += 1
    ids = ids.copy()
    ids[0] += 1
    twin.fed[0] = (ids, cu, offsets)
    twin.after(_draft_buffers(node), node.proposer.base, "here")
    assert twin.kinds == {"the tokens fed": 1, "the mask offsets": 1}
    assert twin.first.startswith("here substep 0: the tokens fed"), twin.first


def test_the_twin_names_a_substep_fastdeploy_ran_and_the_replay_did_not():
    node, twin = _told_of_a_step("pr5738", "mixed", 2, [17, 23])
    assert len(twin.fed) == 2
    del twin.fed[-1], twin.sampled[-1]  # FastDeploy stopped after one substep
    twin.after(_draft_buffers(node), node.proposer.base, "here")
    assert twin.first == "here: the substeps run: replay 2, FastDeploy 1", twin.first


@pytest.mark.parametrize("forms,want", [
    ({"draft_model_preprocess": "pr5738", "update_attn_mask_offsets": "pr5738"}, "pr5738"),
    ({"draft_model_preprocess": "pr5738", "update_attn_mask_offsets": "pr6403"}, "pr6403"),
    ({"draft_model_preprocess": "pr5245", "update_attn_mask_offsets": "pr5738"}, "pr5245"),
    ({"draft_model_preprocess": "shadow", "update_attn_mask_offsets": "shadow"}, "shadow"),
    ({"draft_model_preprocess": "none (9 registered tensors)"}, None),
])
def test_the_replay_form_of_a_real_run_s_ops(forms, want):
    assert replay_form(forms) == want
