"""A mask request of more than 2^30 tokens: token j's entry 2 * j + 1 of
attn_mask_offsets no longer fits int32, and computed in int32 it wrapped (a
write before the output, or undefined behaviour the compiler may turn into
one).

On the CPU, tests/huge_request.cc runs such a request through the CPU driver
(mtp_cpu.h, the code the CPU op runs) built with the op's own flags and the
undefined-behaviour sanitizer, over virtual buffers with inaccessible pages
around them: any wrap, or any write outside a tensor, fails the run. On a GPU
the op itself runs a request of 2^31 - 2 tokens in each branch (up to about
26 GiB of the GPU's memory and 40 GiB of the host's).

The CPU harness's resident set size reads about 12.7 GB: each of the many
mappings of one 64 MiB memory file counts its pages again. The memory it takes
is that file per tensor (docs/development.md, "Set-up", gives the figures).
"""

import subprocess

import numpy as np
import pytest

from fastdeploy_mtp import ops
from helpers import gpu_available
from cpp_harness import compile_cpu_harness

N = 2**30 + 3          # tokens of the one request
DECODER = 7            # seq_lens_decoder of the vision and decode requests
CURSOR, ROLLBACK = 100, 3


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return compile_cpu_harness("huge_request.cc", tmp_path_factory.mktemp("huge"))


# The harness's memory files hold 2^24 entries each, so out[1] shares its
# memory with every 2^23rd token's end entry and shows the last one written.
OUT1_TOKEN = (N - 1) // 2**23 * 2**23

# Per branch: out[1] as the harness sees it, out[2n-2], out[2n-1], the cursor
# after, decode_states' last column.
EXPECTED = {
    # attn_mask_offsets_full's row holds 0 but for its last column (41; the
    # harness's memory file repeats, so a few others read 41 too).
    "prompt": (0 + 1, 0, 41 + 1, CURSOR, 0),
    "vision": (DECODER + N, 0, DECODER + N, CURSOR, 2),
    "decode": (CURSOR - ROLLBACK + 1 + OUT1_TOKEN, 0, CURSOR - ROLLBACK + N,
               CURSOR - ROLLBACK + N, 0),
}


@pytest.mark.parametrize("branch", sorted(EXPECTED))
def test_the_cpu_driver_writes_a_huge_request_in_bounds(harness, branch):
    r = subprocess.run([str(harness), branch], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    code, q, n, *got = map(int, r.stdout.split())
    assert (code, q, n) == (0, 0, N)
    assert tuple(got) == EXPECTED[branch]


# On the GPU the request runs to the end of int32: 2^31 - 2 tokens (a vision
# request needs S > 0 and S + n <= 2^31 - 1), so that a lane's or a block's
# stride past its last token would wrap int32 too (about 26 GiB of the GPU's
# memory for a prompt).
GPU_N = 2**31 - 2
GPU_DECODER = 1
GPU_CURSOR = 4  # less ROLLBACK: 1, so the last decode token ends at 2^31 - 1


def _gpu_state(branch):
    i32 = np.int32
    s = {
        "ids_remove_padding": np.zeros(GPU_N, np.bool_),  # only its length is read
        "seq_lens_this_time": np.array([GPU_N], i32),
        "seq_lens_encoder": np.array([0 if branch == "decode" else 5], i32),
        "seq_lens_decoder": np.array([0 if branch == "prompt" else GPU_DECODER], i32),
        "cu_seqlens_q": np.array([0, GPU_N], i32),
        "attn_mask_offsets_full": np.zeros((1, 1), i32),
        "attn_mask_offsets_decoder": np.array([GPU_CURSOR], i32),
        "is_block_step": np.zeros(1, np.bool_),
        "decode_states": np.array([[2 if branch == "vision" else 0]], i32),
        "mask_rollback": np.array([ROLLBACK], i32),
    }
    if branch == "prompt":
        s["attn_mask_offsets_full"] = np.arange(GPU_N, dtype=i32)[None, :]
    if branch == "decode":
        s["decode_states"] = np.full((1, GPU_N), 5, i32)
    return s


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs Paddle with CUDA and a GPU")
@pytest.mark.parametrize("branch", sorted(EXPECTED))
def test_the_gpu_op_writes_a_huge_request_in_bounds(branch):
    import paddle

    s = _gpu_state(branch)
    t = {k: paddle.to_tensor(v, place=paddle.CUDAPlace(0)) for k, v in s.items()}
    del s["ids_remove_padding"], s["attn_mask_offsets_full"]
    out = ops.update_attn_mask_offsets(**t).numpy()
    assert out.shape == (2 * GPU_N,)
    assert not out[0::2].any()
    odd = out[1::2]
    first = {"prompt": 1, "vision": GPU_DECODER + GPU_N,
             "decode": GPU_CURSOR - ROLLBACK + 1}[branch]
    last = first if branch == "vision" else first + GPU_N - 1
    assert odd[0] == first and odd[-1] == last
    if branch != "prompt":
        assert last == 2**31 - 1  # the largest end entry there is
    if branch == "vision":
        assert (odd == first).all()
    else:  # a prompt's offsets j + 1, a decode's cursor + 1 + j: one up a token
        assert (np.diff(odd) == 1).all()
    del out, odd
    cursor = int(t["attn_mask_offsets_decoder"].numpy()[0])
    assert cursor == (GPU_CURSOR - ROLLBACK + GPU_N if branch == "decode" else GPU_CURSOR)
    states = t["decode_states"].numpy()
    if branch == "decode":
        assert not states.any() and t["mask_rollback"].numpy()[0] == 0
    else:
        np.testing.assert_array_equal(states, s["decode_states"])
