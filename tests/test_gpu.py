"""GPU-only behaviour: batches past one block (the cooperative-grid path above
256 requests for draft_model_preprocess, 64 for update_attn_mask_offsets), mixed devices, the asynchronous not_need_stop path, CUDA graph
capture. Skipped where Paddle has no CUDA (the CPU/GPU differential
and bad-input tests run on the GPU through their `device` parameter)."""

import numpy as np
import pytest

from fastdeploy_mtp import ops
from fastdeploy_mtp.harness import states
from helpers import (assert_mask_like_reference, assert_states_equal, assert_unchanged,
                     gpu_available, preprocess_attrs, run_mask_ref, run_preprocess_op,
                     run_preprocess_ref, to_numpy, to_tensors)
from case_states import (break_mask_request, break_preprocess_request, prompts_state,
                         skipped_mask_requests)

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(), reason="needs Paddle with CUDA and a GPU")]


def _assert_earliest_broken_is_named(s, bad, device="gpu"):
    """Breaks requests `bad` of mask state `s`: the op names the earliest and
    changes nothing."""
    for i in bad:
        break_mask_request(s, i)
    t = to_tensors(s, device)
    with pytest.raises(ops.BadInputError, match=f"request {min(bad)}: seq_lens_this_time"):
        ops.update_attn_mask_offsets(**t)
    assert_unchanged(t, s)


@pytest.mark.parametrize("bsz", [129, 200, 256, 257, 511, 512, 513, 1024, 1025, 2048, 8192])
@pytest.mark.parametrize("k", [1, 4, 10])
def test_preprocess_every_request_of_big_batches(bsz, k):
    """FastDeploy's one-block-of-512 kernel skips requests past 511; ours must not."""
    s = states.preprocess_state(np.random.default_rng(bsz + k), bsz, num_model_step=k)
    attrs = preprocess_attrs(k, v1=True)
    assert_states_equal(run_preprocess_op(s, attrs, "gpu"), run_preprocess_ref(s, attrs))


@pytest.mark.parametrize("bsz, padding", [(48, 0), (64, 0), (128, 0), (256, 0), (513, 5),
                                          (1025, 5), (8192, 5), (64, 9000)])
def test_mask_every_request_of_big_batches(bsz, padding):
    """(64, 9000): few requests, but an output long enough for the grid path."""
    s = states.mask_state(np.random.default_rng(bsz), bsz, padding_tokens=padding)
    assert_mask_like_reference(s, "gpu")


def test_last_request_of_8192_is_checked():
    s = states.preprocess_state(np.random.default_rng(3), 8192, num_model_step=2)
    break_preprocess_request(s, 8191, -1)
    t = to_tensors(s, "gpu")
    with pytest.raises(ops.BadInputError, match="request 8191: accept_num"):
        ops.draft_model_preprocess(**t, **preprocess_attrs(2))
    assert_unchanged(t, s)


def test_blocks_agree_on_the_first_failing_request():
    """Failures in several blocks of the grid path: the earliest is reported, nothing written."""
    s = states.preprocess_state(np.random.default_rng(11), 8192, num_model_step=2)
    for i in (7000, 300, 4097):
        break_preprocess_request(s, i, 99)
    t = to_tensors(s, "gpu")
    with pytest.raises(ops.BadInputError, match="request 300: accept_num"):
        ops.draft_model_preprocess(**t, **preprocess_attrs(2))
    assert_unchanged(t, s)


@pytest.mark.parametrize("bsz, bad, first", [(129, (128, 5), 5), (1024, (1000, 300, 700), 300),
                                             (2048, (2047, 1900, 1030), 1030)])
def test_preprocess_cluster_blocks_agree_on_the_first_failing_request(bsz, bad, first):
    """129 to 2048 requests run as one thread-block cluster (sm_90; 16
    blocks from 1024 requests, where the device has room for them)."""
    s = states.preprocess_state(np.random.default_rng(bsz), bsz, num_model_step=2)
    for i in bad:
        break_preprocess_request(s, i, 99)
    t = to_tensors(s, "gpu")
    with pytest.raises(ops.BadInputError, match=f"request {first}: accept_num"):
        ops.draft_model_preprocess(**t, **preprocess_attrs(2))
    assert_unchanged(t, s)


def test_mask_blocks_agree_on_the_first_failing_request():
    _assert_earliest_broken_is_named(states.mask_state(np.random.default_rng(12), 4096),
                                     (3000, 1500))


@pytest.mark.parametrize("bsz, bad, first", [(33, (32, 20), 20), (64, (63, 40, 9), 9),
                                             (128, (127, 70), 70), (256, (255, 200), 200),
                                             (512, (511, 480, 260), 260)])
def test_mask_cluster_blocks_agree_on_the_first_failing_request(bsz, bad, first):
    """33 to 512 requests run as one thread-block cluster (sm_90; up to 16
    blocks where the device has room for them): failures in several of its
    blocks, the earliest is reported and nothing is written."""
    assert first == min(bad)
    _assert_earliest_broken_is_named(states.mask_state(np.random.default_rng(bsz), bsz), bad)


