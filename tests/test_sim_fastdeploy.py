"""The simulator's replay of FastDeploy's own runner (``simulate --runner
fastdeploy``): its inserts and presets per form and role, the order in which
it hands our ops the buffers, and its count of the writes FastDeploy's kernels
would make outside a row, each against values worked out by hand from
FastDeploy's code (paths in FastDeploy's tree, at the commit named); then the
loop with the tiny draft model and the cache-free oracle."""

from pathlib import Path

import numpy as np
import pytest

from fastdeploy_mtp.buffers import BASE_KEYS, SLOT_FIELDS, read, write
from fastdeploy_mtp.harness import sim_fastdeploy, sim_models, simulate, simulate_cli
from fastdeploy_mtp.proposer import MTPProposer, ProposerConfig, make_base_buffers
from fastdeploy_mtp.slots import Request
from helpers import sim_args

ROOT = Path(__file__).resolve().parents[1]


def run(**kw):
    a = sim_args(**{"steps": 30, "batch": 6, "runner": "fastdeploy", "draft_model": "tiny",
                    "image_prob": 0.5, **kw})
    return simulate.run(a, legacy=False, print_rows=False)


def proposer(role="mixed", k=3, batch=2, max_model_len=16):
    base = make_base_buffers(batch, k)
    return MTPProposer(ProposerConfig(num_model_steps=k, max_model_len=max_model_len,
                                      max_num_seqs=batch, role=role), base)


def state_of(p, names=SLOT_FIELDS):
    return {n: read(p.state[n]) for n in names}


def set_state(p, **values):
    """Overwrite whole draft buffers: {name: numpy array}."""
    for n, v in values.items():
        write(p.state[n], np.asarray(v, read(p.state[n]).dtype))


def set_base(p, **values):
    for n, v in values.items():
        write(p.base[n], np.asarray(v, read(p.base[n]).dtype))


# ---------------------------------------------------------------------------
# The inserts, per form and role

# What every draft buffer holds before the insert: a value no insert writes,
# so that a buffer the insert leaves alone is seen to keep it.
SENTINELS = dict(draft_tokens=77, input_ids=88, stop_flags=True, seq_lens_this_time=99,
                 seq_lens_encoder=99, seq_lens_decoder=99, step_idx=99, is_block_step=True,
                 batch_drop=True, pre_ids=66, mask_rollback=55, attn_mask_offsets_full=44,
                 attn_mask_offsets_decoder=33, decode_states=22)
RECOMPUTE_SENTINEL = 11


def inserted(role, form):
    """Slot 1 of a 2-slot node (k = 3, 16 columns) after FastDeploy's insert
    of a 4-token prompt [5, 6, 7, 8] whose tokens 1..2 are an image span
    (mask offsets [0, 2, 2, 3]); on a decode node it arrives with its first
    token 11 and the prefill node's draft token 12. Returns (slot 1's
    buffers, slot 0's buffers, recompute_token_num or None)."""
    import paddle

    p = proposer(role)
    set_state(p, **{n: np.full_like(read(p.state[n]), v) for n, v in SENTINELS.items()})
    recompute = (paddle.to_tensor(np.full(2, RECOMPUTE_SENTINEL, np.int32))
                 if form == "recompute" else None)
    req = Request(slot=1, prompt=[5, 6, 7, 8], mask_offsets=[0, 2, 2, 3],
                  first_token=11 if role == "decode" else None,
                  draft_token=12 if role == "decode" else None)
    sim_fastdeploy.insert(p, [req], recompute, form)
    st = state_of(p)
    return ({n: v[1] for n, v in st.items()}, {n: v[0] for n, v in st.items()},
            None if recompute is None else read(recompute))


def assert_slot(got, want):
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def untouched_row():
    p = proposer()
    return {n: np.full_like(read(p.state[n])[0], v) for n, v in SENTINELS.items()}


