"""The closed-loop simulator: right with the fix, caught without it."""

import numpy as np
import pytest

from fastdeploy_mtp.harness import simulate, simulate_cli
from fastdeploy_mtp.harness.draft_check import ModelTally
from fastdeploy_mtp.harness.sim_fastdeploy import OutsideWrites
from helpers import sim_args


def args(**kw):
    return sim_args(**{"steps": 40, "batch": 6, **kw})


@pytest.mark.parametrize("mode", ["mixed", "pd"])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("seed", [0, 1])
def test_mask_offsets_stay_right(mode, k, seed):
    t = simulate.run(args(mode=mode, num_model_steps=k, seed=seed), legacy=False, print_rows=False)
    assert t.tokens > 200 and t.substeps >= 40 * (1 if k == 1 and mode == "mixed" else 2)
    assert t.rolled_back > 40, t.rolled_back  # decode steps, each after a rollback
    assert t.violations == 0, t.first_violation


@pytest.mark.parametrize("mode", ["mixed", "pd"])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_old_behaviour_drifts_for_k_above_one(mode, k):
    t = simulate.run(args(mode=mode, num_model_steps=k, seed=3), legacy=True, print_rows=False)
    if k == 1:
        assert t.violations == 0, t.first_violation
    else:
        assert t.mask_violations > 0


@pytest.mark.parametrize("k", [2, 3])
def test_a_decode_node_presetting_one_is_caught(monkeypatch, k):
    """The op right, only the proposer's preset old: still caught."""
    monkeypatch.setattr(simulate.MTPProposer, "decode_mask_rollback", lambda self: 1)
    t = simulate.run(args(mode="pd", num_model_steps=k, seed=4), legacy=False, print_rows=False)
    assert t.mask_violations > 0


def test_the_simulator_exercises_every_path():
    t_args = args(mode="mixed", num_model_steps=3, steps=80, seed=5)
    rows = []
    simulate.run(t_args, legacy=False, print_rows=True, out=rows.append)
    table = [list(map(int, r.split())) for r in rows[1:]]
    cols = rows[0].split()
    total = {c: sum(r[i] for r in table) for i, c in enumerate(cols) if c not in ("max", "err")}
    for c in ("new", "verif", "block", "fin", "dstop"):
        assert total[c] > 0, c


def test_main_exit_codes_and_summary(capsys):
    assert simulate_cli.main(args(num_model_steps=3, steps=15, quiet=True)) == 0
    out = capsys.readouterr().out
    assert "0 violations" in out and "OK" in out
    assert simulate_cli.main(args(num_model_steps=3, steps=15, quiet=True, without_fix=True)) == 1
    assert "FAILED" in capsys.readouterr().out
    assert simulate_cli.main(args(num_model_steps=1, steps=15, quiet=True, without_fix=True)) == 0
    assert "without the fix the mask is right as well" in capsys.readouterr().out
    assert simulate_cli.main(args(num_model_steps=0)) == 2


def test_without_the_fix_a_run_with_no_decode_step_says_why_nothing_drifted(capsys):
    """--max-dec-len 2: every request ends right after its prefill step, so
    the run without the fix has nothing to get wrong; the run says so instead
    of a bare OK that reads as "without the fix is fine"."""
    hint = "no request reached a decode step"
    a = dict(num_model_steps=3, steps=15, quiet=True, max_dec_len=2)
    assert simulate_cli.main(args(**a, without_fix=True)) == 0
    assert hint in capsys.readouterr().out
    assert simulate_cli.main(args(**a)) == 0  # with the fix there is nothing to explain
    assert hint not in capsys.readouterr().out
    assert simulate_cli.main(args(**{**a, "max_dec_len": 40}, without_fix=True)) == 1
    assert hint not in capsys.readouterr().out


@pytest.mark.parametrize("cuda,gpus,said", [(False, 0, "needs a CUDA build of Paddle"),
                                             (True, 0, "needs a GPU, and")])
