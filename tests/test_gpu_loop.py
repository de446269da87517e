"""The closed loop with the CUDA kernels: the simulator's draft state on the
GPU (``simulate --device gpu``), the real draft model on the CPU reading the
GPU op's mask offsets. Every step must equal the same run with the CPU ops,
row for row, and be right with the fix and drift without it. Skipped where
Paddle has no CUDA."""

import numpy as np
import pytest

from fastdeploy_mtp import ops
from fastdeploy_mtp.harness import simulate
from helpers import gpu_available, sim_args

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(), reason="needs Paddle with CUDA and a GPU")]


def args(**kw):
    return sim_args(**{"steps": 16, "batch": 6, "draft_model": "tiny", "image_prob": 0.5, **kw})


def run_rows(a, legacy):
    """The run's tally and every line it prints (the per-step rows)."""
    rows = []
    t = simulate.run(a, legacy=legacy, print_rows=True, out=rows.append)
    return t, rows


def replays_expected(a):
    """With --graphs, one preprocess and k mask calls a step on a mixed or
    decode node, one and one on a prefill node; eager calls replay nothing."""
    if not a.graphs:
        return 0
    k = a.num_model_steps
    per_step = 1 + k if a.mode == "mixed" else (1 + 1) + (1 + k)
    return a.steps * per_step


def gpu_and_cpu(legacy=False, graphs=False, **kw):
    """The same run on the GPU's ops (with `graphs`, replayed from CUDA graphs
    captured once, as `simulate --device gpu --graphs` runs it) and called
    eagerly on the CPU's, every printed row asserted equal; their tallies."""
    a = args(**kw, device="gpu", graphs=graphs)
    gpu, gpu_rows = run_rows(a, legacy)
    cpu, cpu_rows = run_rows(args(**kw, device="cpu"), legacy)
    assert gpu_rows == cpu_rows
    assert gpu.replays == replays_expected(a) and cpu.replays == 0
    return gpu, cpu


def test_the_simulator_puts_the_draft_state_on_the_gpu():
    a = args(device="gpu")
    node = simulate.make_node("mixed", "mixed", 3, a, np.random.default_rng(0), legacy=False)
    assert node.proposer.place.is_gpu_place()
    on_gpu = [name for name, t in {**node.proposer.state, **node.base.buffers}.items()
              if t.place.is_gpu_place()]
    # Everything but the host flag not_need_stop (the synchronous preprocess).
    assert set(on_gpu) == set(node.proposer.state) - {"not_need_stop"} | set(node.base.buffers)


@pytest.mark.parametrize("mode,k", [("mixed", 3), ("pd", 3), ("pd", 4), ("mixed", 1)])
def test_the_gpu_loop_computes_what_the_cpu_loop_does(mode, k):
    gpu, cpu = gpu_and_cpu(mode=mode, num_model_steps=k, seed=k)
    assert gpu.violations == 0, gpu.first_violation
    assert gpu.model.disagreements == 0, gpu.model.first
    assert gpu.model.tokens > 150, gpu.model.tokens
    assert (gpu.tokens, gpu.model.tokens, gpu.model.max_diff) == \
        (cpu.tokens, cpu.model.tokens, cpu.model.max_diff)


def test_the_asynchronous_mask_path_in_the_loop(monkeypatch):
    """FASTDEPLOY_MTP_ASYNC_MASK=1 (the CPU op has no asynchronous path):
    each GPU mask call launches without a report to the host, the path a
    captured step takes; the loop reads the offsets back itself. Same rows,
    and no error left on the device."""
    import paddle

    monkeypatch.setenv("FASTDEPLOY_MTP_ASYNC_MASK", "1")
    gpu, _ = gpu_and_cpu(mode="pd", num_model_steps=3, seed=7)
    assert gpu.violations == 0 and gpu.model.disagreements == 0, gpu.model.first
    ops.raise_pending_errors(paddle.to_tensor([0], place=paddle.CUDAPlace(0)))


def test_long_prompts_through_the_real_model_on_the_gpu(monkeypatch):
    """Prompts up to 3000 tokens: past 64, the GPU mask kernel shares a
    prompt out among its block, and past 8 x its threads (1024 for the 4
    requests here) a thread walks the prompt in several rounds: paths that
    short prompts never take."""
    lengths = []
    drawn = simulate.new_prompt

    def spy(rng, a):
        prompt, offsets = drawn(rng, a)
        lengths.append(len(prompt))
        return prompt, offsets

    monkeypatch.setattr(simulate, "new_prompt", spy)
    gpu, _ = gpu_and_cpu(mode="pd", num_model_steps=3, steps=6, batch=4, max_prompt=3000, seed=3)
    assert max(lengths) > 2048, lengths
    assert gpu.violations == 0 and gpu.model.disagreements == 0, gpu.model.first


@pytest.mark.parametrize("batch", [300, 1000, 2100])
def test_big_batches_in_the_loop_match_the_cpu(batch):
    """The launches past one block (clusters at 300; the mask op's grid at
    1000; both ops' grids at 2100), step after step, long prompts included.
    No draft model: the invariant on the offsets, and every row equal."""
    gpu, _ = gpu_and_cpu(mode="mixed", num_model_steps=3, steps=10, batch=batch, max_prompt=160,
                         draft_model=None, seed=batch)
    assert gpu.violations == 0, gpu.first_violation
    assert gpu.tokens > 20 * batch, gpu.tokens