@pytest.mark.parametrize("form", ["rollback", "recompute", "shadow"])
@pytest.mark.parametrize("role", ["mixed", "prefill"])
def test_a_new_prompt_s_insert_per_form(role, form):
    """FastDeploy's insert_tasks_v1 (mtp.py 9018ccf74:527-566; c29e86fc9:478-521
    for the shadow form) on a mixed or prefill node: the scheduler hands the
    prompt as the prefill [0, 4) (resource_manager_v1.py 9018ccf74:216-217,
    a waiting request's first schedule), so length = 4:
    input_ids[:3] = the base row [5, 6, 7, 8] from column 1 = [6, 7, 8]
    (9018ccf74:536), pre_ids all -1 (535), stop_flags and batch_drop false
    (548-549), seq_lens_encoder = 4, seq_lens_decoder = prefill start 0,
    seq_lens_this_time = 4 (551-553), step_idx = 0 (554-556: the prompt has
    no output tokens), attn_mask_offsets_full[:4] = [0, 2, 2, 3] (559-563),
    the cursor attention_mask_offset[4 - 1] + 1 = 3 + 1 = 4 (564-566; the
    shadow versions' GPU runner does not write it: c29e86fc9:518-521, XPU
    only). No mask_rollback, recompute_token_num, draft_tokens, is_block_step
    or decode_states: they keep 55, 11, 77, True, 22."""
    row, other, recompute = inserted(role, form)
    assert_slot(row, dict(
        input_ids=[6, 7, 8] + [88] * 13, pre_ids=[-1] * 16, stop_flags=False, batch_drop=False,
        seq_lens_encoder=4, seq_lens_decoder=0, seq_lens_this_time=4, step_idx=0,
        attn_mask_offsets_full=[0, 2, 2, 3] + [44] * 12,
        attn_mask_offsets_decoder=33 if form == "shadow" else 4,
        mask_rollback=55, draft_tokens=[77] * 4, is_block_step=True, decode_states=[22] * 4))
    if recompute is not None:
        np.testing.assert_array_equal(recompute, [11, 11])
    assert_slot(other, untouched_row())


@pytest.mark.parametrize("form", ["rollback", "recompute"])
def test_a_decode_node_s_insert_of_the_december_runner(form):
    """FastDeploy's insert_tasks_v1 at 9018ccf74 (mtp.py:527-575) on a decode
    node. Its scheduler hands the request over as the one-token prefill
    [4, 5): the decode node counts the 4 prompt tokens computed
    (resource_manager_v1.py:1094), appends the first token 11 and asks for
    4 + 1 tokens (1126, 1133), and schedules the difference as a prefill
    (216-217, 360). So length = 1: input_ids[:0] (nothing: 88s stay, 536),
    pre_ids all -1, stop_flags and batch_drop false, seq_lens_decoder = 4,
    seq_lens_this_time = 1, step_idx = len(output ids [11]) = 1 since
    5 >= 5 tokens (554-556); attn_mask_offsets_full[:1] = the first generated
    token's offset, 4 (it attends causally: its own position), the cursor
    4 + 1 = 5 (559-566); then seq_lens_encoder = 0, recompute_token_num = 0
    and mask_rollback = 1 (570-574). draft_tokens (the handed draft token is
    not used: 77s stay), is_block_step and decode_states are not written."""
    row, other, recompute = inserted("decode", form)
    assert_slot(row, dict(
        input_ids=[88] * 16, pre_ids=[-1] * 16, stop_flags=False, batch_drop=False,
        seq_lens_encoder=0, seq_lens_decoder=4, seq_lens_this_time=1, step_idx=1,
        attn_mask_offsets_full=[4] + [44] * 15, attn_mask_offsets_decoder=5,
        mask_rollback=1, draft_tokens=[77] * 4, is_block_step=True, decode_states=[22] * 4))
    if form == "recompute":
        np.testing.assert_array_equal(recompute, [11, 0])
    assert_slot(other, untouched_row())


