"""MTPProposer: each insert path, the refusals, and the name check."""

import types

import numpy as np
import pytest

from fastdeploy_mtp import ops, proposer as proposer_mod, registration
from fastdeploy_mtp.buffers import write as _write
from fastdeploy_mtp.proposer import (MTPProposer, ProposerConfig, ProposerError, Request,
                                     make_base_buffers)

N, L = 6, 64


def build(role="mixed", k=3, **kw):
    cfg = ProposerConfig(num_model_steps=k, max_model_len=L, max_num_seqs=N, role=role, **kw)
    return MTPProposer(cfg, make_base_buffers(N, k))


def snapshot(p):
    return {n: t.numpy().copy() for n, t in p.state.items()}


def test_mixed_insert_writes_the_spec_state():
    p = build("mixed", k=3)
    prompt = [11, 12, 13, 14, 15]
    p.insert([Request(slot=2, prompt=prompt)])
    s = snapshot(p)
    assert s["input_ids"][2, :4].tolist() == prompt[1:]
    assert s["seq_lens_encoder"][2] == 5 and s["seq_lens_decoder"][2] == 0
    assert s["step_idx"][2] == 0 and s["mask_rollback"][2] == 0
    assert s["attn_mask_offsets_full"][2, :5].tolist() == [0, 1, 2, 3, 4]
    assert s["attn_mask_offsets_decoder"][2] == 5
    assert not s["stop_flags"][2] and s["stop_flags"][[0, 1, 3, 4, 5]].all()


def test_mixed_insert_with_multimodal_offsets():
    p = build("mixed", k=2)
    # Position 0 is text, positions 1..2 an image span that attends itself whole.
    p.insert([Request(slot=0, prompt=[5, 6, 7], mask_offsets=[0, 2, 2])])
    s = snapshot(p)
    assert s["attn_mask_offsets_full"][0, :3].tolist() == [0, 2, 2]
    assert s["attn_mask_offsets_decoder"][0] == 3


@pytest.mark.parametrize("k", [1, 2, 4])
def test_decode_insert_presets_the_handed_over_state(k):
    p = build("decode", k=k)
    p.insert([Request(slot=1, prompt=list(range(3, 10)), first_token=77, draft_token=88)])
    s = snapshot(p)
    n = 7
    assert s["seq_lens_encoder"][1] == 0 and s["seq_lens_decoder"][1] == n + k - 1
    assert s["step_idx"][1] == 1 + (k - 1)
    assert s["draft_tokens"][1, 0] == 88 and s["pre_ids"][1, 0] == 77
    assert s["attn_mask_offsets_decoder"][1] == n + 1
    assert s["mask_rollback"][1] == 1 - (k - 1)
    assert not s["stop_flags"][1]


def test_prefill_node_runs_splitwise_with_one_step():
    p = build("prefill", k=4)
    p.insert([Request(slot=0, prompt=[3, 4, 5, 6])])
    base = p.base
    acc = base["accept_tokens"].numpy()
    acc[0, 0] = 99
    _write(base["accept_tokens"], acc)
    stop = base["stop_flags"].numpy()
    stop[0] = False
    _write(base["stop_flags"], stop)
    assert p.prepare_inputs() is True
    s = snapshot(p)
    # splitwise prefill, truncate_first_token: the first token at E-1, this_time = E
    assert s["input_ids"][0, 3] == 99 and s["seq_lens_this_time"][0] == 4
    assert s["stop_flags"][[1, 2, 3, 4, 5]].all()
    assert p.config.substeps == 1
    # splitwise mode leaves the base drafts alone (normal mode clears columns 1..)
    assert (base["draft_tokens"].numpy()[0, 1:] == -1).all()