def test_device_gpu_without_one_is_refused_before_the_run(monkeypatch, capsys, cuda, gpus, said):
    import paddle

    monkeypatch.setattr(paddle, "is_compiled_with_cuda", lambda: cuda)
    monkeypatch.setattr(paddle.device.cuda, "device_count", lambda: gpus)
    assert simulate_cli.main(args(device="gpu", steps=3)) == 2
    captured = capsys.readouterr()
    assert f"simulate: --device gpu {said}" in captured.err
    assert "summary" not in captured.out


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "err.png"
    assert simulate_cli.main(args(num_model_steps=2, steps=12, quiet=True, plot=str(path))) == 0
    assert path.stat().st_size > 1000
    assert path.read_bytes()[:4] == b"\x89PNG"



@pytest.mark.parametrize("mode", ["mixed", "pd"])
def test_a_step_idx_off_by_one_is_caught(monkeypatch, mode):
    """The simulator checks step_idx against the base model too, not only
    seq_lens_decoder, on every node whose draft decodes (a PD decode node as
    well as a mixed one): a preprocess that leaves step_idx one too high once."""
    from fastdeploy_mtp.buffers import read, write
    from fastdeploy_mtp.proposer import MTPProposer

    real = MTPProposer.prepare_inputs
    calls = {"n": 0}

    def off_by_one(self):
        running = real(self)
        if self.config.role == "prefill":  # its draft only prefills: nothing to align
            return running
        calls["n"] += 1
        if calls["n"] == 5:
            stop, enc = read(self.state["stop_flags"]), read(self.state["seq_lens_encoder"])
            step = read(self.state["step_idx"])
            step[(~stop) & (enc == 0)] += 1
            write(self.state["step_idx"], step)
        return running

    monkeypatch.setattr(MTPProposer, "prepare_inputs", off_by_one)
    t = simulate.run(args(mode=mode, num_model_steps=3, seed=2, steps=12), legacy=False,
                     print_rows=False)
    assert calls["n"] >= 5
    assert t.align_violations > 0 and "step_idx" in t.first_violation, t.first_violation


def test_captured_draft_refuses_a_proposer_off_the_gpu():
    from fastdeploy_mtp import captured

    node = simulate.make_node("mixed", "mixed", 3, args(steps=1), np.random.default_rng(0),
                              legacy=False)
    assert isinstance(node.draft, simulate.EagerDraft) and node.draft.replays == 0
    with pytest.raises(ValueError, match="must be on the GPU"):
        captured.CapturedDraft(node.proposer, max_tokens=64)


@pytest.mark.parametrize("max_tokens", [0, -3, 2.5, True, "64"])
def test_captured_draft_refuses_a_token_bound_that_is_not_a_positive_int(max_tokens):
    from fastdeploy_mtp import captured

    node = simulate.make_node("mixed", "mixed", 3, args(steps=1), np.random.default_rng(0),
                              legacy=False)
    with pytest.raises(ValueError, match="max_tokens must be a positive int"):
        captured.CapturedDraft(node.proposer, max_tokens=max_tokens)


def test_the_captured_draft_s_warm_up_calls_both_ops_on_a_throwaway_state(monkeypatch):
    """The warm-up before a capture runs each op once (here on the CPU, where
    the same calls run) on a proposer of its own, not the runner's."""
    import paddle

    from fastdeploy_mtp import _library, captured

    seen = []
    real = _library._call
    monkeypatch.setattr(_library, "_call", lambda form, sig, *a: (seen.append(sig.name),
                                                                  real(form, sig, *a))[1])
    captured._warm_up(paddle.CPUPlace())
    assert sorted(seen) == ["draft_model_preprocess", "update_attn_mask_offsets"]


# -- each check of the simulator, seen to fire and seen to pass ---------------------------