def test_a_decode_node_s_insert_of_the_shadow_runner():
    """FastDeploy's insert_tasks_v1 at c29e86fc9 (mtp.py:478-531; 7a6c28781
    and e87ce4b8c alike but for the cursor) on a decode node, the same
    one-token prefill [4, 5) (resource_manager_v1.py c29e86fc9:1408, 1442,
    1449, 249-250, 508): as at 9018ccf74 but seq_lens_this_time = length + 1
    = 2 (528) and no cursor on the GPU (518-521, XPU only: 33 stays);
    mask_rollback = 1 is still written (531), to a buffer no op of that
    form reads."""
    row, other, _ = inserted("decode", "shadow")
    assert_slot(row, dict(
        input_ids=[88] * 16, pre_ids=[-1] * 16, stop_flags=False, batch_drop=False,
        seq_lens_encoder=0, seq_lens_decoder=4, seq_lens_this_time=2, step_idx=1,
        attn_mask_offsets_full=[4] + [44] * 15, attn_mask_offsets_decoder=33,
        mask_rollback=1, draft_tokens=[77] * 4, is_block_step=True, decode_states=[22] * 4))
    assert_slot(other, untouched_row())


# ---------------------------------------------------------------------------
# The order FastDeploy passes the buffers in


@pytest.mark.parametrize("form", ["rollback", "recompute"])
def test_the_preprocess_gets_fastdeploy_s_batch_drop_as_is_block_step_and_back(form):
    """mtp.py _prepare_inputs passes model_inputs["batch_drop"] 9th and
    model_inputs["is_block_step"] 10th (ba915e03e:694-695, 9018ccf74:766-767),
    where the op declares is_block_step, then batch_drop
    (cpp_extensions.cc ba915e03e:879-880, 9018ccf74:887-888;
    draft_model_preprocess.cu 9018ccf74:459-460); every other tensor in the
    op's own place, the base model's as base_model_*, then num_model_step =
    k on every node, truncate_first_token, splitwise_prefill (the prefill
    node) and the v1 scheduler flag (9018ccf74:756-784)."""
    import paddle

    p = proposer(role="prefill")
    recompute = paddle.to_tensor(np.zeros(2, np.int32)) if form == "recompute" else None
    got_form, inputs, attrs = sim_fastdeploy.preprocess_call(p, recompute)
    assert got_form == form
    s, b = p.state, p.base
    want = dict(draft_tokens=s["draft_tokens"], input_ids=s["input_ids"],
                stop_flags=s["stop_flags"], seq_lens_this_time=s["seq_lens_this_time"],
                seq_lens_encoder=s["seq_lens_encoder"], seq_lens_decoder=s["seq_lens_decoder"],
                step_idx=s["step_idx"], not_need_stop=s["not_need_stop"],
                is_block_step=s["batch_drop"], batch_drop=s["is_block_step"],
                pre_ids=s["pre_ids"], mask_rollback=s["mask_rollback"])
    if form == "recompute":
        want["recompute_token_num"] = recompute
    want.update(accept_tokens=b["accept_tokens"], accept_num=b["accept_num"])
    want.update({f"base_model_{n}": b[n] for n in BASE_KEYS[2:]})
    assert list(inputs) == list(want)
    for name in want:
        assert inputs[name] is want[name], f"{name}: not the buffer FastDeploy passes there"
    assert attrs == dict(num_model_step=3, truncate_first_token=True, splitwise_prefill=True,
                         kvcache_scheduler_v1=True)


def test_the_shadow_preprocess_gets_the_buffers_in_the_op_s_own_order():
    """The shadow versions' call (mtp.py e87ce4b8c:720-740, 7a6c28781:723-743,
    c29e86fc9:728-748) has no is_block_step or batch_drop and matches the
    op's declaration (cpp_extensions.cc 7a6c28781:968-986,
    draft_model_preprocess.cu c29e86fc9:208-225)."""
    p = proposer(role="decode")
    limits = sim_fastdeploy.max_dec_lens(p, 50)
    form, inputs, attrs = sim_fastdeploy.preprocess_call(p, max_dec_len=limits)
    s, b = p.state, p.base
    want = [s["draft_tokens"], s["input_ids"], s["stop_flags"], s["seq_lens_this_time"],
            s["seq_lens_encoder"], s["seq_lens_decoder"], s["step_idx"], s["not_need_stop"],
            s["pre_ids"], b["accept_tokens"], b["accept_num"], b["seq_lens_encoder"],
            b["seq_lens_decoder"], b["step_idx"], b["stop_flags"], limits, b["draft_tokens"]]
    assert form == "shadow" and len(inputs) == len(want) == 17
    for (name, got), expected in zip(inputs.items(), want):
        assert got is expected, f"{name}: not the buffer FastDeploy passes there"
    assert attrs == dict(num_model_step=3, is_splitwise_prefill=False)


