"""The replay of FastDeploy's chunked prefill and prefix-cache starts
(``simulate --runner fastdeploy --chunk N --prefix-cache P``): the insert of
a chunk, the scheduler's chunk ends and prefix-cache starts, the base model
over a chunk, the draft's input at a chunk's last position, and the oracle
that holds a prompt position to the request's own token; each against values
worked out by hand from FastDeploy's code (paths in its tree, at the commit
named); then the loop, its disagreements counted from those rules."""

import numpy as np
import pytest

from fastdeploy_mtp.buffers import SLOT_FIELDS, read, write
from fastdeploy_mtp.harness import draft_check, sim_fastdeploy, sim_models, simulate, simulate_cli
from fastdeploy_mtp.proposer import MTPProposer, ProposerConfig, make_base_buffers
from fastdeploy_mtp.slots import Request
from helpers import sim_args

# A 6-token prompt whose tokens 2..3 are an image span (mask offsets 3, 3).
PROMPT = [5, 6, 7, 8, 9, 10]
OFFSETS = [0, 1, 3, 3, 4, 5]


def proposer(role="mixed", k=3, batch=2, max_model_len=16):
    base = make_base_buffers(batch, k)
    return MTPProposer(ProposerConfig(num_model_steps=k, max_model_len=max_model_len,
                                      max_num_seqs=batch, role=role), base)


def set_all(p, value):
    for n in SLOT_FIELDS:
        a = read(p.state[n])
        write(p.state[n], np.full_like(a, value))


def insert_chunk(span, form="rollback", role="mixed"):
    """Slot 1 after FastDeploy's insert of PROMPT's chunk `span`, every
    buffer 9 before it (stop_flags True)."""
    p = proposer(role)
    set_all(p, 9)
    req = Request(slot=1, prompt=PROMPT, mask_offsets=OFFSETS)
    sim_fastdeploy.insert(p, [req], None, form, {1: span})
    return p, {n: read(p.state[n])[1] for n in SLOT_FIELDS}


@pytest.mark.parametrize("form", ["rollback", "pr5738", "shadow"])
def test_the_insert_of_a_chunk_before_the_last(form):
    """insert_tasks_v1 (mtp.py 9018ccf74:527-566) of the task [2, 4) of the
    6-token prompt (resource_manager_v1.py:215-217): length 2;
    input_ids[:1] = the base row from column 1 (536-538), the base row being
    the chunk's tokens [7, 8] (gpu_model_runner.py:701-703): [8];
    seq_lens_encoder = seq_lens_this_time = 2, seq_lens_decoder = the start 2
    (551-553); step_idx 0, since 4 < 6 tokens (554-556);
    attn_mask_offsets_full[:2] = offsets[2:4] = [3, 3] (559-563); the cursor
    offsets[4 - 1] + 1 = 4 (564-566; none in the shadow runner,
    c29e86fc9:518-521)."""
    _, row = insert_chunk((2, 4), form)
    assert row["input_ids"][:2].tolist() == [8, 9]
    assert (row["seq_lens_encoder"], row["seq_lens_this_time"], row["seq_lens_decoder"]) == (2, 2, 2)
    assert row["step_idx"] == 0
    assert row["attn_mask_offsets_full"][:3].tolist() == [3, 3, 9]
    assert row["attn_mask_offsets_decoder"] == (9 if form == "shadow" else 4)
    assert (row["stop_flags"], row["batch_drop"]) == (False, False)
    assert (row["pre_ids"] == -1).all()


def test_the_insert_of_the_last_chunk():
    """The task [4, 6): input_ids[:1] = [10], seq_lens_decoder 4,
    seq_lens_encoder 2, step_idx = len(output_token_ids) = 0 for a new prompt
    (6 >= 6), mask offsets [4, 5], the cursor 5 + 1 = 6."""
    _, row = insert_chunk((4, 6))
    assert row["input_ids"][:2].tolist() == [10, 9]
    assert (row["seq_lens_encoder"], row["seq_lens_decoder"], row["step_idx"]) == (2, 4, 0)
    assert row["attn_mask_offsets_full"][:3].tolist() == [4, 5, 9]
    assert row["attn_mask_offsets_decoder"] == 6


def test_a_decode_node_takes_no_chunk():
    with pytest.raises(ValueError, match="first token alone"):
        insert_chunk((0, 4), role="decode")


