"""The mutation tool's own checks (tests/mutate.py), without building or
running a mutant: every planted bug still applies to today's sources, so a
refactor cannot silently retire one, and a mutant's verdict says how it died.
"""

import re
from pathlib import Path

import pytest

import mutate
from fastdeploy_mtp.signature import FORMS

NAMES = [m.name for m in mutate.MUTATIONS]


def test_mutation_names_are_unique():
    assert len(NAMES) == len(set(NAMES)), sorted(n for n in NAMES if NAMES.count(n) > 1)


@pytest.mark.parametrize("m", mutate.MUTATIONS, ids=NAMES)
def test_every_mutation_applies_to_todays_sources(m):
    """Its original text stands where it says (once, or at its nth place), and
    applying it changes the file: a stale mutation is a bug nobody tests for
    any more."""
    assert (mutate.REPO / m.path).is_file(), m.path
    assert mutate.applies(m), f"{m.path}: the original text of {m.name!r} is not there"
    assert m.old != m.new, m.name


def in_branch(text: str, at: int, opening: str) -> bool:
    """Whether position `at` of a C++ source lies inside the last `opening`
    directive before it (up to its #else or #endif)."""
    opened = text.rfind(opening, 0, at)
    if opened < 0:
        return False
    ends = [text.find(d, opened) for d in ("#else", "#endif")]
    return at < min(e for e in ends if e >= 0)


def in_cuda_branch(text: str, at: int) -> bool:
    """Code only a CUDA build compiles."""
    return in_branch(text, at, "#ifdef PADDLE_WITH_CUDA")


# Code only a build against Paddle 2 compiles: the GPU machine's Paddle
# (paddlepaddle-gpu 2.6.2), never CI's Paddle 3.
PADDLE2_ONLY = "#if !defined(FASTDEPLOY_MTP_PADDLE_MAJOR) || FASTDEPLOY_MTP_PADDLE_MAJOR < 3"


def in_paddle2_branch(text: str, at: int) -> bool:
    return in_branch(text, at, PADDLE2_ONLY)


@pytest.mark.parametrize("m", mutate.MUTATIONS, ids=NAMES)
def test_gpu_mutations_are_in_the_cuda_sources(m):
    """The GPU suite sees only what the CUDA build compiles, and the Python
    that runs on a GPU only; a CPU mutation of either would never be seen by
    the CPU suite. The two-GPU ones sit in the bindings' CUDA branches."""
    text = (mutate.REPO / m.path).read_text()
    at = text.index(m.old)
    if m.device == "gpu2":
        assert in_cuda_branch(text, at), (m.name, m.path)
        return
    gpu_only = (Path(m.path).suffix in (".cu", ".cuh") or m.path in mutate.GPU_ONLY_PYTHON
                or in_cuda_branch(text, at) or in_paddle2_branch(text, at))
    assert (m.device == "gpu") == gpu_only, (m.name, m.path, m.device)


def test_a_cuda_branch_is_told_from_the_cpu_code():
    text = "a\n#ifdef PADDLE_WITH_CUDA\nb\n#else\nc\n#endif\nd\n"
    assert [in_cuda_branch(text, text.index(x)) for x in "abcd"] == [False, True, False, False]


def test_a_paddle2_branch_is_told_from_the_code_around_it():
    text = f"a\n{PADDLE2_ONLY}\nb\n#endif\nc\n"
    assert [in_paddle2_branch(text, text.index(x)) for x in "abc"] == [False, True, False]
    checks = (mutate.REPO / mutate.CHK).read_text()
    assert in_paddle2_branch(checks, checks.index("Paddle 2 refuses"))


def bindings_form(text: str, at: int):
    """The form whose namespace of op_bindings.h holds position `at` (each
    form's bindings stand in a namespace of its name), or None."""
    opened = [(b.start(), b.group(1)) for b in re.finditer(r"^namespace (\w+) \{$", text, re.M)]
    inside = [name for start, name in opened
              if start < at and text.find(f"}}  // namespace {name}", start) > at]
    return inside[-1] if inside else None