def swap_case(form):
    """A 3-slot mixed node (k = 3, 16 columns) of three running decodes, run
    through the replay's preprocess; returns what it leaves. Slot 0's draft
    has FastDeploy's is_block_step set; slot 1's base model is in a block
    step (stopped); slot 2 is a plain decode (accept 2, base step 8)."""
    p = proposer(batch=3)
    set_state(p, seq_lens_encoder=[0, 0, 0], seq_lens_decoder=[10, 7, 9], step_idx=[5, 4, 6],
              stop_flags=[False] * 3, is_block_step=[True, False, False],
              batch_drop=[False] * 3, mask_rollback=[0] * 3)
    set_base(p, stop_flags=[False, True, False], is_block_step=[False, True, False],
             accept_num=[1, 0, 2], accept_tokens=[[21, 0, 0, 0], [0] * 4, [31, 32, 0, 0]],
             step_idx=[6, 5, 8], seq_lens_decoder=[11, 8, 12], seq_lens_this_time=[2, 0, 4])
    recompute = sim_fastdeploy.recompute_counts(p) if form == "recompute" else None
    sim_fastdeploy.prepare_inputs(p, sim_fastdeploy.OutsideWrites(), "swap", recompute)
    names = ("stop_flags", "seq_lens_decoder", "seq_lens_this_time", "step_idx",
             "is_block_step", "batch_drop")
    return {n: read(p.state[n]).tolist() for n in names}


# FastDeploy's kernel at 9018ccf74 (draft_model_preprocess.cu:187-256) on
# swap_case's state as its proposer passes it (v1 scheduler, k = 3):
# slot 0: the op's batch_drop is the runner's is_block_step, true: the request
#   does not run (201) and stops (252-255): stopped, lengths 0, step kept;
# slot 1: base stopped in a block step: the op parks it (188-190) in its
#   is_block_step, the runner's batch_drop, and stops it;
# slot 2: runs, rolls back k - 1 = 2 (234-240; the recompute form's
#   recompute_token_num starts at 2): seq_lens_decoder 7, step_idx 4, and
#   feeds its 2 accepted tokens (249).
FASTDEPLOY_SWAP_RESULT = dict(stop_flags=[True, True, False], seq_lens_decoder=[0, 0, 7],
                              seq_lens_this_time=[0, 0, 2], step_idx=[5, 4, 4],
                              is_block_step=[True, False, False],
                              batch_drop=[False, True, False])


def test_the_replay_s_preprocess_gives_fastdeploy_s_result_with_the_swap():
    """Passed in the op's own order, slot 0 would run (seq_lens_decoder
    10 - 2 = 8, its flag cleared) and slot 1 would be parked in the runner's
    is_block_step: FastDeploy's call gives FASTDEPLOY_SWAP_RESULT instead."""
    assert swap_case("rollback") == FASTDEPLOY_SWAP_RESULT


def test_the_recompute_form_s_replay_gives_fastdeploy_s_result_with_the_swap():
    assert swap_case("recompute") == FASTDEPLOY_SWAP_RESULT


# ---------------------------------------------------------------------------
# The count of FastDeploy's writes outside a row


def count(p, recompute=None, max_dec_len=None):
    tally = sim_fastdeploy.OutsideWrites()
    form, inputs, attrs = sim_fastdeploy.preprocess_call(p, recompute, max_dec_len)
    sim_fastdeploy.count_preprocess_writes(form, inputs, attrs, tally, "here")
    return tally