def _loop_parts(k=3, n=4):
    """A proposer and its scripted base with one running decode request in
    slot 1 (base: 12 KV positions, step 5, 2 accepted), the draft aligned
    with it."""
    from fastdeploy_mtp.buffers import read, write
    from fastdeploy_mtp.harness.sim_models import ScriptedBase
    from fastdeploy_mtp.proposer import MTPProposer, ProposerConfig, make_base_buffers

    cfg = ProposerConfig(num_model_steps=k, max_model_len=32, max_num_seqs=n)
    buffers = make_base_buffers(n, k)
    p = MTPProposer(cfg, buffers)
    base = ScriptedBase(buffers, k, 20, finish_prob=0.0, block_prob=0.0,
                        rng=np.random.default_rng(0))
    base.admit(1, [5, 6, 7], mask_offsets=[0, 2, 2])
    base.a["stop_flags"][1] = False
    base.a["seq_lens_decoder"][1], base.a["step_idx"][1], base.a["accept_num"][1] = 12, 5, 2
    st = {name: read(p.state[name]) for name in ("stop_flags", "seq_lens_encoder",
                                                  "seq_lens_decoder", "step_idx")}
    st["stop_flags"][:] = True
    st["stop_flags"][1] = False
    st["seq_lens_encoder"][1], st["seq_lens_decoder"][1], st["step_idx"][1] = 0, 10, 3
    for name, arr in st.items():
        write(p.state[name], arr)
    return p, base


def _set(p, name, slot, value):
    from fastdeploy_mtp.buffers import read, write

    arr = read(p.state[name])
    arr[slot] = value
    write(p.state[name], arr)


def test_alignment_passes_an_aligned_draft():
    p, base = _loop_parts()
    tally = simulate.Tally()
    simulate.check_alignment(p, base, True, tally, "here")
    assert tally.align_violations == 0 and tally.first_violation is None
    assert tally.rolled_back == 1


@pytest.mark.parametrize("name,value,said", [
    ("seq_lens_decoder", 11, "here: slot 1: draft seq_lens_decoder 11, base 12 - accept_num 2 = 10"),
    ("seq_lens_decoder", 9, "here: slot 1: draft seq_lens_decoder 9, base 12 - accept_num 2 = 10"),
    ("step_idx", 4, "here: slot 1: draft step_idx 4, base 5 - accept_num 2 = 3"),
])
def test_alignment_reports_a_draft_off_the_base(name, value, said):
    p, base = _loop_parts()
    _set(p, name, 1, value)
    tally = simulate.Tally()
    simulate.check_alignment(p, base, True, tally, "here")
    assert tally.align_violations == 1 and tally.first_violation == said


@pytest.mark.parametrize("running,draft_runs,said", [
    (False, True, "here: not_need_stop False, but 1 requests run"),
    (True, False, "here: not_need_stop True, but 0 requests run"),
])
def test_alignment_reports_not_need_stop_either_way(running, draft_runs, said):
    p, base = _loop_parts()
    if not draft_runs:
        _set(p, "stop_flags", 1, True)
    tally = simulate.Tally()
    simulate.check_alignment(p, base, running, tally, "here")
    assert tally.align_violations == 1 and tally.first_violation == said


def test_the_mask_check_passes_true_ends_and_reports_each_wrong_one():
    """Slot 1's prompt attends [0, 2, 2] (an image span of two); fed 4
    positions from 1: true ends 3, 3, 4, 5."""
    truth = {1: simulate.Submitted(np.array([0, 2, 2]))}
    want = np.array([3, 3, 4, 5])
    out = np.zeros(2 * 6, np.int32)
    out[(2 + np.arange(4)) * 2 + 1] = want  # the request's tokens are 2..5 of the batch
    tally = simulate.Tally()
    assert simulate.check_mask_offsets(truth, out, [(1, 2, 4, 1)], tally, "here") == 0
    assert tally.mask_violations == 0 and tally.tokens == 4
    for j, wrong in ((0, 2), (3, 6)):  # one short at the first token, one long at the last
        bad = out.copy()
        bad[(2 + j) * 2 + 1] = wrong
        tally = simulate.Tally()
        worst = simulate.check_mask_offsets(truth, bad, [(1, 2, 4, 1)], tally, "here")
        assert tally.mask_violations == 1 and worst == 1
        got = want.tolist()
        got[j] = wrong
        assert tally.first_violation == f"here: slot 1: mask offsets {got}, true ends {want.tolist()}"