def test_a_runner_flag_stands_for_the_proposer_s_own():
    """preprocess_arguments(not_need_stop=flag): the op writes `flag` (a
    runner's GPU flag, for a capture; here a CPU one) and leaves the
    proposer's host flag alone; the rest of the arguments are the proposer's."""
    import paddle

    p = build("mixed", k=3)
    p.insert([Request(slot=0, prompt=[3, 4, 5, 6])])
    stop = p.base["stop_flags"].numpy()
    stop[0] = False
    _write(p.base["stop_flags"], stop)
    flag = paddle.to_tensor(np.zeros(1, bool), place=paddle.CPUPlace())
    args = p.preprocess_arguments(flag)
    assert args["not_need_stop"] is flag and args["num_model_step"] == 3
    assert p.preprocess_arguments()["not_need_stop"] is p.state["not_need_stop"]
    ops.draft_model_preprocess(**args)
    assert flag.numpy()[0] and not p.state["not_need_stop"].numpy()[0]


def test_without_fix_the_rollback_update_is_undone_around_any_run():
    """preprocess_effects: what a replayed preprocess is wrapped in too. With
    without_fix the op's update of mask_rollback does not stay; with the fix it
    does."""
    from fastdeploy_mtp.harness.without_fix import ProposerWithoutFix

    for without_fix in (False, True):
        cfg = ProposerConfig(num_model_steps=3, max_model_len=L, max_num_seqs=N, role="decode")
        p = (ProposerWithoutFix if without_fix else MTPProposer)(cfg, make_base_buffers(N, 3))
        p.insert([Request(slot=1, prompt=list(range(3, 10)), first_token=77, draft_token=88)])
        stop = p.base["stop_flags"].numpy()
        stop[1] = False
        _write(p.base["stop_flags"], stop)
        before = p.state["mask_rollback"].numpy().copy()
        with p.preprocess_effects():
            ops.draft_model_preprocess(**p.preprocess_arguments())
            during = p.state["mask_rollback"].numpy().copy()
        after = p.state["mask_rollback"].numpy()
        assert not np.array_equal(during, before)  # the op moved it
        np.testing.assert_array_equal(after, before if without_fix else during)


def test_every_insert_writes_mask_rollback():
    p = build("mixed", k=3)
    mr = p.state["mask_rollback"].numpy()
    mr[:] = 7  # a finished request's residue
    _write(p.state["mask_rollback"], mr)
    p.insert([Request(slot=3, prompt=[4, 5, 6])])
    assert p.state["mask_rollback"].numpy()[3] == 0
    d = build("decode", k=3)
    _write(d.state["mask_rollback"], mr)
    d.insert([Request(slot=3, prompt=[4, 5, 6], first_token=1, draft_token=2)])
    assert d.state["mask_rollback"].numpy()[3] == -1


def test_buffers_stay_on_their_place_when_written():
    p = build("mixed", k=2)
    p.insert([Request(slot=0, prompt=[4, 5, 6])])
    assert all(t.place.is_cpu_place() for t in p.state.values())
    assert all(t.place.is_cpu_place() for t in p.base.values())


def test_release_clears_a_finished_slot():
    p = build("mixed", k=2)
    p.insert([Request(slot=4, prompt=[4, 5, 6])])
    p.release([4])
    s = snapshot(p)
    assert s["stop_flags"][4] and s["seq_lens_encoder"][4] == 0 and s["mask_rollback"][4] == 0
    with pytest.raises(ProposerError, match="slot 9"):
        p.release([9])


