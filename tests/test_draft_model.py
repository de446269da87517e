"""A real attention model in the loop: every cached draft forward equals a
cache-free recomputation with the fix, mixed and PD-split, text and
multimodal; without the fix it does not; and the oracle is not vacuous."""

import numpy as np
import pytest

from fastdeploy_mtp.harness import simulate, simulate_cli
from fastdeploy_mtp.harness.draft_check import TOLERANCE
from fastdeploy_mtp.proposer import MTPProposer
from fastdeploy_mtp.harness.tiny_model import TinyConfig, TinyDecoder
from helpers import sim_args


def args(**kw):
    return sim_args(**{"steps": 14, "batch": 5, "draft_model": "tiny", **kw})


@pytest.mark.parametrize("mode", ["mixed", "pd"])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("image_prob", [0.0, 0.5])
def test_cached_draft_equals_cache_free_with_the_fix(mode, k, image_prob):
    t = simulate.run(args(mode=mode, num_model_steps=k, image_prob=image_prob, seed=k),
                     legacy=False, print_rows=False)
    assert t.model.tokens > 150, t.model.tokens
    assert t.model.disagreements == 0, t.model.first
    assert t.violations == 0, t.first_violation
    assert t.model.max_diff < TOLERANCE


@pytest.mark.parametrize("mode", ["mixed", "pd"])
@pytest.mark.parametrize("k", [2, 3])
def test_without_the_fix_the_draft_attends_through_a_wrong_mask(mode, k):
    t = simulate.run(args(mode=mode, num_model_steps=k, image_prob=0.5, seed=k), legacy=True,
                     print_rows=False)
    assert t.model.disagreements > 0


def test_image_prompts_are_drawn_and_checked():
    """--image-prob gives prompts bidirectional spans, and the offset check
    expects their ends (not KV position + 1) at those positions."""
    rng = np.random.default_rng(0)
    a = args(image_prob=1.0, max_prompt=24)
    spans = 0
    for _ in range(50):
        prompt, offsets = simulate.new_prompt(rng, a)
        assert len(prompt) == len(offsets)
        j = np.arange(len(offsets))
        assert (offsets >= j).all() and (offsets <= len(offsets) - 1).all()
        spans += int((offsets > j).any())
    assert spans > 20


@pytest.mark.parametrize("shift", [1, -1])
@pytest.mark.parametrize("token", ["first of several", "last"])
def test_the_oracle_catches_an_offset_wrong_by_one(monkeypatch, shift, token):
    """One decode token's mask end moved by one, once: the model check alone
    (not only the number-level invariant) sees it, whichever of a request's
    tokens this substep it is (an oracle that compared each request's last
    token only would miss the first of several)."""
    real = MTPProposer.update_attn_mask_offsets
    state = {"calls": 0, "done": False}
    least = 2 if token == "first of several" else 1

    def corrupted(self, ids, cu=None):
        out = real(self, ids, cu)
        state["calls"] += 1
        E = self.state["seq_lens_encoder"].numpy()
        n = self.state["seq_lens_this_time"].numpy()
        decoding = np.nonzero((E == 0) & (n >= least))[0]
        if not state["done"] and state["calls"] > 6 and decoding.size:
            import paddle

            arr = out.numpy()
            i = int(decoding[0])
            j = 0 if token == "first of several" else int(n[i]) - 1
            q = int(cu.numpy()[i]) + j
            arr[2 * q + 1] += shift
            state["done"] = True
            state["where"] = (i, int(self.state["seq_lens_decoder"].numpy()[i]) + j)
            return paddle.to_tensor(arr)
        return out

    monkeypatch.setattr(MTPProposer, "update_attn_mask_offsets", corrupted)
    t = simulate.run(args(mode="mixed", num_model_steps=3, seed=1), legacy=False,
                     print_rows=False)
    assert state["done"]
    assert t.model.disagreements >= 1, "the cache-free oracle missed a mask end off by one"
    # Caught at the very token whose end was moved, not only downstream of it.
    slot, position = state["where"]
    assert f"slot {slot} position {position}:" in t.model.first, t.model.first