# -- kvcache_scheduler_v1 both ways: a block step parks (v1) or drops (v0) -------------

def _flags_seen(monkeypatch):
    """Records, after every preprocess, whether any draft request was parked
    (is_block_step) or dropped (batch_drop)."""
    from fastdeploy_mtp.buffers import read
    from fastdeploy_mtp.proposer import MTPProposer

    real = MTPProposer.prepare_inputs
    seen = {"parked": 0, "dropped": 0}

    def recording(self):
        running = real(self)
        seen["parked"] += int(read(self.state["is_block_step"]).sum())
        seen["dropped"] += int(read(self.state["batch_drop"]).sum())
        return running

    monkeypatch.setattr(MTPProposer, "prepare_inputs", recording)
    return seen


def _reprefills_seen(monkeypatch, text_offsets=False):
    """Records each request the runner prefills again, and whether its prompt
    has image spans; with `text_offsets`, the runner's re-prefill drops them
    (text offsets for the whole prompt: a planted runner bug)."""
    real = simulate.reprefill_request
    seen = {"again": 0, "with_images": 0}

    def recording(slot, life):
        r = real(slot, life)
        seen["again"] += 1
        n = len(life.mask_offsets)
        seen["with_images"] += int((np.asarray(life.mask_offsets) != np.arange(n)).any())
        if text_offsets:
            r.mask_offsets = list(range(len(r.prompt)))
        return r

    monkeypatch.setattr(simulate, "reprefill_request", recording)
    return seen


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_a_v0_scheduler_drops_blocked_requests_and_prefills_them_again(monkeypatch, k):
    seen = _flags_seen(monkeypatch)
    again = _reprefills_seen(monkeypatch)
    t = simulate.run(args(num_model_steps=k, kv_scheduler="v0", block_prob=0.2, image_prob=0.5,
                          draft_model="tiny", steps=30, seed=k), legacy=False, print_rows=False)
    assert not t.failed, t.first_violation or t.model.first
    assert t.reprefilled > 0 and seen["dropped"] > 0 and seen["parked"] == 0
    assert again["again"] == t.reprefilled and again["with_images"] > 0, again
    assert t.model.tokens > 0


@pytest.mark.parametrize("k", [1, 3])
def test_a_re_prefill_that_drops_the_image_spans_is_caught(monkeypatch, k):
    """The runner prefills a dropped request again with text offsets where its
    prompt had image spans. Inserted, the base model and the ops all agree with
    that wrong request; the checks hold it to the request as submitted, so
    both the offset check and the oracle see the spans gone."""
    again = _reprefills_seen(monkeypatch, text_offsets=True)
    t = simulate.run(args(num_model_steps=k, kv_scheduler="v0", block_prob=0.2, image_prob=0.5,
                          draft_model="tiny", steps=30, seed=k), legacy=False, print_rows=False)
    assert again["with_images"] > 0, again
    assert t.failed and t.align_violations == 0
    assert t.mask_violations > 0 and "true ends" in t.first_violation, t.first_violation
    assert t.model.disagreements > 0, "the oracle took the re-prefill's offsets for the truth"


def test_a_v1_scheduler_parks_blocked_requests(monkeypatch):
    seen = _flags_seen(monkeypatch)
    t = simulate.run(args(num_model_steps=3, block_prob=0.2, steps=30, seed=3), legacy=False,
                     print_rows=False)
    assert not t.failed and t.reprefilled == 0
    assert seen["parked"] > 0 and seen["dropped"] == 0


def test_a_v0_scheduler_without_the_fix_drifts():
    t = simulate.run(args(num_model_steps=3, kv_scheduler="v0", block_prob=0.2, steps=30),
                     legacy=True, print_rows=False)
    assert t.mask_violations > 0 and t.reprefilled > 0


