"""The GPU launch plan on the CPU: custom_ops/launch_rules.h, the functions
the CUDA launcher calls to shape each launch, run by tests/launch_rules.cc
over described devices (an sm_90 device with room for clusters of 16, one
with room for 8 only, one without clusters, grids of few resident blocks).

Each case sits at a threshold of docs/contract.md ("GPU: errors, streams,
graphs, devices"): the last batch of one shape and the first of the next,
so a bound moved by one, or a rule dropped, fails here before any GPU runs.
Then every rule over a grid of described devices (clusters of 0..16 blocks
fitting, resident blocks of several SM counts): each plan ends after a
bounded number of questions to the device and is a launch the device can run.
"""

import subprocess

import pytest

from cpp_harness import compile_cpu_harness

# Every question to the harness answers within this: a rule that does not
# terminate fails its test, not the suite by hanging it.
HARNESS_TIMEOUT_S = 30

# Devices: (clusters, resident grid blocks, largest cluster that fits).
H200 = (1, 264, 16)       # sm_90, room for non-portable clusters
PORTABLE = (1, 264, 8)    # sm_90, clusters of 8 blocks at most
OLD = (0, 264, 0)         # before sm_90: no clusters, no programmatic launch


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    exe = compile_cpu_harness("launch_rules.cc", tmp_path_factory.mktemp("plan"))

    def ask(*questions):
        text = "".join(" ".join(map(str, q)) + "\n" for q in questions)
        try:
            r = subprocess.run([str(exe)], input=text, capture_output=True, text=True,
                               timeout=HARNESS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"launch_rules gave no answer to {len(questions)} questions within "
                        f"{HARNESS_TIMEOUT_S} s: a rule that does not terminate")
        assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
        return [_answer(line) for line in r.stdout.splitlines()]

    return ask


def _answer(line):
    """The plan as a tuple; after `asks`, (plan, cluster sizes asked, resident asks)."""
    plan, *asked = line.split("|")
    answer = tuple(int(x) if x.lstrip("-").isdigit() else x for x in plan.split())
    if not asked:
        return answer
    fits, resident = asked[0].split(), asked[1].split()
    assert fits[0] == "fits" and resident[0] == "resident", line
    return answer, tuple(map(int, fits[1:])), int(resident[1])


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


# -- every rule over a grid of described devices ------------------------------------------

# The largest cluster that fits (0: none fits; 1 cannot be a cluster), blocks
# resident on an SM at once and SMs; -1: no cooperative launch.
CLUSTER_FITS = range(0, 17)
RESIDENT = sorted({per_sm * sms for per_sm in (1, 2, 16) for sms in (1, 3, 132)} | {-1, 0})
BATCHES = (1, 2, 16, 17, 33, 65, 129, 257, 513, 600, 1025, 2049, 4097, 100000)


def _grid_devices():
    for clusters in (0, 1):
        for fits in CLUSTER_FITS if clusters else (0, 16):  # no clusters: nothing to fit
            for resident in RESIDENT:
                yield clusters, resident, fits


def _asked_within_bounds(question, fits_asked, resident_asked, clusters):
    """A plan asks the device at most two cluster sizes (the one it wants, then
    the portable size), each a size a cluster can have, and its resident
    blocks at most once: a rule's work is bounded whatever the device says."""
    assert len(fits_asked) <= 2, (question, fits_asked)
    assert all(2 <= b <= 16 for b in fits_asked), (question, fits_asked)
    assert len(fits_asked) < 2 or fits_asked[1] <= 8, (question, fits_asked)
    assert clusters or not fits_asked, (question, fits_asked)
    assert resident_asked <= 1, (question, resident_asked)


def _within_device(question, scope, blocks, threads, max_threads, clusters, resident, fits,
                   scratch):
    assert threads % 32 == 0 and 32 <= threads <= max_threads, question
    if scope == "block":
        assert blocks == 1, question
    elif scope == "cluster":
        assert clusters and 2 <= blocks <= min(fits, 16), question
    else:
        assert scope == "grid", question
        assert scratch and 2 <= blocks <= min(resident, 1024), question


def test_every_preprocess_rule_ends_within_any_device(plan):
    """Over every described device (sm_90 or not, clusters of 1..16 blocks
    fitting, any resident blocks): the plan ends, asks the device a bounded
    number of questions, and is a launch the device can run: a cluster no
    bigger than fits and holding every request, a grid no bigger than is
    resident (and only with scratch), whole warps within the kernel's 512
    threads. A retry that never shrinks its cluster would loop on a device
    whose clusters fit fewer than 8 blocks."""
    questions = [("asks", "pre", bsz, scratch, clusters, resident, fits)
                 for clusters, resident, fits in _grid_devices()
                 for scratch in (0, 1) for bsz in BATCHES]
    answers = plan(*questions)
    assert len(answers) == len(questions)
    for q, ((scope, blocks, threads, overlap), fits_asked, resident_asked) in zip(questions,
                                                                                 answers):
        _, _, bsz, scratch, clusters, resident, fits = q
        _asked_within_bounds(q, fits_asked, resident_asked, clusters)
        _within_device(q, scope, blocks, threads, 512, clusters, resident, fits, scratch)
        assert overlap == clusters, q
        if scope == "block":
            assert threads == min((bsz + 31) // 32 * 32, 512), q
        if scope == "cluster":
            assert blocks * threads >= bsz, q


def test_every_mask_rule_ends_within_any_device(plan):
    """The same for update_attn_mask_offsets, its lanes chosen or asked for,
    short and long prompts: lanes the kernels are built for, a cluster only of
    16 or 32 lanes a request and holding the work."""
    questions = [("asks", "mask", tokens, cols, bsz, scratch, clusters, resident, fits, lanes)
                 for clusters, resident, fits in _grid_devices()
                 for scratch in (0, 1) for bsz in BATCHES
                 for tokens, cols in ((bsz, 1), (bsz * 70, 4096)) for lanes in (0, 16)]
    answers = plan(*questions)
    assert len(answers) == len(questions)
    for q, (answer, fits_asked, resident_asked) in zip(questions, answers):
        _, _, tokens, cols, bsz, scratch, clusters, resident, fits, asked_lanes = q
        scope, blocks, threads, overlap, lanes, share = answer
        _asked_within_bounds(q, fits_asked, resident_asked, clusters)
        _within_device(q, scope, blocks, threads, 1024, clusters, resident, fits, scratch)
        assert overlap == clusters and lanes in (32, 16, 8), q
        assert asked_lanes in (0, lanes), q
        assert share == int(cols > 64 and tokens > 64), q
        if scope == "cluster":
            assert lanes >= 16, q
            assert blocks * threads >= min(bsz, 2048 * 32 // lanes) * lanes, q


def test_a_device_whose_clusters_fit_fewer_than_8_blocks_gets_the_grid(plan):
    """Clusters of 16 and then of 8 do not fit: the plan asks about each once
    and takes the grid (a retry at 8 that does not stop there never ends)."""
    assert plan(("asks", "pre", 600, 1, 1, 264, 4)) == [(("grid", 5, 128, 1), (10, 7), 1)]
    assert plan(("asks", "pre", 600, 0, 1, 264, 4)) == [(("block", 1, 512, 1), (10, 7), 0)]