@pytest.mark.parametrize("bsz", [8, 64, 512, 4096])
@pytest.mark.parametrize("skipped", [False, True])
def test_overlapping_requests_are_refused_in_every_launch(bsz, skipped):
    """One block, a cluster, a grid: a request whose tokens run into the next
    request's (or, skipped, whose cu_seqlens_q is past the next one's) is
    refused, the earlier of two is named, and nothing is written."""
    s = states.mask_state(np.random.default_rng(bsz), bsz)
    n = s["seq_lens_this_time"].reshape(-1)
    cu = s["cu_seqlens_q"]
    fit = skipped_mask_requests(s) if skipped else ~skipped_mask_requests(s) & (n > 0)
    late, early = np.nonzero(fit[bsz // 2:])[0][0] + bsz // 2, np.nonzero(fit)[0][0]
    for i in (late, early):
        if skipped:
            cu[i] = cu[i + 1] + 1
        else:
            cu[i + 1] -= 1
    t = to_tensors(s, "gpu")
    with pytest.raises(ops.BadInputError, match=f"request {early}: cu_seqlens_q"):
        ops.update_attn_mask_offsets(**t)
    assert_unchanged(t, s)


def test_a_long_prompt_into_the_next_is_refused():
    """A prompt shared out among its block's threads is checked for overlap
    like any request (the check comes before it is listed in the block)."""
    s = prompts_state(7, 16, 300, 4096)
    s["cu_seqlens_q"][5] -= 1
    t = to_tensors(s, "gpu")
    with pytest.raises(ops.BadInputError, match="request 4: cu_seqlens_q"):
        ops.update_attn_mask_offsets(**t)
    assert_unchanged(t, s)


def test_a_captured_cluster_mask_failure_changes_nothing_and_surfaces_later():
    import os

    graphs = pytest.importorskip("paddle.device.cuda.graphs")
    rng = np.random.default_rng(33)
    _warm_up(states.preprocess_state(rng, 8, num_model_step=2), states.mask_state(rng, 128),
             preprocess_attrs(2))
    m = states.mask_state(rng, 128)
    break_mask_request(m, 100)
    t = to_tensors(m, "gpu")
    ops.raise_pending_errors(t["seq_lens_decoder"])
    os.environ["FASTDEPLOY_MTP_ASYNC_MASK"] = "1"
    try:
        g = graphs.CUDAGraph()
        g.capture_begin()
        ops.update_attn_mask_offsets(**t)
        g.capture_end()
        g.replay()
    finally:
        del os.environ["FASTDEPLOY_MTP_ASYNC_MASK"]
    assert_unchanged(t, m)
    good = states.mask_state(np.random.default_rng(34), 64)
    tg = to_tensors(good, "gpu")
    with pytest.raises(ops.BadInputError, match="earlier asynchronous call.*request 100"):
        ops.update_attn_mask_offsets(**tg)
    assert_unchanged(tg, good)
    g.reset()


def test_a_cluster_size_first_seen_inside_a_capture():
    """A runner captures one graph per batch size without a warm-up at each:
    a cluster shape first met inside the capture (40 requests: 5 blocks of 256
    threads, after 64 requests' 8 blocks of 256) still captures and replays
    like the reference."""
    import os

    graphs = pytest.importorskip("paddle.device.cuda.graphs")
    rng = np.random.default_rng(35)
    _warm_up(states.preprocess_state(rng, 8, num_model_step=2), states.mask_state(rng, 64),
             preprocess_attrs(2))
    m = states.mask_state(rng, 40)
    t = to_tensors(m, "gpu")
    os.environ["FASTDEPLOY_MTP_ASYNC_MASK"] = "1"
    try:
        g = graphs.CUDAGraph()
        g.capture_begin()
        out = ops.update_attn_mask_offsets(**t)
        g.capture_end()
    finally:
        del os.environ["FASTDEPLOY_MTP_ASYNC_MASK"]
    assert_unchanged(t, m)  # captured, not run
    g.replay()
    ops.raise_pending_errors(t["seq_lens_decoder"])
    want_out, want_m = run_mask_ref(m)
    np.testing.assert_array_equal(out.numpy(), want_out)
    assert_states_equal(to_numpy(t), want_m)
    g.reset()


# -- long prompts: a prompt of more than 64 tokens is checked and written by
# every thread of its block, not its group alone (attn_mask_offsets_full wider
# than 64 columns) --------------------------------------------------------------

def _long_prompts(s):
    """The requests of a mask state that take the prompt branch with more than 64 tokens."""
    n = s["seq_lens_this_time"].reshape(-1)
    bsz = n.shape[0]
    enc = s["seq_lens_encoder"].reshape(-1)[:bsz]
    dec = s["seq_lens_decoder"].reshape(-1)[:bsz]
    block = s["is_block_step"].reshape(-1)[:bsz]
    vision = (s["decode_states"][:bsz, 0] == 2) & (dec > 0)
    return np.flatnonzero((enc > 0) & ~block & ~vision & (n > 64))


@pytest.mark.parametrize("bsz, cols, seed", [(1, 4096, 1), (8, 4096, 4104), (16, 2048, 2064),
                                             (33, 65, 17), (33, 80, 0), (64, 1000, 1064),
                                             (512, 300, 812), (8200, 100, 8300)])
def test_long_prompts_match_the_reference(bsz, cols, seed):
    """(33, 65): a prompt of 65 tokens, the shortest shared out. (8200, 100):
    past 8192 requests a group takes a second request, whose prompt its group
    walks alone."""
    s = states.mask_state(np.random.default_rng(seed), bsz, mask_cols=cols)
    assert len(_long_prompts(s)) > 0
    assert_mask_like_reference(s, "gpu")


@pytest.mark.parametrize("bsz, cols", [(8, 4096), (16, 2048), (64, 1000), (512, 300)])
@pytest.mark.parametrize("where", ["last", "middle", "first"])
def test_a_bad_offset_deep_in_a_long_prompt_fails_its_request(bsz, cols, where):
    """Bad offsets in two long prompts, and the earlier of them named, with the
    column; nothing written."""
    s = states.mask_state(np.random.default_rng(bsz * 7 + cols), bsz, mask_cols=cols)
    longs = _long_prompts(s)
    if len(longs) < 2:
        pytest.skip("the state has fewer than two long prompts")
    early, late = longs[0], longs[-1]
    n = int(s["seq_lens_this_time"].reshape(-1)[early])
    col = {"last": n - 1, "middle": n // 2, "first": 0}[where]
    s["attn_mask_offsets_full"][early, col] = -5
    s["attn_mask_offsets_full"][late, int(s["seq_lens_this_time"].reshape(-1)[late]) - 1] = 2**31 - 1
    t = to_tensors(s, "gpu")
    with pytest.raises(ops.BadInputError,
                       match=f"request {early}: attn_mask_offsets_full: column {col} holds -5"):
        ops.update_attn_mask_offsets(**t)
    assert_unchanged(t, s)


# Prompts of 33 to 64 tokens: longer than a group's lanes (32 at most), not
# long enough to share out, so each lane counts down its own tokens. The batch
# sizes give (launch_plan.cuh) one block and a cluster at 32 lanes a request,
# a cluster at 16, and grids at 32, 16 and 8.
GROUP_WALKED = [(bsz, n) for bsz in (1, 64, 300, 600, 1500, 8200) for n in (33, 64)]


@pytest.mark.parametrize("bsz, n", GROUP_WALKED)
def test_prompts_a_group_walks_match_the_reference(bsz, n):
    assert_mask_like_reference(prompts_state(bsz, bsz, n, n + 3), "gpu")


@pytest.mark.parametrize("bsz, n", GROUP_WALKED)
@pytest.mark.parametrize("col", ["first", "last"])
def test_a_bad_offset_in_a_prompt_a_group_walks_fails_its_request(bsz, n, col):
    """The last token is the one the lanes' countdown reaches at left == 1."""
    s = prompts_state(bsz + 1, bsz, n, n)
    bad, column = bsz // 2, {"first": 0, "last": n - 1}[col]
    s["attn_mask_offsets_full"][bad, column] = -3
    t = to_tensors(s, "gpu")
    with pytest.raises(ops.BadInputError,
                       match=f"request {bad}: attn_mask_offsets_full: column {column} holds -3"):
        ops.update_attn_mask_offsets(**t)
    assert_unchanged(t, s)


@pytest.mark.parametrize("col", [10, 199])
def test_two_bad_long_prompts_of_one_block_name_the_first(col):
    """Both prompts in one block, bad at the same column: the thread that
    walks that column sees both, and must keep the earlier request."""
    s = prompts_state(col, 2, 200, 256)
    s["attn_mask_offsets_full"][:, col] = -1
    t = to_tensors(s, "gpu")
    with pytest.raises(ops.BadInputError,
                       match=f"request 0: attn_mask_offsets_full: column {col} holds -1"):
        ops.update_attn_mask_offsets(**t)
    assert_unchanged(t, s)


def test_a_bad_short_request_before_a_bad_long_prompt_is_the_one_named():
    s = states.mask_state(np.random.default_rng(5), 64, mask_cols=1000)
    longs = _long_prompts(s)
    late = int(longs[-1])
    assert late > 0
    n = int(s["seq_lens_this_time"].reshape(-1)[late])
    s["attn_mask_offsets_full"][late, n - 1] = -1
    break_mask_request(s, late - 1)
    t = to_tensors(s, "gpu")
    with pytest.raises(ops.BadInputError, match=f"request {late - 1}: seq_lens_this_time"):
        ops.update_attn_mask_offsets(**t)
    assert_unchanged(t, s)


# -- a wide attn_mask_offsets_full: a real engine's has max_model_len columns,
# so its batches of decodes and short prompts run the kernels that may share
# out long prompts. Where a block has none to walk, it agrees on its verdict
# with the listing's barrier (one block, a cluster); with 8 lanes a request, or
# 16 in a grid, a warp's requests are consecutive -----------------------------

def _wide(bsz, seed=None):
    """A mask state of `bsz` requests whose attn_mask_offsets_full has 1024
    columns, those past the drawn ones -1 (read by no request)."""
    s = states.widen_mask_full(states.mask_state(np.random.default_rng(
        bsz if seed is None else seed), bsz), 1024, fill=-1)
    assert s["cu_seqlens_q"][-1] > 64  # else no launch may share prompts out
    return s


@pytest.mark.parametrize("bsz", [24, 33, 64, 512, 1024, 2048, 4096, 8192])
def test_wide_tables_match_the_reference(bsz):
    """24: one block; 33 to 512: one cluster; 1024 up: a grid (16 lanes a
    request at 2048, a warp's two requests consecutive; 8 lanes past 2048)."""
    assert_mask_like_reference(_wide(bsz), "gpu")


@pytest.mark.parametrize("bsz, bad, first", [(24, (23, 9), 9), (64, (63, 40, 9), 9),
                                             (512, (511, 480, 260), 260),
                                             (2048, (2047, 1500, 1025), 1025),
                                             (4096, (4000, 3001), 3001)])
def test_wide_tables_agree_on_the_first_failing_request(bsz, bad, first):
    """Failures in several warps and blocks, none of them in the first warp of
    its block: the earliest is named and nothing is written."""
    assert first == min(bad)
    _assert_earliest_broken_is_named(_wide(bsz), bad)


@pytest.mark.parametrize("bsz", [24, 64])
def test_an_earlier_asynchronous_failure_stops_a_wide_batch(bsz):
    """The pending error goes into the verdict agreed on with the listing."""
    import os

    bad = _wide(40, seed=3)
    break_mask_request(bad, 30)
    t_bad = to_tensors(bad, "gpu")
    os.environ["FASTDEPLOY_MTP_ASYNC_MASK"] = "1"
    try:
        ops.update_attn_mask_offsets(**t_bad)
    finally:
        del os.environ["FASTDEPLOY_MTP_ASYNC_MASK"]
    good = _wide(bsz)
    t = to_tensors(good, "gpu")
    with pytest.raises(ops.BadInputError, match="earlier asynchronous call.*request 30"):
        ops.update_attn_mask_offsets(**t)
    assert_unchanged(t, good)
    assert_unchanged(t_bad, bad)


def test_a_wide_batch_on_a_stream_first_seen_inside_a_capture():
    """A stream first seen inside a capture has no grid scratch, so a batch
    past one cluster runs as one block whose groups take several requests in
    turn: a failure in a later request still stops the batch."""
    import os

    import paddle

    graphs = pytest.importorskip("paddle.device.cuda.graphs")
    rng = np.random.default_rng(36)
    _warm_up(states.preprocess_state(rng, 8, num_model_step=2), states.mask_state(rng, 64),
             preprocess_attrs(2))
    m = _wide(4096)
    break_mask_request(m, 4000)
    t = to_tensors(m, "gpu")
    side = paddle.device.cuda.Stream()
    os.environ["FASTDEPLOY_MTP_ASYNC_MASK"] = "1"
    try:
        with paddle.device.cuda.stream_guard(side):
            g = graphs.CUDAGraph()
            g.capture_begin()
            ops.update_attn_mask_offsets(**t)
            g.capture_end()
            g.replay()
        side.synchronize()
    finally:
        del os.environ["FASTDEPLOY_MTP_ASYNC_MASK"]
    assert_unchanged(t, m)
    with pytest.raises(ops.BadInputError, match="earlier asynchronous call.*request 4000"):
        ops.raise_pending_errors(t["seq_lens_decoder"])
    g.reset()


@pytest.mark.parametrize("bsz, seed", [(1, 50), (64, 41), (4096, 41)])
def test_the_mask_kernel_waits_for_the_kernel_before_it(bsz, seed):
    """The kernel before it on the stream lets it launch early (a programmatic
    dependent launch) and writes its cursor 10 ms later: the op (one block, a
    cluster, a grid) must compute from what that kernel wrote."""
    from fastdeploy_mtp.bench.gpu import bench_library

    lib = bench_library()
    m = states.mask_state(np.random.default_rng(seed), bsz)
    t = to_tensors(m, "gpu")
    ops.update_attn_mask_offsets(**to_tensors(m, "gpu"))  # warm-up: the stream's grid scratch
    lib.bench_late_bump(t["attn_mask_offsets_decoder"])
    out = ops.update_attn_mask_offsets(**t)
    m["attn_mask_offsets_decoder"] += 1
    want_out, want = run_mask_ref(m)
    np.testing.assert_array_equal(out.numpy(), want_out)
    assert_states_equal(to_numpy(t), want)


def test_asynchronous_error_of_a_big_batch_waits_for_the_next_call():
    bad = states.preprocess_state(np.random.default_rng(13), 4096, num_model_step=3)
    break_preprocess_request(bad, 4000, -1)
    t_bad = to_tensors(bad, "gpu", host_flag=False)
    ops.draft_model_preprocess(**t_bad, **preprocess_attrs(3))
    assert_unchanged(t_bad, bad)
    good = states.preprocess_state(np.random.default_rng(14), 4096, num_model_step=3)
    t_good = to_tensors(good, "gpu")
    with pytest.raises(ops.BadInputError, match="earlier asynchronous call.*request 4000"):
        ops.draft_model_preprocess(**t_good, **preprocess_attrs(3))
    assert_unchanged(t_good, good)
    ops.draft_model_preprocess(**t_good, **preprocess_attrs(3))
    assert_states_equal(to_numpy(t_good), run_preprocess_ref(good, preprocess_attrs(3)))


def test_captured_preprocess_replays_like_the_reference():
    """A runner captures the step in a CUDA graph (not_need_stop on the GPU)."""
    graphs = pytest.importorskip("paddle.device.cuda.graphs")
    attrs = preprocess_attrs(3, v1=True)
    warm = states.preprocess_state(np.random.default_rng(15), 8, num_model_step=3)
    ops.draft_model_preprocess(**to_tensors(warm, "gpu", host_flag=False), **attrs)  # warm-up
    s = states.preprocess_state(np.random.default_rng(16), 4096, num_model_step=3)
    t = to_tensors(s, "gpu", host_flag=False)
    g = graphs.CUDAGraph()
    g.capture_begin()
    ops.draft_model_preprocess(**t, **attrs)
    g.capture_end()
    assert_unchanged(t, s)  # captured, not run
    g.replay()
    ops.raise_pending_errors(t["seq_lens_decoder"])
    assert_states_equal(to_numpy(t), run_preprocess_ref(s, attrs))
    g.reset()


def test_big_batches_on_two_streams():
    """The grid path keeps its scratch per stream: kernels on two streams may overlap."""
    import paddle

    attrs = preprocess_attrs(3, v1=True)
    side = paddle.device.cuda.Stream()
    batches = [states.preprocess_state(np.random.default_rng(17 + n), 4096, num_model_step=3)
               for n in range(2)]
    for s in batches:  # stays valid through three rollbacks of 2
        s["seq_lens_decoder"] += 1000
        s["step_idx"] += 1000
        s["stop_flags"][:] = False  # no re-sync: it could set step_idx near 0
    tensors = [to_tensors(s, "gpu", host_flag=False) for s in batches]
    for _ in range(3):  # both streams busy at once, several times
        with paddle.device.cuda.stream_guard(side):
            ops.draft_model_preprocess(**tensors[0], **attrs)
        ops.draft_model_preprocess(**tensors[1], **attrs)
        side.synchronize()
        ops.raise_pending_errors(tensors[1]["seq_lens_decoder"])
    for s, t in zip(batches, tensors):
        want = states.copy_state(s)
        for _ in range(3):
            want = run_preprocess_ref(want, attrs)
        assert_states_equal(to_numpy(t), want)


def test_tensors_on_two_devices_are_refused():
    s = states.preprocess_state(np.random.default_rng(4), 8, num_model_step=2)
    t = to_tensors(s, "gpu")
    t["pre_ids"] = to_tensors({"pre_ids": s["pre_ids"]}, "cpu")["pre_ids"]
    with pytest.raises(ops.BadInputError, match="one device: pre_ids"):
        ops.draft_model_preprocess(**t, **preprocess_attrs(2))
    assert_unchanged(t, s)


def test_not_need_stop_on_the_gpu_is_written_there():
    s = states.preprocess_state(np.random.default_rng(5), 300, num_model_step=3)
    attrs = preprocess_attrs(3)
    t = to_tensors(s, "gpu", host_flag=False)
    assert t["not_need_stop"].place.is_gpu_place()
    ops.draft_model_preprocess(**t, **attrs)
    assert_states_equal(to_numpy(t), run_preprocess_ref(s, attrs))


# 70000 requests: a grid of more than 256 blocks (547 of 128 threads on the
# H200), whose blocks past the 256th are read in the agreement's second loop;
# request 65636 is in block 512 (the first round gives each thread one request).
@pytest.mark.parametrize("bsz,runs", [
    (b, r) for b in (200, 513, 1025, 8192) for r in ("first", "last", "none")
] + [(70000, "block256"), (70000, "none")])
@pytest.mark.parametrize("host_flag", [True, False])
def test_not_need_stop_when_one_request_of_a_grid_batch_runs(bsz, runs, host_flag):
    """Every block of the grid must count towards not_need_stop: all requests
    stopped by the base model but (at most) one, in the first or last block."""
    s = states.preprocess_state(np.random.default_rng(bsz), bsz, num_model_step=2)
    s["base_model_stop_flags"][:] = True
    s["base_model_is_block_step"][:] = False
    s["not_need_stop"][:] = runs == "none"  # the op must overwrite it either way
    if runs != "none":
        i = {"first": 0, "last": bsz - 1, "block256": 256 * 256 + 100}[runs]
        s["base_model_stop_flags"][i] = s["batch_drop"][i] = s["stop_flags"][i] = False
        s["seq_lens_encoder"][i] = 0
        s["accept_num"][i] = 0
        s["seq_lens_decoder"][i] = s["step_idx"][i] = 10  # room to roll back
    attrs = preprocess_attrs(2, v1=True)
    want = run_preprocess_ref(s, attrs)
    assert bool(want["not_need_stop"][0]) == (runs != "none")
    t = to_tensors(s, "gpu", host_flag=host_flag)
    ops.draft_model_preprocess(**t, **attrs)
    assert_states_equal(to_numpy(t), want)


def test_asynchronous_error_waits_for_the_next_synchronous_call():
    bad = states.preprocess_state(np.random.default_rng(6), 16, num_model_step=2)
    break_preprocess_request(bad, 3, 99)
    t_bad = to_tensors(bad, "gpu", host_flag=False)
    ops.draft_model_preprocess(**t_bad, **preprocess_attrs(2))  # returns; error stays on device
    assert_unchanged(t_bad, bad)

    good = states.preprocess_state(np.random.default_rng(7), 16, num_model_step=2)
    t_good = to_tensors(good, "gpu")
    with pytest.raises(ops.BadInputError, match="earlier asynchronous call.*request 3: accept_num"):
        ops.draft_model_preprocess(**t_good, **preprocess_attrs(2))
    assert_unchanged(t_good, good)  # the synchronous call changed nothing either
    # Reported once: the next call runs.
    ops.draft_model_preprocess(**t_good, **preprocess_attrs(2))
    assert_states_equal(to_numpy(t_good), run_preprocess_ref(good, preprocess_attrs(2)))


def test_raise_pending_errors_reports_an_asynchronous_failure_once():
    bad = states.preprocess_state(np.random.default_rng(8), 16, num_model_step=2)
    break_preprocess_request(bad, 2, -3)
    t = to_tensors(bad, "gpu", host_flag=False)
    ops.draft_model_preprocess(**t, **preprocess_attrs(2))
    with pytest.raises(ops.BadInputError, match="request 2: accept_num"):
        ops.raise_pending_errors(t["seq_lens_decoder"])
    ops.raise_pending_errors(t["seq_lens_decoder"])  # reported once
    assert_unchanged(t, bad)


def test_asynchronous_mask_update(monkeypatch):
    good = states.mask_state(np.random.default_rng(9), 64)
    want_out, want = run_mask_ref(good)
    monkeypatch.setenv("FASTDEPLOY_MTP_ASYNC_MASK", "1")
    t = to_tensors(good, "gpu")
    out = ops.update_attn_mask_offsets(**t)
    ops.raise_pending_errors(out)
    np.testing.assert_array_equal(out.numpy(), want_out)
    assert_states_equal(to_numpy(t), want)

    bad = states.mask_state(np.random.default_rng(10), 64)
    break_mask_request(bad, 0)
    t = to_tensors(bad, "gpu")
    ops.update_attn_mask_offsets(**t)  # returns; the error waits on the device
    with pytest.raises(ops.BadInputError, match="request 0: seq_lens_this_time"):
        ops.raise_pending_errors(t["mask_rollback"])
    assert_unchanged(t, bad)


def _in_thread(f):
    """Runs f() on a new thread; returns what it returned or raised."""
    import threading

    seen = {}

    def run():
        try:
            seen["value"] = f()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            seen["error"] = e

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(120)
    assert not worker.is_alive()
    return seen


def test_a_first_call_on_a_device_inside_a_capture_asks_for_a_warm_up():
    """A device's first call sets up its error record, which a capture
    forbids: refused with a hint, nothing changed, and the capture can still
    be ended (in a fresh process: this one's device has its record)."""
    import subprocess
    import sys
    from pathlib import Path

    script = """
import numpy as np
from paddle.device.cuda import graphs
from fastdeploy_mtp import ops
from fastdeploy_mtp.harness import states
from helpers import assert_unchanged, preprocess_attrs, to_tensors
ops.load_library()
s = states.preprocess_state(np.random.default_rng(18), 8, num_model_step=2)
t = to_tensors(s, "gpu", host_flag=False)
g = graphs.CUDAGraph()
g.capture_begin()
try:
    ops.draft_model_preprocess(**t, **preprocess_attrs(2))
except ops.BadInputError as e:
    print("REFUSED", e)
finally:
    g.capture_end()
    g.reset()
assert_unchanged(t, s)
print("UNCHANGED")
"""
    here = Path(__file__).resolve().parent
    from helpers import child_env

    r = subprocess.run([sys.executable, "-c", script], cwd=here, env=child_env(str(here)),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "once before capturing" in r.stdout and "UNCHANGED" in r.stdout, r.stdout


def test_a_fresh_thread_captures_and_replays():
    """The error record is the device's, not the thread's: a thread's first
    call may be inside a capture once the device has been used."""
    graphs = pytest.importorskip("paddle.device.cuda.graphs")
    attrs = preprocess_attrs(2)
    s = states.preprocess_state(np.random.default_rng(18), 8, num_model_step=2)
    ops.draft_model_preprocess(**to_tensors(s, "gpu", host_flag=False), **attrs)  # this device's record
    ops.raise_pending_errors(to_tensors({"x": np.zeros(1, np.int32)}, "gpu")["x"])
    t = to_tensors(s, "gpu", host_flag=False)

    def fresh_thread():
        g = graphs.CUDAGraph()
        g.capture_begin()
        try:
            ops.draft_model_preprocess(**t, **attrs)
        finally:
            g.capture_end()
        g.replay()
        ops.raise_pending_errors(t["seq_lens_decoder"])
        g.reset()

    seen = _in_thread(fresh_thread)
    assert "error" not in seen, seen.get("error")
    assert_states_equal(to_numpy(t), run_preprocess_ref(s, attrs))


def _captured_broken_preprocess(seed, bsz, where):
    """A graph captured on this thread of an asynchronous preprocess of a
    state whose request `where` is refused (captured, not run)."""
    graphs = pytest.importorskip("paddle.device.cuda.graphs")
    attrs = preprocess_attrs(3, v1=True)
    s = states.preprocess_state(np.random.default_rng(seed), bsz, num_model_step=3)
    _warm_up(s, states.mask_state(np.random.default_rng(seed + 1), bsz), attrs)
    ops.raise_pending_errors(to_tensors({"x": np.zeros(1, np.int32)}, "gpu")["x"])
    break_preprocess_request(s, where, accept_num=-1)
    t = to_tensors(s, "gpu", host_flag=False)
    g = graphs.CUDAGraph()
    g.capture_begin()
    ops.draft_model_preprocess(**t, **attrs)
    g.capture_end()
    assert_unchanged(t, s)
    return g, s, t, attrs


@pytest.mark.parametrize("bsz", [8, 4096])
def test_a_failure_replayed_on_another_thread_is_raised_there(bsz):
    """Captured on one thread, replayed on another: raise_pending_errors on
    the replaying thread raises the error (once), and nothing changed."""
    g, s, t, _ = _captured_broken_preprocess(40, bsz, bsz - 1)

    def replay():
        g.replay()
        with pytest.raises(ops.BadInputError, match=f"request {bsz - 1}: accept_num"):
            ops.raise_pending_errors(t["seq_lens_decoder"])
        ops.raise_pending_errors(t["seq_lens_decoder"])  # reported once

    seen = _in_thread(replay)
    assert "error" not in seen, seen.get("error")
    assert_unchanged(t, s)
    g.reset()


def test_a_failure_replayed_on_another_thread_stops_its_next_synchronous_call():
    g, s, t, attrs = _captured_broken_preprocess(42, 64, 5)
    good = states.preprocess_state(np.random.default_rng(43), 16, num_model_step=3)

    def replay_then_call():
        g.replay()
        tg = to_tensors(good, "gpu")  # not_need_stop on the host: a synchronous call
        with pytest.raises(ops.BadInputError,
                           match="earlier asynchronous call.*request 5: accept_num"):
            ops.draft_model_preprocess(**tg, **attrs)
        assert_unchanged(tg, good)
        ops.draft_model_preprocess(**tg, **attrs)  # reported once: this one runs
        return to_numpy(tg)

    seen = _in_thread(replay_then_call)
    assert "error" not in seen, seen.get("error")
    assert_states_equal(seen["value"], run_preprocess_ref(good, attrs))
    assert_unchanged(t, s)
    g.reset()


def test_a_failure_replayed_on_another_thread_is_seen_by_this_one():
    """The replaying thread ends without asking; the capturing thread's next
    raise_pending_errors raises it."""
    g, s, t, _ = _captured_broken_preprocess(44, 300, 123)
    seen = _in_thread(g.replay)
    assert "error" not in seen, seen.get("error")
    with pytest.raises(ops.BadInputError, match="request 123: accept_num"):
        ops.raise_pending_errors(t["seq_lens_decoder"])
    assert_unchanged(t, s)
    g.reset()


def _warm_up(s, m, attrs):
    """The thread's error record and this stream's grid scratch, made before a
    capture (on copies, so the captured tensors still hold their states)."""
    import os

    ops.draft_model_preprocess(**to_tensors(s, "gpu", host_flag=False), **attrs)
    os.environ["FASTDEPLOY_MTP_ASYNC_MASK"] = "1"
    try:
        ops.update_attn_mask_offsets(**to_tensors(m, "gpu"))
    finally:
        del os.environ["FASTDEPLOY_MTP_ASYNC_MASK"]


@pytest.mark.parametrize("bsz", [64, 128, 512, 1025, 4096, 8192])
def test_captured_step_replays_like_the_reference(bsz):
    """Preprocess and a mask call captured in one graph, big enough for a
    cluster (64, 128, 512) or the grid path: the replay equals the reference."""
    graphs = pytest.importorskip("paddle.device.cuda.graphs")
    attrs = preprocess_attrs(3, v1=True)
    s = states.preprocess_state(np.random.default_rng(bsz), bsz, num_model_step=3)
    m = states.mask_state(np.random.default_rng(bsz + 1), bsz)
    _warm_up(s, m, attrs)
    ops.raise_pending_errors(to_tensors({"x": np.zeros(1, np.int32)}, "gpu")["x"])
    t, tm = to_tensors(s, "gpu", host_flag=False), to_tensors(m, "gpu")
    g = graphs.CUDAGraph()
    g.capture_begin()
    ops.draft_model_preprocess(**t, **attrs)
    out = ops.update_attn_mask_offsets(**tm)
    g.capture_end()
    assert_unchanged(t, s)  # captured, not run
    g.replay()
    ops.raise_pending_errors(t["seq_lens_decoder"])
    assert_states_equal(to_numpy(t), run_preprocess_ref(s, attrs))
    want_out, want_m = run_mask_ref(m)
    np.testing.assert_array_equal(out.numpy(), want_out)
    assert_states_equal(to_numpy(tm), want_m)
    g.reset()


@pytest.mark.parametrize("where", [0, 4095])
def test_a_captured_failure_changes_nothing_and_surfaces_later(where):
    graphs = pytest.importorskip("paddle.device.cuda.graphs")
    attrs = preprocess_attrs(3, v1=True)
    s = states.preprocess_state(np.random.default_rng(30), 4096, num_model_step=3)
    m = states.mask_state(np.random.default_rng(31), 4096)
    _warm_up(s, m, attrs)
    break_preprocess_request(s, where, accept_num=-1)
    t = to_tensors(s, "gpu", host_flag=False)
    g = graphs.CUDAGraph()
    g.capture_begin()
    ops.draft_model_preprocess(**t, **attrs)
    g.capture_end()
    g.replay()
    good = states.preprocess_state(np.random.default_rng(32), 16, num_model_step=3)
    tg = to_tensors(good, "gpu")  # not_need_stop on the host: a synchronous call
    with pytest.raises(ops.BadInputError, match=f"request {where}: accept_num"):
        ops.draft_model_preprocess(**tg, **attrs)
    assert_unchanged(tg, good)  # the synchronous call changed nothing either
    assert_unchanged(t, s)
    ops.raise_pending_errors(t["seq_lens_decoder"])  # reported once: nothing pending now
    g.reset()


def test_a_thread_with_several_failing_requests_reports_its_first():
    """Past the grid's resident threads (at most 1024 blocks of 256) a thread
    walks several requests: with every request from 7 on refused, the one
    reported is 7."""
    bsz = 1024 * 256 + 64
    k = 2
    i32, i64 = np.int32, np.int64
    s = {  # every request decodes with one accepted token; built whole, not per request
        "draft_tokens": np.zeros((bsz, 4), i64), "input_ids": np.zeros((bsz, 4), i64),
        "stop_flags": np.zeros(bsz, bool), "seq_lens_this_time": np.ones(bsz, i32),
        "seq_lens_encoder": np.zeros(bsz, i32), "seq_lens_decoder": np.full(bsz, 10, i32),
        "step_idx": np.full(bsz, 10, i64), "not_need_stop": np.zeros(1, bool),
        "is_block_step": np.zeros(bsz, bool), "batch_drop": np.zeros(bsz, bool),
        "pre_ids": np.zeros((bsz, 8), i64), "mask_rollback": np.zeros(bsz, i32),
        "accept_tokens": np.ones((bsz, 4), i64), "accept_num": np.ones(bsz, i32),
        "base_model_seq_lens_this_time": np.ones(bsz, i32),
        "base_model_seq_lens_encoder": np.zeros(bsz, i32),
        "base_model_seq_lens_decoder": np.full(bsz, 12, i32),
        "base_model_step_idx": np.full(bsz, 3, i64),
        "base_model_stop_flags": np.zeros(bsz, bool),
        "base_model_is_block_step": np.zeros(bsz, bool),
        "base_model_draft_tokens": np.zeros((bsz, 3), i64),
    }
    s["accept_num"][7:] = -1
    t = to_tensors(s, "gpu")
    with pytest.raises(ops.BadInputError, match="request 7: accept_num"):
        ops.draft_model_preprocess(**t, **preprocess_attrs(k, v1=True))
    assert_unchanged(t, s)


@pytest.mark.parametrize("form", ["corrected_pr5245", "corrected_pr5738", "corrected_pr6403"])
def test_a_corrected_form_s_captured_step_is_timed_beside_the_exact_form_s(form):
    """bench-gpu's captured-step table of a corrected form replays the exact
    form of the version it corrects on the same state, and gives each row
    the two steps' ratio; every replayed call of both was valid."""
    from fastdeploy_mtp.bench import gpu as gpu_bench

    lines = []
    gpu_bench.graph_table([1, 300], steps_in_graph=2, replays=2, rounds=1,
                          print_fn=lines.append, form=form)
    exact = form.removeprefix("corrected_")
    header = lines[2].split("|")
    assert header[-3].strip() == f"{exact} form's step", lines
    rows = [line.split("|") for line in lines[4:]]
    assert [int(r[1]) for r in rows] == [1, 300], lines
    for r in rows:
        ours, exact_step, ratio = float(r[3]), float(r[-3]), float(r[-2])
        assert r[10].strip() == "yes", lines
        assert ours > 0 and exact_step > 0
        # The row prints both steps to 0.1 us (each off by up to 0.05) and the
        # ratio of the unrounded ones to 0.01 (off by up to 0.005). The true
        # ratio lies furthest from ours / exact_step at (ours + 0.05) /
        # (exact_step - 0.05), which differs from it by
        # 0.05 * (1 + ours / exact_step) / (exact_step - 0.05).
        printed = ours / exact_step
        bound = 0.005 + 0.05 * (1 + printed) / (exact_step - 0.05)
        assert abs(ratio - printed) <= bound + 1e-9, lines