@pytest.mark.parametrize("role,req,match", [
    ("mixed", Request(slot=N, prompt=[1, 2]), "outside"),
    ("mixed", Request(slot=-1, prompt=[1, 2]), "outside"),
    ("mixed", Request(slot=0, prompt=[]), "prompt of 0 tokens"),
    ("mixed", Request(slot=0, prompt=list(range(L))), f"prompt of {L} tokens"),
    ("mixed", Request(slot=0, prompt=[1, 2], mask_offsets=[0]), "1 mask offsets"),
    ("mixed", Request(slot=0, prompt=[1, 2], first_token=5, draft_token=6), "decode node"),
    ("decode", Request(slot=0, prompt=[1, 2]), "first_token and draft_token"),
    ("decode", Request(slot=0, prompt=list(range(L - 2)), first_token=1, draft_token=2),
     "prompt of"),
])
def test_refusals_change_nothing(role, req, match):
    p = build(role, k=3)
    p.insert([Request(slot=1, prompt=[4, 5, 6], first_token=1 if role == "decode" else None,
                      draft_token=2 if role == "decode" else None)])
    before = snapshot(p)
    ok = Request(slot=2, prompt=[7, 8, 9], first_token=1 if role == "decode" else None,
                 draft_token=2 if role == "decode" else None)
    with pytest.raises(ProposerError, match=match):
        p.insert([ok, req])  # the valid request in the same batch is not inserted either
    after = snapshot(p)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)


def test_duplicate_slots_in_one_batch_are_refused():
    p = build()
    with pytest.raises(ProposerError, match="twice"):
        p.insert([Request(slot=1, prompt=[3, 4]), Request(slot=1, prompt=[5, 6])])


@pytest.mark.parametrize("kw,match", [
    (dict(num_model_steps=0), "num_model_steps"),
    (dict(role="both"), "role"),
    (dict(max_draft_tokens=1, num_model_steps=3), "max_draft_tokens"),
    (dict(max_num_seqs=0), "max_num_seqs"),
    (dict(max_model_len=1), "max_model_len"),
])
def test_bad_configuration(kw, match):
    args = dict(num_model_steps=2, max_model_len=L, max_num_seqs=N)
    args.update(kw)
    with pytest.raises(ProposerError, match=match):
        ProposerConfig(**args)


def test_bad_base_buffers():
    cfg = ProposerConfig(num_model_steps=2, max_model_len=L, max_num_seqs=N)
    base = make_base_buffers(N, 2)
    del base["accept_num"]
    with pytest.raises(ProposerError, match="accept_num"):
        MTPProposer(cfg, base)
    with pytest.raises(ProposerError, match="accept_tokens"):
        MTPProposer(cfg, make_base_buffers(N, 1))


def test_a_size_mismatch_is_one_short_line():
    """A runner sized for another max_num_seqs hears it once, with both
    numbers, not once per buffer."""
    cfg = ProposerConfig(num_model_steps=2, max_model_len=L, max_num_seqs=N)
    with pytest.raises(ProposerError) as info:
        MTPProposer(cfg, make_base_buffers(N + 1, 2))
    assert str(info.value) == f"MTPProposer: max_num_seqs is {N} but the base buffers have {N + 1} rows"


@pytest.mark.parametrize("names,said", [
    (["step_idx"], "base buffer step_idx has"),
    (["stop_flags", "accept_num", "step_idx"], "base buffers accept_num and 2 more have"),
])
def test_a_size_mismatch_of_some_buffers_names_them(names, said):
    cfg = ProposerConfig(num_model_steps=2, max_model_len=L, max_num_seqs=N)
    base = make_base_buffers(N, 2)
    bigger = make_base_buffers(N + 3, 2)
    for name in names:
        base[name] = bigger[name]
    with pytest.raises(ProposerError) as info:
        MTPProposer(cfg, base)
    assert str(info.value) == f"MTPProposer: max_num_seqs is {N} but {said} {N + 3} rows"


def test_drifted_registration_fails_when_the_proposer_is_built(monkeypatch):
    real = registration.read_registered

    def swapped(name):
        reg = real(name)
        names = list(reg.inputs)
        names[4], names[5] = names[5], names[4]
        reg.inputs = tuple(names)
        return reg

    monkeypatch.setattr(registration, "read_registered", swapped)
    with pytest.raises(ProposerError, match="does not match the signature table"):
        build()