def crafted_for_count(role):
    """5 slots, k = 3, 16 columns of input_ids and pre_ids. Slot 0: a prompt
    of 17 tokens (first token at column 16); slots 1-4 decode: base step 1
    with 3 accepted (window columns -2..0), base step 17 with 2 (15..16),
    base stopped (window -2..0), and the runner's is_block_step set (-2..0)."""
    p = proposer(role=role, batch=5)
    set_state(p, seq_lens_encoder=[17, 0, 0, 0, 0], is_block_step=[False] * 4 + [True],
              batch_drop=[False] * 5)
    set_base(p, stop_flags=[False, False, False, True, False], is_block_step=[False] * 5,
             accept_num=[1, 3, 2, 3, 3], step_idx=[1, 1, 17, 1, 1])
    return p


def test_the_outside_count_on_a_decode_state():
    """draft_model_preprocess.cu 9018ccf74: a prefill writes input_ids[E - 1]
    (212, truncate_first_token): column 16 of 16, 1 write; a running decode
    writes pre_ids[step - a + j] for j < a (242-248): slot 1 columns
    -2, -1, 0 (2 outside), slot 2 15, 16 (1 outside); slot 3 does not run
    (base stopped, 201), nor slot 4 (the op's batch_drop is the runner's
    is_block_step, set). 1 + 2 + 1 = 4."""
    t = count(crafted_for_count("decode"))
    assert (t.preprocess, t.draft_update, t.total) == (4, 0, 4)
    assert t.first == "here: slot 0: input_ids column 16 of 16"


def test_the_outside_count_on_a_prefill_node():
    """A prefill node's kernel (draft_model_preprocess.cu 9018ccf74:95-118)
    writes only a prefill's first token: slot 0's column 16, 1 write."""
    t = count(crafted_for_count("prefill"))
    assert (t.preprocess, t.total) == (1, 1)


@pytest.mark.parametrize("role,expected", [("decode", 3), ("prefill", 4)])
def test_the_outside_count_of_the_shadow_form(role, expected):
    """The shadow kernel (draft_model_preprocess.cu 7a6c28781): a request is
    skipped if the target stopped (83), or off a prefill node if
    step + k >= max_dec_len (88-89; 10 here); a prefill writes
    input_ids[E - 1] (112), a decode pre_ids[step - a + j] (127-131), on
    every node. Slot 0: column 16 of 16, 1;
    slot 1: -2, -1, 0, 2; slot 2 (step 17 + 3 >= 10): skipped on a decode
    node, else 15, 16, 1; slot 3: target stopped, 0. Decode node 3, prefill
    node 4."""
    p = proposer(role=role, batch=4)
    set_state(p, seq_lens_encoder=[17, 0, 0, 17])
    set_base(p, stop_flags=[False, False, False, True], accept_num=[1, 3, 2, 1],
             step_idx=[0, 1, 17, 0])
    t = count(p, max_dec_len=sim_fastdeploy.max_dec_lens(p, 10))
    assert (t.preprocess, t.total) == (expected, expected)


def test_the_outside_count_of_the_draft_update():
    """FastDeploy's draft_model_update writes pre_ids[i, step_idx] after a
    decode adds its tokens to step_idx (draft_model_update.cu 9018ccf74:62-67,
    modelled by sim_models.draft_substep_update): slot 0 (step -3 + 1 = -2) and slot 1
    (15 + 1 = 16 of 16 columns) outside, slot 2 (a prefill: column 1)
    inside. 2 writes."""
    p = proposer(batch=3)
    set_state(p, seq_lens_this_time=[1, 1, 4], seq_lens_encoder=[0, 0, 4],
              seq_lens_decoder=[5, 5, 0], step_idx=[-3, 15, 0], stop_flags=[False] * 3)
    t = sim_fastdeploy.OutsideWrites()
    sim_models.draft_substep_update(p, 0, np.random.default_rng(0), 0.0, 1000, None, t)
    assert (t.draft_update, t.total) == (2, 2)
    assert "pre_ids[0, -2]" in t.first


