"""Tensors on a GPU that is not the thread's current CUDA device.

A tensor-parallel rank keeps its draft state on its own GPU, gpu:1 say, while
the thread's current device may still be 0: every CUDA call of an op (the
launch, the occupancy and cluster queries, the first call's allocations) acts
on the current device unless the op switches to the tensors' own. Each op, at
one block, a cluster and a grid, synchronous and asynchronous, must give the
reference's result there, leave the caller's current device as it was, keep
each device's pending errors to itself, and refuse tensors split across the
two GPUs. Skipped on a machine with fewer than two GPUs.
"""

import ctypes

import numpy as np
import paddle
import pytest

from fastdeploy_mtp import ops
from fastdeploy_mtp.harness import states
from helpers import (assert_states_equal, assert_unchanged, gpu_available, preprocess_attrs,
                     run_mask_ref, run_preprocess_ref, to_numpy, to_tensors)
from case_states import break_mask_request, break_preprocess_request


def _two_gpus() -> bool:
    return gpu_available() and paddle.device.cuda.device_count() >= 2


pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not _two_gpus(), reason="needs Paddle with CUDA and two GPUs")]

# One block, a thread-block cluster (sm_90) and a cooperative grid, for both ops.
SIZES = [5, 300, 3000]
# The two GPUs: each is in turn the current device while the tensors are on the other.
A, B = 0, 1
SWAPS = [(A, B), (B, A)]


def _cuda_runtime():
    """The CUDA runtime Paddle has loaded (found by its soname), to set and read
    the thread's current device around a call."""
    for name in ("libcudart.so.12", "libcudart.so.13", "libcudart.so.11.0", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    pytest.skip("no CUDA runtime library to set the current device with")


def current_device() -> int:
    d = ctypes.c_int(-1)
    assert _cuda_runtime().cudaGetDevice(ctypes.byref(d)) == 0
    return d.value


def make_current(device: int) -> None:
    assert _cuda_runtime().cudaSetDevice(device) == 0
    assert current_device() == device


def on_gpu(state, index, host_flag=True):
    """Tensors of a numpy state on gpu:`index`; not_need_stop on the CPU
    unless host_flag is False."""
    return to_tensors(state, f"gpu:{index}", host_flag)


@pytest.fixture(autouse=True)
def _restore_current_device():
    before = current_device()
    yield
    make_current(before)


@pytest.mark.parametrize("bsz", SIZES)
@pytest.mark.parametrize("current, tensors_on", SWAPS)
@pytest.mark.parametrize("host_flag", [True, False], ids=["sync", "async"])
def test_preprocess_on_the_other_gpu(bsz, current, tensors_on, host_flag):
    k = 3
    attrs = preprocess_attrs(k, v1=True)
    s = states.preprocess_state(np.random.default_rng(bsz + 10 * current), bsz, num_model_step=k)
    t = on_gpu(s, tensors_on, host_flag)
    make_current(current)
    ops.draft_model_preprocess(**t, **attrs)
    ops.raise_pending_errors(t["seq_lens_decoder"])
    assert current_device() == current
    assert_states_equal(to_numpy(t), run_preprocess_ref(s, attrs))


@pytest.mark.parametrize("bsz", SIZES)
@pytest.mark.parametrize("current, tensors_on", SWAPS)
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_mask_on_the_other_gpu(bsz, current, tensors_on, asynchronous, monkeypatch):
    if asynchronous:
        monkeypatch.setenv("FASTDEPLOY_MTP_ASYNC_MASK", "1")
    m = states.mask_state(np.random.default_rng(bsz + 10 * current), bsz)
    t = on_gpu(m, tensors_on)
    make_current(current)
    out = ops.update_attn_mask_offsets(**t)
    ops.raise_pending_errors(out)
    assert current_device() == current
    assert out.place.gpu_device_id() == tensors_on
    want_out, want = run_mask_ref(m)
    np.testing.assert_array_equal(out.numpy(), want_out)
    assert_states_equal(to_numpy(t), want)


@pytest.mark.parametrize("bsz", SIZES)
def test_a_refusal_on_the_other_gpu_changes_nothing(bsz):
    k = 2
    s = states.preprocess_state(np.random.default_rng(bsz), bsz, num_model_step=k)
    break_preprocess_request(s, bsz - 1, -1)
    m = states.mask_state(np.random.default_rng(bsz + 1), bsz)
    break_mask_request(m, bsz // 2)
    t, tm = on_gpu(s, B), on_gpu(m, B)
    make_current(A)
    with pytest.raises(ops.BadInputError, match=f"request {bsz - 1}: accept_num"):
        ops.draft_model_preprocess(**t, **preprocess_attrs(k))
    with pytest.raises(ops.BadInputError, match=f"request {bsz // 2}: seq_lens_this_time"):
        ops.update_attn_mask_offsets(**tm)
    assert current_device() == A
    assert_unchanged(t, s)
    assert_unchanged(tm, m)


@pytest.mark.parametrize("bsz", SIZES)
def test_an_asynchronous_failure_stays_with_its_gpu(bsz):
    """An asynchronous call on gpu:1 that fails leaves its error on gpu:1: a
    call on gpu:0 runs, and gpu:1's next check raises it, once."""
    k = 2
    attrs = preprocess_attrs(k)
    bad = states.preprocess_state(np.random.default_rng(bsz), bsz, num_model_step=k)
    break_preprocess_request(bad, 0, -1)
    t_bad = on_gpu(bad, B, host_flag=False)
    make_current(A)
    ops.draft_model_preprocess(**t_bad, **attrs)  # returns; the error waits on gpu:1

    good = states.preprocess_state(np.random.default_rng(bsz + 1), bsz, num_model_step=k)
    t_good = on_gpu(good, A)
    ops.draft_model_preprocess(**t_good, **attrs)
    assert_states_equal(to_numpy(t_good), run_preprocess_ref(good, attrs))

    with pytest.raises(ops.BadInputError, match="request 0: accept_num"):
        ops.raise_pending_errors(t_bad["seq_lens_decoder"])
    ops.raise_pending_errors(t_bad["seq_lens_decoder"])  # reported once
    assert current_device() == A
    assert_unchanged(t_bad, bad)


def test_tensors_split_across_two_gpus_are_refused():
    s = states.preprocess_state(np.random.default_rng(3), 8, num_model_step=2)
    t = on_gpu(s, B)
    t["pre_ids"] = on_gpu({"pre_ids": s["pre_ids"]}, A)["pre_ids"]
    with pytest.raises(ops.BadInputError,
                       match=f"one device: pre_ids is on gpu:{A}, the others on gpu:{B}"):
        ops.draft_model_preprocess(**t, **preprocess_attrs(2))
    assert_unchanged(t, s)

    t = on_gpu(s, B, host_flag=False)
    t["not_need_stop"] = on_gpu({"not_need_stop": s["not_need_stop"]}, A,
                                host_flag=False)["not_need_stop"]
    with pytest.raises(ops.BadInputError, match=f"not_need_stop must be on the CPU or on gpu:{B}"):
        ops.draft_model_preprocess(**t, **preprocess_attrs(2))
    assert_unchanged(t, s)

    m = states.mask_state(np.random.default_rng(4), 8)
    tm = on_gpu(m, A)
    tm["mask_rollback"] = on_gpu({"mask_rollback": m["mask_rollback"]}, B)["mask_rollback"]
    with pytest.raises(ops.BadInputError, match=f"one device: mask_rollback is on gpu:{B}"):
        ops.update_attn_mask_offsets(**tm)
    assert_unchanged(tm, m)