@pytest.mark.parametrize("start, chunk, want", [
    (0, 2, 4),   # token 2 opens the span [2, 4): the chunk takes it whole
    (0, 3, 4),   # token 3 lies inside it
    (0, 4, 4),   # token 4 is text: the chunk ends there
    (4, 4, 6),   # the prompt's end
    (1, 1, 4),   # the budget ends at 2, which opens the span
])
def test_a_chunk_ends_at_an_image_span_s_end(start, chunk, want):
    """resource_manager_v1.py 9018ccf74:360-361: start + budget, at most the
    prompt; :403-417: where the first token left out is in an image span,
    the chunk runs to that span's end."""
    assert sim_fastdeploy.chunk_end(np.array(OFFSETS), start, 6, chunk) == want


def test_prefill_spans_cover_the_prompt_from_its_start():
    o = np.array(OFFSETS)
    assert sim_fastdeploy.prefill_spans(6, 0, 3, o) == [(0, 4), (4, 6)]
    assert sim_fastdeploy.prefill_spans(6, 2, 1, o) == [(2, 4), (4, 5), (5, 6)]
    assert sim_fastdeploy.prefill_spans(6, 4, 0, o) == [(4, 6)]


class Draws:
    """An rng whose draws are given: random() then integers()."""

    def __init__(self, u, blocks):
        self.u, self.blocks = u, blocks

    def random(self):
        return self.u

    def integers(self, low, high):
        assert low <= self.blocks < high
        return self.blocks


@pytest.mark.parametrize("offsets, u, blocks, want", [
    (list(range(10)), 0.1, 2, 8),          # two 4-token blocks
    (list(range(8)), 0.1, 2, 4),           # the whole prompt: one block less
    (list(range(10)), 0.9, 2, 0),          # no hit (u >= P)
    ([0, 1, 2, 5, 5, 5, 6, 7, 8, 9], 0.1, 1, 3),  # 4 splits the span [3, 6): back to 3
    (list(range(3)), 0.1, 0, 0),           # shorter than a block
])
def test_a_prefix_cache_start(offsets, u, blocks, want):
    """resource_manager_v1.py 9018ccf74:944-948: the cached tokens computed,
    a block less where they are the whole prompt; prefix_cache_manager.py
    :1524-1545 with disable_chunked_mm_input: a hit inside an image span
    ends at its start."""
    rng = Draws(u, blocks)
    assert sim_fastdeploy.prefix_cache_start(rng, np.array(offsets), 0.5) == want


# Prompts of explicit image spans [a, b) (each token of one has the offset
# b - 1, simulate.new_prompt's), to walk a hit and a chunk's end over every
# position of each span: its first token, its middle, its last, one past it.
SPAN_PROMPTS = {
    "a span in the middle": (12, [(3, 7)]),
    "a span first": (10, [(0, 4)]),
    "a span last": (10, [(6, 10)]),
    "two spans side by side": (12, [(2, 5), (5, 9)]),
    "a span of two tokens": (8, [(3, 5)]),
}


def span_offsets(n, spans):
    o = np.arange(n)
    for a, b in spans:
        o[a:b] = b - 1
    return o


def span_around(spans, p):
    """The span [a, b) with a < p < b (p cuts it), or None."""
    return next(((a, b) for a, b in spans if a < p < b), None)