def test_drifted_wrapper_fails_loudly(monkeypatch):
    p = build()

    def drifted(draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_decoder,
                seq_lens_encoder_renamed, **rest):
        raise AssertionError("must not be reached")

    monkeypatch.setattr(p, "form_ops", types.SimpleNamespace(draft_model_preprocess=drifted))
    with pytest.raises(TypeError):
        p.prepare_inputs()


def test_insert_cost_grows_with_buffers_not_requests(monkeypatch):
    writes = []
    real = proposer_mod.write
    monkeypatch.setattr(proposer_mod, "write", lambda t, a: (writes.append(1), real(t, a)))
    p = build(k=2)
    counts = []
    for n in (1, N):
        p.release(range(N))
        writes.clear()
        p.insert([Request(slot=i, prompt=[3, 4, 5]) for i in range(n)])
        counts.append(len(writes))
    assert counts[0] == counts[1] > 0


def _expected_slot(p, role, prompt, offsets, k, first=None, draft=None):
    """Every field of a freshly inserted slot, as docs/contract.md states it."""
    n, L = len(prompt), p.config.max_model_len
    D = p.config.draft_width + 1
    e = {
        "draft_tokens": np.full(D, -1), "pre_ids": np.full(L, -1), "input_ids": np.zeros(L),
        "attn_mask_offsets_full": np.concatenate([offsets, np.zeros(L - n)]),
        "decode_states": np.zeros(D), "stop_flags": False, "is_block_step": False,
        "batch_drop": False,
    }
    if role == "decode":
        e["draft_tokens"][0] = draft
        e["pre_ids"][0] = first
        e.update(seq_lens_encoder=0, seq_lens_decoder=n + k - 1, step_idx=k, seq_lens_this_time=1,
                 attn_mask_offsets_decoder=offsets[-1] + 2, mask_rollback=1 - (k - 1))
    else:
        e["input_ids"][: n - 1] = prompt[1:]
        e.update(seq_lens_encoder=n, seq_lens_decoder=0, step_idx=0, seq_lens_this_time=n,
                 attn_mask_offsets_decoder=offsets[-1] + 1, mask_rollback=0)
    return e


@pytest.mark.parametrize("role", ["mixed", "prefill", "decode"])
@pytest.mark.parametrize("k", [1, 3])
def test_insert_writes_every_field_of_the_slot_and_no_other(role, k):
    p = build(role, k=k)
    # Dirty every buffer first, as a finished request would leave them.
    for name, t in p.state.items():
        if name != "not_need_stop":
            arr = t.numpy()
            arr[...] = 7 if arr.dtype != bool else True
            _write(t, arr)
    before = snapshot(p)
    prompt, offsets = [5, 6, 7, 8, 9], np.array([0, 3, 3, 3, 4])
    kw = dict(first_token=11, draft_token=12) if role == "decode" else {}
    p.insert([Request(slot=2, prompt=prompt, mask_offsets=offsets.tolist(), **kw)])
    after = snapshot(p)
    want = _expected_slot(p, role, prompt, offsets, k, kw.get("first_token"), kw.get("draft_token"))
    for name in after:
        if name == "not_need_stop":
            continue
        assert name in want, f"the contract says nothing of {name} after an insert"
        np.testing.assert_array_equal(after[name][2], want[name], err_msg=name)
        others = [i for i in range(N) if i != 2]
        np.testing.assert_array_equal(after[name][others], before[name][others], err_msg=name)


def test_release_sets_what_the_contract_says_and_keeps_the_rest():
    p = build("mixed", k=3)
    p.insert([Request(slot=1, prompt=[4, 5, 6]), Request(slot=4, prompt=[7, 8])])
    mr = p.state["mask_rollback"].numpy()
    mr[:] = 5
    _write(p.state["mask_rollback"], mr)
    before = snapshot(p)
    p.release([4])
    after = snapshot(p)
    released = {"stop_flags": True, "seq_lens_this_time": 0, "seq_lens_encoder": 0,
                "seq_lens_decoder": 0, "mask_rollback": 0, "is_block_step": False}
    for name in after:
        if name in released:
            assert after[name][4] == released[name], name
            others = [i for i in range(N) if i != 4]
            np.testing.assert_array_equal(after[name][others], before[name][others], err_msg=name)
        else:
            np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    assert 4 not in p.occupied and 1 in p.occupied