@pytest.mark.parametrize("kernel", ["ends", "shadow"])
def test_fastdeploys_draft_update_end_token(kernel):
    """A decode's draft samples the end token. Up to 2178f2829 FastDeploy's
    draft_model_update keeps it in draft_tokens[0] and the base model's
    column (draft_model_update.cu 9018ccf74:59-66) and stops the draft
    (83-86); at 7a6c28781 nothing stops it (56-85). Slot 1 is stopped
    already: -1 in both rows (9018ccf74:94-97, 7a6c28781:81-84)."""
    p = proposer(batch=2)
    set_state(p, seq_lens_this_time=[1, 0], seq_lens_encoder=[0, 0],
              seq_lens_decoder=[5, 5], step_idx=[3, 3], stop_flags=[False, True])
    sim_models.draft_substep_update(p, 0, np.random.default_rng(0), 0.0, 1000,
                                    {0: sim_models.EOS}, None, kernel)
    base = p.base["draft_tokens"].numpy()
    assert base[0, 1] == sim_models.EOS and base[1, 1] == -1
    draft = p.state["draft_tokens"].numpy()
    assert draft[0, 0] == sim_models.EOS and draft[1, 0] == -1
    stop = p.state["stop_flags"].numpy().reshape(-1)
    assert bool(stop[0]) == (kernel == "ends")
    assert p.state["seq_lens_this_time"].numpy().reshape(-1).tolist() == \
        ([0, 0] if kernel == "ends" else [1, 0])
    assert p.state["step_idx"].numpy().reshape(-1)[0] == 4


@pytest.mark.parametrize("kernel", ["ends", "shadow"])
@pytest.mark.parametrize("role", ["prefill", "mixed"])
def test_a_prefill_node_zeroes_a_stopped_requests_step_idx(kernel, role):
    """FastDeploy's proposer on a prefill node, after each draft update, sets a
    stopped request's step_idx to 0 (mtp.py _post_process, 9018ccf74 lines
    821-841; 7a6c28781 lines 833-859); elsewhere it keeps it. Slot 0 runs on,
    slot 1 was stopped before."""
    p = proposer(role=role, batch=2)
    set_state(p, seq_lens_this_time=[1, 0], seq_lens_encoder=[0, 0],
              seq_lens_decoder=[5, 5], step_idx=[3, 7], stop_flags=[False, True])
    sim_models.draft_substep_update(p, 0, np.random.default_rng(0), 0.0, 1000,
                                    {0: 40}, None, kernel)
    step = p.state["step_idx"].numpy().reshape(-1).tolist()
    assert step == ([4, 0] if role == "prefill" else [4, 7])


@pytest.mark.parametrize("kernel", ["ends", "shadow"])
def test_the_draft_update_says_whether_any_request_is_left(kernel):
    """draft_model_update's not_need_stop (9018ccf74 lines 109-111, 7a6c28781
    lines 97-99): true while a request is unstopped, false once none is."""
    p = proposer(batch=2)
    set_state(p, seq_lens_this_time=[1, 0], seq_lens_encoder=[0, 0],
              seq_lens_decoder=[5, 5], step_idx=[3, 3], stop_flags=[False, True],
              not_need_stop=[False])
    sim_models.draft_substep_update(p, 0, np.random.default_rng(0), 0.0, 1000,
                                    {0: 40}, None, kernel)
    assert bool(p.state["not_need_stop"].numpy().reshape(-1)[0])
    set_state(p, stop_flags=[True, True], not_need_stop=[True])
    sim_models.draft_substep_update(p, 1, np.random.default_rng(0), 0.0, 1000,
                                    {}, None, kernel)
    assert not bool(p.state["not_need_stop"].numpy().reshape(-1)[0])


