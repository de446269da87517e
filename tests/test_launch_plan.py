"""The GPU launch plan on the CPU: custom_ops/launch_rules.h, the functions
the CUDA launcher calls to shape each launch, run by tests/launch_rules.cc
over described devices (an sm_90 device with room for clusters of 16, one
with room for 8 only, one without clusters, grids of few resident blocks).

Each case sits at a threshold of docs/contract.md ("GPU: errors, streams,
graphs, devices"): the last batch of one shape and the first of the next,
so a bound moved by one, or a rule dropped, fails here before any GPU runs.
"""

import subprocess

import pytest

from helpers import compile_cpu_harness

# Devices: (clusters, resident grid blocks, largest cluster that fits).
H200 = (1, 264, 16)       # sm_90, room for non-portable clusters
PORTABLE = (1, 264, 8)    # sm_90, clusters of 8 blocks at most
OLD = (0, 264, 0)         # before sm_90: no clusters, no programmatic launch


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    exe = compile_cpu_harness("launch_rules.cc", tmp_path_factory.mktemp("plan"))

    def ask(*questions):
        text = "".join(" ".join(map(str, q)) + "\n" for q in questions)
        r = subprocess.run([str(exe)], input=text, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
        return [tuple(int(x) if x.lstrip("-").isdigit() else x for x in line.split())
                for line in r.stdout.splitlines()]

    return ask


def _pre(bsz, device=H200, scratch=1):
    clusters, resident, blocks = device
    return ("pre", bsz, scratch, clusters, resident, blocks)


def _mask(bsz, device=H200, tokens=None, cols=1, lanes=0, scratch=1):
    clusters, resident, blocks = device
    return ("mask", bsz if tokens is None else tokens, cols, bsz, scratch, clusters, resident,
            blocks, lanes)


# (question, answer): answer = scope, blocks, threads, programmatic launch
# [, lanes a request, long prompts shared].
PREPROCESS = [
    # sm_90: one block up to 128 requests, a cluster of up to 16 blocks up to
    # 2048, the grid past them (blocks of 128 threads).
    (_pre(1), ("block", 1, 32, 1)),
    (_pre(128), ("block", 1, 128, 1)),
    (_pre(129), ("cluster", 3, 64, 1)),         # blocks no thinner than 64 threads
    (_pre(1024), ("cluster", 16, 64, 1)),
    (_pre(1025), ("cluster", 11, 96, 1)),
    (_pre(2048), ("cluster", 16, 128, 1)),
    (_pre(2049), ("grid", 17, 128, 1)),
    # no room for 16 blocks: clusters of 8 where they hold the batch
    (_pre(1024, PORTABLE), ("cluster", 8, 128, 1)),
    (_pre(1025, PORTABLE), ("grid", 9, 128, 1)),
    # without clusters: one block up to 256 requests, then the grid
    (_pre(256, OLD), ("block", 1, 256, 0)),
    (_pre(257, OLD), ("grid", 3, 128, 0)),
    # no scratch (a stream first seen inside a capture): one block of at most 512 threads
    (_pre(2049, scratch=0), ("block", 1, 512, 1)),
    (_pre(257, OLD, scratch=0), ("block", 1, 288, 0)),
    # the grid never has more blocks than fit at once, nor than the scratch's 1024 slots
    (_pre(100000, (0, 5, 0)), ("grid", 5, 128, 0)),
    (_pre(10**7, (0, 5000, 0)), ("grid", 1024, 128, 0)),
    (_pre(300, (0, 1, 0)), ("block", 1, 320, 0)),  # a grid of one block is the one block
    (_pre(300, (0, -1, 0)), ("block", 1, 320, 0)),  # no cooperative launches
]

MASK = [
    # sm_90: one block up to 16 requests at a warp a request, 32 at half a
    # warp; a cluster up to 256 at a warp, 512 at half; the grid past them: a
    # warp a request up to 1024, half a warp up to 2048, 8 lanes past.
    (_mask(16), ("block", 1, 512, 1, 32, 0)),
    (_mask(17), ("block", 1, 288, 1, 16, 0)),
    (_mask(32), ("block", 1, 512, 1, 16, 0)),
    (_mask(33), ("cluster", 5, 256, 1, 32, 0)),
    (_mask(256), ("cluster", 16, 512, 1, 32, 0)),
    (_mask(257), ("cluster", 15, 288, 1, 16, 0)),
    (_mask(512), ("cluster", 16, 512, 1, 16, 0)),
    (_mask(513), ("grid", 65, 256, 1, 32, 0)),
    (_mask(1024), ("grid", 128, 256, 1, 32, 0)),
    (_mask(1025), ("grid", 65, 256, 1, 16, 0)),
    (_mask(2048), ("grid", 128, 256, 1, 16, 0)),
    (_mask(2049), ("grid", 65, 256, 1, 8, 0)),
    # past 2048 warps' worth of groups a group takes several requests in turn
    (_mask(8192), ("grid", 256, 256, 1, 8, 0)),
    (_mask(100000), ("grid", 256, 256, 1, 8, 0)),
    # clusters of 8 only: 8 blocks of 512 threads where they hold the batch, else the grid
    (_mask(128, PORTABLE), ("cluster", 8, 512, 1, 32, 0)),
    (_mask(129, PORTABLE), ("grid", 17, 256, 1, 32, 0)),
    # without clusters: one block up to 32 requests at a warp, 64 at half a warp
    (_mask(32, OLD), ("block", 1, 1024, 0, 32, 0)),
    (_mask(33, OLD), ("block", 1, 544, 0, 16, 0)),
    (_mask(64, OLD), ("block", 1, 1024, 0, 16, 0)),
    (_mask(65, OLD), ("grid", 9, 256, 0, 32, 0)),
    # a long packed batch: its zeroing (16-byte stores) asks for more threads
    (_mask(1, tokens=1024), ("block", 1, 512, 1, 32, 0)),
    (_mask(1, tokens=1025), ("cluster", 3, 256, 1, 32, 0)),
    # long prompts shared out where attn_mask_offsets_full has more than 64
    # columns and the batch more than 64 tokens; one such request then runs
    # in one block, not a cluster of blocks that would only zero
    (_mask(1, tokens=2000, cols=4096), ("block", 1, 256, 1, 32, 1)),
    (_mask(1, tokens=65, cols=65), ("block", 1, 64, 1, 32, 1)),
    (_mask(1, tokens=64, cols=65), ("block", 1, 32, 1, 32, 0)),
    (_mask(1, tokens=65, cols=64), ("block", 1, 64, 1, 32, 0)),
    (_mask(16, tokens=16 * 2000, cols=4096), ("cluster", 16, 256, 1, 32, 1)),
    (_mask(17, tokens=17 * 2000, cols=4096), ("grid", 67, 256, 1, 16, 1)),  # past the cap
    # no scratch: one block of at most 1024 threads
    (_mask(513, scratch=0), ("block", 1, 1024, 1, 32, 0)),
    # lanes chosen by the shape: 8 lanes never form a cluster; lanes the
    # kernels are not built for are refused (the launcher's "invalid value")
    (_mask(100, lanes=8), ("block", 1, 800, 1, 8, 0)),
    (_mask(200, lanes=8), ("grid", 7, 256, 1, 8, 0)),
    (_mask(100, lanes=16), ("cluster", 7, 256, 1, 16, 0)),
    (_mask(10, lanes=4), ("none",)),
    (_mask(10, lanes=2), ("none",)),
]


@pytest.mark.parametrize("question,answer", PREPROCESS, ids=[str(q[1:]) for q, _ in PREPROCESS])
def test_preprocess_launch(plan, question, answer):
    assert plan(question) == [answer]


@pytest.mark.parametrize("question,answer", MASK, ids=[str(q[1:]) for q, _ in MASK])
def test_mask_launch(plan, question, answer):
    assert plan(question) == [answer]


def test_every_launch_holds_its_work(plan):
    """Across batch sizes: a launch's threads cover every request (or, past
    the groups' cap, run them in turns), blocks are whole warps within the
    kernel's bound, a grid within the scratch's slots and a cluster within 16
    blocks."""
    sizes = sorted({n + d for n in (1, 2, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
                    for d in (-1, 0, 1) if n + d >= 1})
    for device in (H200, PORTABLE, OLD):
        for bsz, (scope, blocks, threads, overlap) in zip(
                sizes, plan(*[_pre(n, device) for n in sizes])):
            assert threads % 32 == 0 and 32 <= threads <= 512, (bsz, device)
            assert overlap == device[0]
            if scope == "block":
                assert blocks == 1 and (threads >= bsz or threads == 512)
            else:
                assert blocks * threads >= bsz and blocks >= 2
                assert blocks <= (16 if scope == "cluster" else 1024)
                assert scope != "cluster" or device[0] == 1
        for bsz, answer in zip(sizes, plan(*[_mask(n, device) for n in sizes])):
            scope, blocks, threads, overlap, lanes, share = answer
            assert threads % 32 == 0 and 32 <= threads <= 1024, (bsz, device)
            assert blocks * threads >= min(bsz, 2048 * 32 // lanes) * lanes, (bsz, device)
            assert scope != "cluster" or (device[0] == 1 and blocks <= device[2])