# -- each role's longest prompt, at the limit and one past it ----------------------------

def _base_after_prefill(base, slot, n, token=99):
    """The base model's buffers after it prefilled slot's n-token prompt."""
    from fastdeploy_mtp.buffers import read

    b = {name: read(t) for name, t in base.items()}
    b["stop_flags"][slot] = False
    b["seq_lens_decoder"][slot] = n
    b["step_idx"][slot] = 1
    b["accept_num"][slot] = 1
    b["accept_tokens"][slot, 0] = token
    b["seq_lens_this_time"][slot] = n
    for name, arr in b.items():
        _write(base[name], arr)


def _base_after_first_verification(base, slot, n, accepted, token=98):
    """A decode node's base after its first verification of [first, draft]."""
    from fastdeploy_mtp.buffers import read

    b = {name: read(t) for name, t in base.items()}
    b["stop_flags"][slot] = False
    b["seq_lens_decoder"][slot] = n + accepted
    b["step_idx"][slot] = 1 + accepted
    b["accept_num"][slot] = accepted
    b["accept_tokens"][slot, :accepted] = [12, token] if accepted == 2 else [token]
    b["seq_lens_this_time"][slot] = accepted
    for name, arr in b.items():
        _write(base[name], arr)


@pytest.mark.parametrize("role,k,truncate", [("mixed", 1, False), ("mixed", 3, False),
                                             ("mixed", 3, True), ("prefill", 3, False),
                                             ("prefill", 2, True)])
def test_a_prompt_of_the_longest_length_runs_on_a_non_decode_node(role, k, truncate):
    """A mixed or prefill node takes prompts of up to max_model_len - 1 tokens
    (the first token then goes to the last column of input_ids, or the one
    before with truncate_first_token), and refuses one more."""
    cfg = ProposerConfig(num_model_steps=k, max_model_len=L, max_num_seqs=N, role=role,
                         truncate_first_token=truncate)
    base = make_base_buffers(N, k)
    p = MTPProposer(cfg, base)
    longest = L - 1
    assert cfg.max_prompt == longest
    with pytest.raises(ProposerError,
                       match=rf"^MTPProposer.insert: slot 1: prompt of {L} tokens, must be "
                             rf"1\.\.{longest}$"):
        p.insert([Request(slot=1, prompt=list(range(3, 3 + L)))])
    p.insert([Request(slot=0, prompt=list(range(3, 3 + longest)))])
    _base_after_prefill(base, 0, longest)
    assert p.prepare_inputs()
    s = snapshot(p)
    col = longest - 1 if truncate else longest
    assert s["input_ids"][0, col] == 99 and s["seq_lens_this_time"][0] == col + 1


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("accepted", [1, 2])
def test_a_prompt_of_the_longest_length_runs_on_a_decode_node(k, accepted):
    """A decode node keeps k positions past the prompt for the prefill node's
    draft KV (max_model_len - k tokens at most), and its first preprocess
    rolls them back to the base model's positions less what it accepted."""
    cfg = ProposerConfig(num_model_steps=k, max_model_len=L, max_num_seqs=N, role="decode")
    base = make_base_buffers(N, k)
    p = MTPProposer(cfg, base)
    longest = L - k
    assert cfg.max_prompt == longest
    handover = dict(first_token=11, draft_token=12)
    with pytest.raises(ProposerError,
                       match=rf"^MTPProposer.insert: slot 1: prompt of {longest + 1} tokens, "
                             rf"must be 1\.\.{longest}$"):
        p.insert([Request(slot=1, prompt=list(range(3, 4 + longest)), **handover)])
    p.insert([Request(slot=0, prompt=list(range(3, 3 + longest)), **handover)])
    assert snapshot(p)["seq_lens_decoder"][0] == longest + k - 1 <= L - 1
    _base_after_first_verification(base, 0, longest, accepted)
    assert p.prepare_inputs()
    s = snapshot(p)
    assert s["seq_lens_decoder"][0] == longest  # base's n + accepted, less accepted
    assert s["seq_lens_this_time"][0] == accepted