def test_the_replay_runs_no_substep_once_every_draft_stopped():
    """FastDeploy's proposer runs a substep only while not_need_stop holds
    (mtp.py _propose_cuda, 9018ccf74 line 851): a step whose every draft
    samples the end token at its first substep runs that one substep."""
    from fastdeploy_mtp.harness import simulate
    from helpers import sim_args

    a = sim_args(runner="fastdeploy", form="pr5738", num_model_steps=3, batch=3,
                 draft_eos_prob=1.0, arrival_prob=1.0, seed=0)
    rng = np.random.default_rng(0)
    tally = simulate.Tally(outside=sim_fastdeploy.OutsideWrites())
    node = simulate.make_node("mixed", "mixed", 3, a, rng, False, tally.outside)
    simulate.admit_new(node, rng, a)
    simulate.engine_step(node, 0, rng, a, tally)
    assert tally.substeps == 1


def test_the_form_picks_fastdeploys_draft_update():
    assert sim_fastdeploy.draft_update_kernel("pr5738") == "ends"
    assert sim_fastdeploy.draft_update_kernel("shadow") == "shadow"
    assert sim_fastdeploy.draft_update_kernel("xpu") is None


# ---------------------------------------------------------------------------
# In the loop


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_a_mixed_node_under_fastdeploy_s_inserts_is_exact(k):
    """Its inserts never write mask_rollback (nor clear is_block_step): the
    ops' prefill rule leaves nothing of the slot's last request behind."""
    t = run(mode="mixed", num_model_steps=k, seed=1)
    assert t.model.tokens > 200 and t.rolled_back > 20
    assert t.violations == 0, t.first_violation
    assert t.model.disagreements == 0, t.model.first
    assert t.outside.total == 0, t.outside.first


def test_fastdeploy_s_decode_node_at_k_1_is_exact():
    """Nothing to roll back at k = 1: the first decode feeds the tokens after
    the first one from seq_lens_decoder = n, and the cursor n + 1 less the
    preset rollback 1 gives them mask ends n + 1, n + 2, ..."""
    t = run(mode="pd", num_model_steps=1, seed=1)
    assert t.model.tokens > 200 and t.rolled_back > 20
    assert t.violations == 0, t.first_violation
    assert t.model.disagreements == 0, t.model.first


@pytest.mark.parametrize("k", [2, 3, 4])
def test_fastdeploy_s_decode_node_presets_drift_for_k_above_one(k):
    """Its decode-node insert (seq_lens_decoder = prompt length, step_idx 1)
    is k-1 positions behind the base model after the first preprocess: the
    loop sees the draft misaligned and computing on the wrong context."""
    t = run(mode="pd", num_model_steps=k, seed=1)
    assert t.align_violations > 0, t.first_violation
    assert "seq_lens_decoder" in t.first_violation
    assert t.model.disagreements > 0


def test_fastdeploy_s_decode_node_at_k_4_writes_outside_pre_ids():
    """step_idx 1 - 3 = -2, then draft_model_update adds the tokens and writes
    pre_ids[i, step_idx] before column 0: the count sees it."""
    t = run(mode="pd", num_model_steps=4, seed=1)
    assert t.outside.draft_update > 0
    assert "pre_ids[" in t.outside.first and ", -" in t.outside.first, t.outside.first


def test_our_runner_counts_nothing_outside():
    t = simulate.run(sim_args(steps=30, batch=6, mode="pd", num_model_steps=4), legacy=False,
                     print_rows=False)
    assert t.outside is None and t.violations == 0


def test_the_command_line_prints_the_outside_count(capsys):
    a = sim_args(steps=12, batch=4, runner="fastdeploy", mode="pd", num_model_steps=4,
                 quiet=True)
    assert simulate_cli.main(a) == 1
    out = capsys.readouterr().out
    assert "FastDeploy's runner" in out.splitlines()[0]
    assert "FastDeploy's kernels on these states:" in out


@pytest.mark.parametrize("flag", [{"graphs": True}, {"without_fix": True}])
def test_the_fastdeploy_runner_refuses_graphs_and_the_old_behaviour(flag, capsys):
    a = sim_args(runner="fastdeploy", **flag)
    assert simulate_cli.main(a) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--runner fastdeploy" in err