@pytest.mark.parametrize("kw", [dict(mode="pd"), dict(runner="fastdeploy")])
def test_a_v0_scheduler_runs_a_mixed_node_with_our_runner_only(kw):
    said = simulate_cli.validate(args(kv_scheduler="v0", **kw))
    assert said and said.startswith("--kv-scheduler v0 runs a mixed node")


# -- every check fails the run on its own ------------------------------------------------

DRIFTED = "the mask offsets drifted"
DISAGREED = "the draft model computed otherwise than a cache-free recomputation"
OUTSIDE = "FastDeploy's kernels would write outside a row or tensor"


@pytest.mark.parametrize("kw,said", [
    (dict(mask_violations=1), [DRIFTED]),
    (dict(align_violations=1), [DRIFTED]),
    (dict(model=ModelTally(tokens=900, disagreements=14)), [DISAGREED]),
    (dict(outside=OutsideWrites(preprocess=1)), [OUTSIDE]),
    (dict(outside=OutsideWrites(draft_update=1)), [OUTSIDE]),
    (dict(align_violations=3, model=ModelTally(disagreements=2), outside=OutsideWrites(
        draft_update=1)), [DRIFTED, DISAGREED, OUTSIDE]),
])
def test_each_check_alone_fails_the_run(kw, said):
    """0 violations and 14 disagreements fail a run as surely as a violation
    does; so does a write FastDeploy's kernels would make outside a row (they
    index pre_ids' and input_ids' rows unchecked: another request's row, or
    memory past the tensor)."""
    t = simulate.Tally(tokens=900, **kw)
    assert t.failed and t.failures == said


def test_a_run_where_no_check_fired_passes():
    t = simulate.Tally(tokens=900, substeps=60, rolled_back=40,
                       model=ModelTally(tokens=900, max_diff=1e-6), outside=OutsideWrites())
    assert not t.failed and t.failures == []


def _summary(out: str) -> dict:
    """The counts of a run's summary lines, and its verdict line."""
    import re

    said = {"violations": int(re.search(r"tokens checked, (\d+) violations", out).group(1))}
    for key, pattern in (("disagreements", r"recomputation, (\d+) disagreements"),
                         ("outside", r"on these states: (\d+) writes outside")):
        m = re.search(pattern, out)
        said[key] = int(m.group(1)) if m else None
    verdicts = [line for line in out.splitlines() if line.startswith(("OK", "FAILED"))]
    assert len(verdicts) == 1, out
    said["verdict"] = verdicts[0]
    return said


def test_the_command_line_fails_on_violations_alone(monkeypatch, capsys):
    """No draft model; one mask end the op returns moved by one, once: one
    violation, and the run fails."""
    real = simulate.MTPProposer.update_attn_mask_offsets
    state = {"calls": 0}

    def one_end_moved(self, ids, cu=None):
        out = real(self, ids, cu)
        state["calls"] += 1
        if state["calls"] == 8:
            import paddle

            arr = out.numpy()
            arr[1] += 1  # the first token's end
            return paddle.to_tensor(arr)
        return out

    monkeypatch.setattr(simulate.MTPProposer, "update_attn_mask_offsets", one_end_moved)
    assert simulate_cli.main(args(num_model_steps=3, steps=12, quiet=True)) == 1
    said = _summary(capsys.readouterr().out)
    assert said["violations"] == 1 and said["disagreements"] is None and said["outside"] is None
    assert said["verdict"] == "FAILED: " + DRIFTED