# -- transitions from other starting states ---------------------------------------------

def test_release_of_a_parked_slot_unparks_and_empties_it():
    """A request parked by a block step (is_block_step set, a rollback
    pending) that the runner preempts: release leaves the slot as from any
    other state, and the next insert there starts clean."""
    p = build("mixed", k=3)
    p.insert([Request(slot=3, prompt=[4, 5, 6, 7])])
    s = snapshot(p)
    s["is_block_step"][3], s["stop_flags"][3], s["mask_rollback"][3] = True, True, -2
    s["seq_lens_decoder"][3] = 9
    for name in ("is_block_step", "stop_flags", "mask_rollback", "seq_lens_decoder"):
        _write(p.state[name], s[name])
    p.release([3])
    after = snapshot(p)
    assert (after["is_block_step"][3], after["stop_flags"][3], after["mask_rollback"][3],
            after["seq_lens_decoder"][3], after["seq_lens_encoder"][3]) == (False, True, 0, 0, 0)
    assert 3 not in p.occupied
    p.insert([Request(slot=3, prompt=[8, 9])])
    again = snapshot(p)
    assert not again["is_block_step"][3] and not again["stop_flags"][3]
    assert again["mask_rollback"][3] == 0 and again["seq_lens_encoder"][3] == 2


@pytest.mark.parametrize("role", ["mixed", "prefill"])
@pytest.mark.parametrize("given", [dict(first_token=5), dict(draft_token=6),
                                   dict(first_token=5, draft_token=6)])
def test_a_non_decode_node_refuses_any_handover_token(role, given):
    p = build(role, k=2)
    before = snapshot(p)
    with pytest.raises(ProposerError, match="decode node"):
        p.insert([Request(slot=0, prompt=[3, 4], **given)])
    after = snapshot(p)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)


@pytest.mark.parametrize("given", [dict(first_token=5), dict(draft_token=6)])
def test_a_decode_node_refuses_half_a_handover(given):
    p = build("decode", k=2)
    before = snapshot(p)
    with pytest.raises(ProposerError, match="first_token and draft_token"):
        p.insert([Request(slot=0, prompt=[3, 4], **given)])
    after = snapshot(p)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)


@pytest.mark.parametrize("v1", [True, False])
def test_a_block_step_parks_with_the_v1_scheduler_and_drops_without(v1):
    """The proposer hands kvcache_scheduler_v1 to the op: a request the base
    model stops in a block step is parked (resumed later) with it, dropped
    without, and neither runs this step."""
    from fastdeploy_mtp.buffers import read

    base = make_base_buffers(N, 3)
    p = MTPProposer(ProposerConfig(num_model_steps=3, max_model_len=L, max_num_seqs=N,
                                   kvcache_scheduler_v1=v1), base)
    p.insert([Request(slot=2, prompt=[4, 5, 6])])
    b = {name: read(t) for name, t in base.items()}
    b["stop_flags"][2], b["is_block_step"][2] = True, True
    for name, arr in b.items():
        _write(base[name], arr)
    assert not p.prepare_inputs()
    s = snapshot(p)
    assert s["stop_flags"][2] and s["seq_lens_this_time"][2] == 0
    assert (bool(s["is_block_step"][2]), bool(s["batch_drop"][2])) == (v1, not v1)