def positions_about(spans, n):
    """Each span's first, middle and last token and one past it, and one before it."""
    at = set()
    for a, b in spans:
        at |= {a - 1, a, (a + b) // 2, b - 1, b}
    return sorted(p for p in at if 0 <= p <= n)


@pytest.mark.parametrize("prompt", sorted(SPAN_PROMPTS))
def test_a_prefix_cache_hit_at_every_position_of_an_image_span(prompt):
    """A hit of m tokens (blocks of one token, so that every m is a hit)
    keeps [0, m) cached unless m cuts a span, where it ends at that span's
    start (prefix_cache_manager.py 9018ccf74:1524-1545); a hit of the whole
    prompt is one block less first (resource_manager_v1.py :944-945)."""
    n, spans = SPAN_PROMPTS[prompt]
    o = span_offsets(n, spans)
    for m in positions_about(spans, n):
        if m == 0:
            continue  # no hit draws no block
        want = m - 1 if m == n else m
        cut = span_around(spans, want)
        want = cut[0] if cut else want
        got = sim_fastdeploy.prefix_cache_start(Draws(0.1, m), o, 0.5, block=1)
        assert got == want, f"{prompt}: a hit of {m} tokens starts the prefill at {got}, not {want}"


@pytest.mark.parametrize("prompt", sorted(SPAN_PROMPTS))
def test_a_chunk_end_at_every_position_of_an_image_span(prompt):
    """The chunk from `start` with a budget that ends at e: where token e
    (the first left out) lies in a span [a, b), the chunk runs to b
    (resource_manager_v1.py 9018ccf74:403-417); else it ends at e."""
    n, spans = SPAN_PROMPTS[prompt]
    o = span_offsets(n, spans)
    for e in positions_about(spans, n):
        inside = next((b for a, b in spans if a <= e < b), None) if e < n else None
        for start in range(e):
            want = inside or e
            got = sim_fastdeploy.chunk_end(o, start, n, e - start)
            assert got == want, f"{prompt}: a chunk from {start} budgeted to {e} ends at {got}"
        if e < n:
            assert sim_fastdeploy.image_span_end(o, e) == (inside or 0), f"{prompt}: {e}"


def test_no_prefix_cache_draws_nothing():
    class NoDraws:
        def random(self):
            raise AssertionError("drew")

    assert sim_fastdeploy.prefix_cache_start(NoDraws(), np.arange(8), 0.0) == 0


def test_the_base_model_over_a_chunk():
    """A chunk before the last: its verify samples a token (accept_num 1,
    step_idx 0 + 1; speculate_verify.cu 9018ccf74:267-297), its update sets
    seq_lens_decoder to start + length = the chunk's end and
    seq_lens_encoder 0 (speculate_update.cu:67-70), and the token is not
    output (speculate_save_output.cc:106). The last chunk gives the first
    token: step_idx 1, seq_lens_decoder 6, the request decoding."""
    buffers = make_base_buffers(2, 3)
    base = sim_models.ScriptedBase(buffers, 3, 40, 0.0, 0.0, np.random.default_rng(0))
    base.admit(1, PROMPT, mask_offsets=OFFSETS, span=(0, 4))
    base.run()
    a, s = base.a, base.slots[1]
    got = (a["seq_lens_decoder"][1], a["seq_lens_encoder"][1], a["step_idx"][1],
           a["accept_num"][1], a["seq_lens_this_time"][1])
    assert got == (4, 0, 1, 1, 4)
    assert s.new and s.generated == []
    base.prefill_chunk(1, (4, 6))
    c = base.run()
    got = (a["seq_lens_decoder"][1], a["step_idx"][1], a["seq_lens_this_time"][1])
    assert got == (6, 1, 2)
    assert not s.new and s.generated == [int(a["accept_tokens"][1, 0])] and c["new"] == 1


@pytest.mark.parametrize("form", ["rollback", "pr5738", "shadow"])
def test_the_draft_s_last_chunk_position_gets_the_base_model_s_sample(form):
    """After the chunk [0, 4) the draft's preprocess sees seq_lens_encoder 4
    and the base model running, and puts accept_tokens[0] (here 99, the
    sample the runner does not output) at input_ids[4 - 1]
    (draft_model_preprocess.cu 9018ccf74:204-213; c29e86fc9:107-113 for the
    shadow form): the draft computes position 3 on 99, not on the prompt's
    next token 9."""
    p, _ = insert_chunk((0, 4), form)
    write(p.state["is_block_step"], np.zeros(2, bool))  # no block step (the insert keeps it)
    b = {n: read(p.base[n]) for n in p.base}
    b["stop_flags"][:] = False
    b["is_block_step"][:] = False
    b["accept_tokens"][1, 0] = 99
    b["accept_num"][1] = 1
    b["step_idx"][1] = 1
    b["seq_lens_decoder"][1] = 4
    b["seq_lens_encoder"][1] = 0
    for n, v in b.items():
        write(p.base[n], v)
    recompute = sim_fastdeploy.recompute_counts(p) if form == "pr5738" else None
    limit = sim_fastdeploy.max_dec_lens(p, 40) if form == "shadow" else None
    sim_fastdeploy.prepare_inputs(p, sim_fastdeploy.OutsideWrites(), "t", recompute, limit, form)
    row = read(p.state["input_ids"])[1]
    assert row[:4].tolist() == [6, 7, 8, 99]
    assert read(p.state["seq_lens_this_time"])[1] == 4


def oracle_case(held_token):
    """A DraftRunner over a 4-token prompt [5, 6, 7, 8]: positions 0..2 fed
    with the draft's inputs [6, `held_token`, 8] (position 1's true input is
    7), then position 3 with the first token 11. Returns the tally."""
    r = draft_check.DraftRunner(1, 8, 1000, seed=0)
    r.admit(0, np.arange(4), prompt=[5, 6, 7, 8])
    t = draft_check.ModelTally()
    ids = np.array([6, held_token, 8])
    offs = np.zeros(6, np.int32)
    offs[1::2] = [1, 2, 3]
    r.substep(ids, [(0, 0, 3, 0)], offs, t, "prefill")
    r.substep(np.array([11]), [(0, 0, 1, 3)], np.array([0, 4], np.int32), t, "decode")
    return t


def test_the_oracle_holds_a_prompt_position_to_the_request_s_token():
    assert oracle_case(7).disagreements == 0
    t = oracle_case(500)
    # Positions 1 and 2 (prefill) and 3 (decode) attend position 1.
    assert t.disagreements == 3, t.first
    assert "position 1 on token 500, the request's is 7" in t.first


def test_the_oracle_without_the_prompt_takes_what_the_draft_holds():
    r = draft_check.DraftRunner(1, 8, 1000, seed=0)
    r.admit(0, np.arange(4))
    t = draft_check.ModelTally()
    offs = np.zeros(6, np.int32)
    offs[1::2] = [1, 2, 3]
    r.substep(np.array([6, 500, 8]), [(0, 0, 3, 0)], offs, t, "prefill")
    assert t.disagreements == 0


# ---------------------------------------------------------------------------
# The loop


def run(**kw):
    a = sim_args(**{"steps": 30, "batch": 6, "runner": "fastdeploy", "draft_model": "tiny",
                    "num_model_steps": 2, **kw})
    return simulate.run(a, legacy=False, print_rows=False)


def summary(t):
    return (t.tokens, t.violations, t.substeps, t.rolled_back, t.model.tokens,
            t.model.disagreements, t.outside.total)


def test_a_chunk_as_long_as_any_prompt_changes_nothing():
    """--chunk 24 with prompts of at most 24 tokens: one span each, the
    prompt whole, and no draw of the workload's: the run is the run
    without --chunk."""
    assert summary(run(chunk=24, image_prob=0.5)) == summary(run(image_prob=0.5))


def test_prefix_cache_starts_keep_the_rollback_form_exact():
    """A start s > 0 gives the draft seq_lens_decoder = s over the cached
    K/V of 0..s-1 (taken as right), the rest of the prompt prefilled whole:
    nothing the draft computes differs from a cache-free model."""
    t = run(prefix_cache=0.7, image_prob=0.5, seed=3)
    assert t.violations == 0, t.first_violation
    assert t.model.disagreements == 0, t.model.first
    assert t.outside.total == 0


def test_chunks_make_the_draft_disagree_exactly_where_the_rules_say(monkeypatch):
    """The rollback form on a mixed node, prompts in chunks of 5: no mask
    offset drifts (each chunk's cursor and mask are the prompt's) and no
    write lands outside, but each prompt cut into chunks has its first
    chunk's last position computed on the base model's sample, so exactly
    the query tokens whose true mask end passes that position disagree (the
    scripted base samples 3..999 at random: a sample equal to the prompt's
    token would spare one; none does at this seed)."""
    first_end = {}
    want = [0]
    runners = {}
    insert = sim_fastdeploy.insert

    def recording_insert(p, reqs, recompute=None, form="rollback", spans=None, pending=None):
        for r in reqs:
            s, e = (spans or {})[r.slot]
            if s == 0:  # a new request
                first_end.pop((id(p), r.slot), None)
                if e < len(r.prompt):
                    first_end[(id(p), r.slot)] = e
        insert(p, reqs, recompute, form, spans, pending)

    substep = draft_check.DraftRunner.substep

    def counting_substep(self, ids, fed, offsets, tally, where, unchecked=frozenset()):
        p = runners[id(self)]
        for slot, q, n, start in fed:
            e = first_end.get((p, slot))
            if slot in unchecked:  # run ahead of a chunk: not checked
                continue
            if e is not None:
                ends = draft_check.true_ends(self.prompt_offsets[slot], start + np.arange(n))
                want[0] += int((ends >= e).sum())
        return substep(self, ids, fed, offsets, tally, where, unchecked)

    make_node = simulate.make_node

    def recording_make_node(*a, **kw):
        node = make_node(*a, **kw)
        runners[id(node.runner)] = id(node.proposer)
        return node

    monkeypatch.setattr(sim_fastdeploy, "insert", recording_insert)
    monkeypatch.setattr(draft_check.DraftRunner, "substep", counting_substep)
    monkeypatch.setattr(simulate, "make_node", recording_make_node)
    t = run(chunk=5, image_prob=0.5)
    assert t.violations == 0, t.first_violation
    assert t.outside.total == 0
    assert len(first_end) > 0 and want[0] > 100
    assert t.model.disagreements == want[0], t.model.first
    assert "the draft computed position" in t.model.first


@pytest.mark.parametrize("flags", [{"chunk": 8}, {"prefix_cache": 0.5}])
def test_our_runner_refuses_chunks_and_prefix_starts(flags, capsys):
    assert simulate_cli.main(sim_args(**flags)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--runner fastdeploy" in err and "our proposer" in err


@pytest.mark.parametrize("flags, said", [({"chunk": -1}, "--chunk must be within"),
                                         ({"chunk": 8193}, "--chunk must be within"),
                                         ({"prefix_cache": 1.5}, "--prefix-cache must be within")])
def test_the_command_line_refuses_bad_values(flags, said, capsys):
    assert simulate_cli.main(sim_args(runner="fastdeploy", **flags)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err


def test_a_prefill_node_hands_a_chunked_request_over_after_its_last_chunk(monkeypatch):
    """At k = 1 FastDeploy's PD replay is exact without chunks
    (test_sim_fastdeploy); with chunks of 5 the prefill node hands each
    request over once its last chunk ran (speculate_schedule_cache.cu
    9018ccf74:51-59): each handover's prompt ends where its slot's last
    inserted chunk ended, no mask offset or alignment drifts, and the only
    disagreements are queries attending a chunk's last position, which the
    oracle names."""
    last_end, handed = {}, []
    insert = sim_fastdeploy.insert

    def recording_insert(p, reqs, recompute=None, form="rollback", spans=None, pending=None):
        if p.config.role == "prefill":
            for r in reqs:
                last_end[r.slot] = spans[r.slot][1]
        insert(p, reqs, recompute, form, spans, pending)

    export = draft_check.DraftRunner.export_prompt

    def recording_export(self, slot, n):
        handed.append((last_end[slot], n))
        return export(self, slot, n)

    monkeypatch.setattr(sim_fastdeploy, "insert", recording_insert)
    monkeypatch.setattr(draft_check.DraftRunner, "export_prompt", recording_export)
    t = run(mode="pd", num_model_steps=1, chunk=5, seed=1)
    assert len(handed) > 10 and any(n > 5 for _, n in handed)
    assert all(end == n for end, n in handed), handed
    assert t.violations == 0, t.first_violation
    assert t.outside.total == 0
    assert t.model.disagreements > 0
    assert "the draft computed position" in t.model.first


def test_the_judge_checks_a_chunk_s_own_prefill():
    """A prompt longer than the chunk: its first chunk's 8 prefill tokens are
    the first substep's, and the judge checks each one's mask offsets (only
    the draft's run-ahead after a chunk that is not the prompt's last goes
    unchecked)."""
    from fastdeploy_mtp.harness import simulate
    from helpers import sim_args

    a = sim_args(runner="fastdeploy", form="pr5738", num_model_steps=1, batch=1, steps=1,
                 chunk=8, arrival_prob=1.0, max_prompt=40, seed=0, image_prob=0.0)
    rng = np.random.default_rng(a.seed)
    tally = simulate.Tally(outside=sim_fastdeploy.OutsideWrites())
    node = simulate.make_node("mixed", "mixed", 1, a, rng, False, tally.outside)
    simulate.insert_next_chunks(node)
    simulate.admit_new(node, rng, a)
    assert list(node.chunks) == [0]  # the prompt is longer than its first chunk
    simulate.engine_step(node, 0, rng, a, tally)
    assert tally.tokens == 8 and tally.violations == 0