BINDINGS = [m for m in mutate.MUTATIONS if m.path == mutate.BIND]


@pytest.mark.parametrize("m", BINDINGS, ids=[m.name for m in BINDINGS])
def test_a_bindings_mutation_changes_the_form_it_names(m):
    """op_bindings.h holds each form's copy of the same checks: a mutation
    picked by its nth occurrence must land in the copy of the form its name
    says, not silently in another form's when the file's order changes."""
    text = (mutate.REPO / m.path).read_text()
    form = bindings_form(text, mutate.where(m, text))
    assert form in FORMS, (m.name, form)
    assert form in m.name.split() or f"{form}'s" in m.name, (m.name, form)


def test_the_form_of_a_place_in_the_bindings_is_told():
    text = "namespace mtp {\nnamespace a {\nx\n}  // namespace a\nnamespace b {\ny\n}  // namespace b\nz\n}  // namespace mtp\n"
    assert [bindings_form(text, text.index(c)) for c in "xyz"] == ["a", "b", "mtp"]


def test_a_mutation_that_is_not_there_does_not_apply(tmp_path):
    m = mutate.Mutation("x", "f.txt", "a", "b")
    (tmp_path / "f.txt").write_text("a a")  # twice: ambiguous without nth
    assert not mutate.apply(m, tmp_path)
    assert mutate.apply(mutate.Mutation("x", "f.txt", "a", "b", nth=1), tmp_path)
    assert (tmp_path / "f.txt").read_text() == "a b"


@pytest.mark.parametrize("returncode, how", [
    (0, ""),
    (1, "a failing test"),
    (-11, "a crash (signal 11)"),
    (-6, "a crash (signal 6)"),
    (2, "pytest's exit code 2"),
])
def test_how_a_suite_judged_a_mutant(returncode, how):
    assert mutate.how_killed(returncode) == how


@pytest.mark.parametrize("device,tests", [("cpu", mutate.CPU_TESTS), ("gpu", mutate.GPU_TESTS)])
def test_a_mutant_runs_every_test_file_with_the_nearest_first(device, tests):
    """The order only hastens a kill: every file of the set runs, once, for
    every mutant; a file named for the mutated code comes before the others,
    and a C++ mutant meets the guarded driver first."""
    for m in mutate.MUTATIONS:
        order = mutate.ordered_tests(m, tests)
        assert sorted(order) == sorted(tests) and len(order) == len(set(order)), m.name
        near = [f for f in mutate.NEAREST.get(m.path, []) if f in tests]
        assert set(order[:len(near) + 3]) >= set(near), (m.name, order[:6])
        if m.path.endswith((".h", ".cuh", ".cc")) and "tests/test_guarded.py" in tests:
            assert order[0] == "tests/test_guarded.py", (m.name, order[:3])
    plugin = next(m for m in mutate.MUTATIONS if m.path == mutate.PLUGIN)
    assert mutate.ordered_tests(plugin, mutate.CPU_TESTS)[0] == "tests/test_plugin.py"
    pr5245 = next(m for m in mutate.MUTATIONS if m.name.startswith("pr5245 ") and m.path == mutate.H)
    assert mutate.ordered_tests(pr5245, mutate.CPU_TESTS)[:3] == [
        "tests/test_guarded.py", "tests/test_form_pr5245.py", "tests/test_fastdeploy_kernels.py"]



@pytest.mark.parametrize("nodeid", mutate.TEXT_CHECKS)
def test_each_text_check_left_out_names_a_test_that_exists(nodeid):
    """`--behaviour` leaves these out by pytest's --deselect, which matches a
    prefix of a test's id: a renamed test would stay in unseen."""
    path, _, prefix = nodeid.partition("::")
    text = (mutate.REPO / path).read_text()
    assert mutate.REPO.joinpath(path).is_file() and (
        not prefix or re.search(rf"^def {re.escape(prefix)}", text, re.M)), nodeid


def test_the_text_checks_are_in_the_cpu_suite():
    assert {n.partition("::")[0] for n in mutate.TEXT_CHECKS} <= set(mutate.CPU_TESTS)