def test_the_command_line_fails_on_disagreements_alone(monkeypatch, capsys):
    """The op right (0 violations), the draft model's attention one key
    short at one decode token, once: the oracle's disagreements alone fail
    the run."""
    from fastdeploy_mtp.harness.tiny_model import TinyDecoder

    real = TinyDecoder.forward_cached
    state = {"calls": 0, "done": False}

    def one_key_short(self, tokens, requests, offsets):
        state["calls"] += 1
        decoding = [(q, n) for _, q, n, start in requests if start > 0]
        if state["calls"] > 6 and decoding and not state["done"]:
            q, n = decoding[0]
            offsets = offsets.copy()
            offsets[2 * (q + n - 1) + 1] -= 1
            state["done"] = True
        return real(self, tokens, requests, offsets)

    monkeypatch.setattr(TinyDecoder, "forward_cached", one_key_short)
    assert simulate_cli.main(args(num_model_steps=3, steps=10, batch=4, draft_model="tiny",
                                  quiet=True)) == 1
    said = _summary(capsys.readouterr().out)
    assert state["done"]
    assert said["violations"] == 0 and said["disagreements"] > 0 and said["outside"] is None
    assert said["verdict"] == "FAILED: " + DISAGREED


def test_the_command_line_fails_on_fastdeploy_s_writes_outside_a_row_alone(monkeypatch, capsys):
    """FastDeploy's runner on a mixed node (exact: no violation), with pre_ids
    only --max-dec-len columns wide: a draft past a request's last token has
    FastDeploy's draft_model_update write pre_ids[i, max_dec_len], one past the
    row. Those writes alone fail the run."""
    import paddle

    from fastdeploy_mtp import proposer

    real = proposer.draft_buffers
    max_dec_len = 12

    def narrow_pre_ids(max_num_seqs, max_model_len, draft_width, place=None):
        bufs = real(max_num_seqs, max_model_len, draft_width, place)
        narrow = np.full((max_num_seqs, max_dec_len), -1, np.int64)
        bufs["pre_ids"] = paddle.to_tensor(narrow, place=bufs["pre_ids"].place)
        return bufs

    monkeypatch.setattr(proposer, "draft_buffers", narrow_pre_ids)
    assert simulate_cli.main(args(num_model_steps=3, steps=30, runner="fastdeploy",
                                  max_dec_len=max_dec_len, draft_eos_prob=0.0,
                                  quiet=True)) == 1
    out = capsys.readouterr().out
    said = _summary(out)
    assert said["violations"] == 0 and said["disagreements"] is None and said["outside"] > 0
    assert f", {max_dec_len}], outside its {max_dec_len} columns" in out
    assert said["verdict"] == "FAILED: " + OUTSIDE


class _Greedy:
    """An rng for ScriptedBase that accepts every draft and never finishes,
    blocks or samples an end token on its own."""

    def integers(self, low, high=None):
        return high - 1 if high is not None else low - 1

    def random(self):
        return 1.0


def test_the_scripted_base_ends_a_request_at_an_accepted_end_token():
    """FastDeploy's draft update (up to 2178f2829) leaves a draft's end token
    among the base model's drafts; the base model accepting it ends the
    request there (speculate_verify.cu 9018ccf74 lines 127-135), with no token
    of its own after it."""
    from fastdeploy_mtp.buffers import read, write
    from fastdeploy_mtp.harness.sim_models import EOS

    p, base = _loop_parts(k=2)
    base.rng = _Greedy()
    base.slots[1].new = False
    drafts = read(base.buffers["draft_tokens"])
    drafts[1, :3] = [9, EOS, -1]
    write(base.buffers["draft_tokens"], drafts)
    counts = base.run()
    assert counts["finished"] == 1 and base.slots[1].finished
    assert base.a["stop_flags"][1]
    assert base.a["accept_num"][1] == 1 and base.a["accept_tokens"][1, 0] == EOS
    assert base.slots[1].generated[-1] == EOS
    # Without an end token among the drafts the same base accepts them all
    # and samples a token of its own after them, the request running on.
    p, base = _loop_parts(k=2)
    base.rng = _Greedy()
    base.slots[1].new = False
    drafts = read(base.buffers["draft_tokens"])
    drafts[1, :3] = [9, 40, -1]
    write(base.buffers["draft_tokens"], drafts)
    counts = base.run()
    assert counts["finished"] == 0 and not base.a["stop_flags"][1]
    assert base.a["accept_num"][1] == 2 and base.a["accept_tokens"][1, 0] == 40