@pytest.mark.parametrize("mode", ["mixed", "pd"])
def test_without_the_fix_the_gpu_loop_drifts_as_the_cpu_loop_does(mode):
    gpu, cpu = gpu_and_cpu(legacy=True, mode=mode, num_model_steps=3, seed=5)
    assert gpu.mask_violations > 0 and gpu.model.disagreements > 0
    assert gpu.model.first == cpu.model.first


# The loop as a production runner drives it: preprocess and the mask call
# captured in CUDA graphs on their first use, then only replayed
# (captured.CapturedDraft, `simulate --device gpu --graphs`).

@pytest.mark.parametrize("mode,k", [("mixed", 3), ("pd", 3), ("pd", 2), ("mixed", 1)])
def test_the_captured_loop_computes_what_the_cpu_loop_does(mode, k):
    gpu, cpu = gpu_and_cpu(graphs=True, mode=mode, num_model_steps=k, seed=10 + k)
    assert gpu.violations == 0, gpu.first_violation
    assert gpu.model.disagreements == 0, gpu.model.first
    assert gpu.model.tokens > 150 and gpu.rolled_back > 20, (gpu.model.tokens, gpu.rolled_back)
    assert (gpu.tokens, gpu.model.tokens, gpu.model.max_diff) == \
        (cpu.tokens, cpu.model.tokens, cpu.model.max_diff)


@pytest.mark.parametrize("batch", [300, 1000])
def test_big_captured_batches_match_the_cpu(batch):
    """Replayed clusters (300) and grids (1000: the mask op's grid), whose
    scratch the warm-up allocated before the first capture."""
    gpu, _ = gpu_and_cpu(graphs=True, mode="mixed", num_model_steps=3, steps=8, batch=batch,
                         max_prompt=160, draft_model=None, seed=batch)
    assert gpu.violations == 0, gpu.first_violation
    assert gpu.tokens > 15 * batch, gpu.tokens


def test_without_the_fix_the_captured_loop_drifts_as_the_cpu_loop_does():
    gpu, cpu = gpu_and_cpu(graphs=True, legacy=True, mode="pd", num_model_steps=3, seed=5)
    assert gpu.mask_violations > 0 and gpu.model.disagreements > 0
    assert gpu.model.first == cpu.model.first


def test_a_refused_replay_raises_at_once_and_changes_nothing():
    """A replayed preprocess that refuses its batch leaves the error on the
    device; CapturedDraft raises it right after the replay, and no buffer
    has changed."""
    from fastdeploy_mtp import captured
    from fastdeploy_mtp.buffers import read, write

    a = args(device="gpu", graphs=True, steps=4, seed=2)
    node = simulate.make_node("mixed", "mixed", 3, a, np.random.default_rng(2), legacy=False)
    assert isinstance(node.draft, captured.CapturedDraft)
    simulate.admit_new(node, np.random.default_rng(3), a)
    node.base.run()
    assert node.draft.prepare_inputs()  # captured, replayed: a valid batch
    p = node.proposer
    running = int(np.nonzero(read(p.state["seq_lens_this_time"]) > 0)[0][0])
    good = read(p.state["seq_lens_encoder"])
    bad = good.copy()  # a prompt's first token past input_ids
    bad[running] = 2**31 - 1
    write(p.state["seq_lens_encoder"], bad)
    before = {k: read(t) for k, t in {**p.state, **p.base}.items()}
    before_flag = read(node.draft.flag)
    with pytest.raises(ops.BadInputError, match=f"request {running}: input_ids"):
        node.draft.prepare_inputs()
    for k, t in {**p.state, **p.base}.items():
        np.testing.assert_array_equal(read(t), before[k], err_msg=k)
    np.testing.assert_array_equal(read(node.draft.flag), before_flag)
    write(p.state["seq_lens_encoder"], good)
    assert node.draft.prepare_inputs()  # the error was taken: the same graph runs on
    node.draft.release()


def test_a_substep_past_the_captured_tokens_is_refused_before_the_replay():
    """A graph has fixed shapes: a mask call captured for 8 tokens cannot
    serve a substep of 9. CapturedDraft refuses it before it writes the
    captured cu_seqlens_q or replays; a substep within the bound then runs."""
    from fastdeploy_mtp import captured
    from fastdeploy_mtp.buffers import read

    a = args(device="gpu", graphs=True, steps=1, seed=4)
    node = simulate.make_node("mixed", "mixed", 3, a, np.random.default_rng(4), legacy=False)
    draft = captured.CapturedDraft(node.proposer, max_tokens=8)
    n = node.proposer.config.max_num_seqs
    over = np.zeros(n + 1, np.int32)
    over[1:] = 9  # request 0: 9 tokens, the rest none
    cu_before = read(draft.cu)
    with pytest.raises(ValueError, match="9 tokens in a substep.*at most 8"):
        draft.mask_offsets(np.zeros(9, np.int64), over)
    np.testing.assert_array_equal(read(draft.cu), cu_before)
    assert draft.replays == 0 and draft._mask is None
    within = np.zeros(n + 1, np.int32)
    within[1:] = 8
    assert draft.mask_offsets(np.zeros(8, np.int64), within).shape == (16,)
    assert draft.replays == 1
    draft.release()