def test_cached_forward_matches_full_forward_directly():
    """The two forwards of the model agree on a plain causal sequence, and a
    key range one too long (a stale position) is a different result."""
    m = TinyDecoder(TinyConfig(), 2, 32)
    rng = np.random.default_rng(3)
    toks = rng.integers(0, 1000, 10)
    off = np.zeros(20, np.int32)
    off[1::2] = np.arange(1, 11)
    cached = m.forward_cached(toks, [(1, 0, 10, 0)], off)
    full = m.forward_full(toks, np.arange(1, 11))
    assert np.abs(cached - full).max() < TOLERANCE
    # Decode one more token attending one stale key past itself.
    m.forward_cached(np.array([5, 6]), [(1, 0, 2, 10)], np.array([0, 11, 0, 12], np.int32))
    wrong = m.forward_cached(np.array([7]), [(1, 0, 1, 10)], np.array([0, 12], np.int32))
    right = m.forward_full(np.concatenate([toks, [7]]), np.arange(1, 12))
    assert np.abs(wrong[0] - right[10]).max() > 10 * TOLERANCE


def test_command_line_runs_and_exit_codes(capsys):
    base = dict(mode="pd", num_model_steps=3, image_prob=0.5, steps=10, quiet=True)
    assert simulate_cli.main(args(**base)) == 0
    out = capsys.readouterr().out
    assert "draft tokens checked against a cache-free recomputation, 0 disagreements" in out
    assert simulate_cli.main(args(**base, without_fix=True)) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "first disagreement" in out


def test_rows_gain_the_disagreements():
    rows = []
    simulate.run(args(num_model_steps=2, steps=5), legacy=True, print_rows=True, out=rows.append)
    header = rows[0].split()
    assert header[-2:] == ["checked", "disagree"]
    per_step = [int(r.split()[-1]) for r in rows[1:]]
    assert len(per_step) == 5 and sum(per_step) > 0


def test_plot_with_the_model(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "d.png"
    assert simulate_cli.main(args(num_model_steps=2, steps=6, quiet=True, plot=str(path))) == 0
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_a_position_the_draft_never_computed_is_a_disagreement():
    """A runner whose preset puts a request past its KV makes the draft attend
    positions it never wrote: every token fed then counts as wrong, and the
    first disagreement names the position."""
    from fastdeploy_mtp.harness.draft_check import DraftRunner, ModelTally

    r = DraftRunner(2, 16, 50, seed=0)
    r.admit(0, np.arange(3))
    tally = ModelTally()
    ids = np.array([7, 8], np.int64)
    offsets = np.array([0, 6, 0, 7], np.int32)  # ends of positions 5 and 6
    r.substep(ids, [(0, 0, 2, 5)], offsets, tally, "here")
    assert tally.tokens == 2 and tally.disagreements == 2
    assert "attend position 0, which the draft never computed" in tally.first


def test_the_model_s_attention_honours_a_window_start():
    """The op writes start 0 for every token today, so only a direct test sees
    a model that ignores a window's start: each query must attend exactly keys
    [start, end), as a numpy softmax over that window does, and keys before
    its start must not change what it computes."""
    from fastdeploy_mtp.harness.tiny_model import _attend, _cpu

    rng = np.random.default_rng(3)
    M, H, hd = 7, 2, 4
    q, k, v = (rng.standard_normal((M, H, hd)).astype(np.float32) for _ in range(3))
    starts = np.array([0, 1, 2, 2, 3, 5, 6])
    ends = np.array([1, 3, 3, 5, 6, 7, 7])
    # On the CPU, as the model runs (a GPU build's default place may have no kernels).
    got = _attend(*map(_cpu, (q, k, v)), starts, ends).numpy()
    for r in range(M):
        s, e = starts[r], ends[r]
        scores = np.einsum("hd,mhd->hm", q[r], k[s:e]) / np.sqrt(hd)
        w = np.exp(scores - scores.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(got[r], np.einsum("hm,mhd->hd", w, v[s:e]), rtol=1e-5,
                                   atol=1e-6, err_msg=f"query {r}")
    k2, v2 = k.copy(), v.copy()
    k2[:5] += 10.0  # every key before the last query's start of 6 ...
    v2[:5] -= 3.0
    again = _attend(*map(_cpu, (q, k2, v2)), starts, ends).numpy()
    np.testing.assert_allclose(again[5:], got[5:], rtol=1e-6)  # ... unseen by queries 5, 6
    assert not np.allclose(again[:5], got[:5])
