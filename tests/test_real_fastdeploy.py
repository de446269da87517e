"""FastDeploy's own proposer run on the CPU (fastdeploy_mtp.harness.real_fastdeploy).

Needs a FastDeploy source tree in FASTDEPLOY_SRC and its Python dependencies
(FASTDEPLOY_DEPS, default /tmp/fd_deps; real_fastdeploy.DEPS_PACKAGES lists
them); skips, with one line saying which, without them. Each run is a child
process of about 20 s.
"""

import os
import pathlib
import subprocess
import sys

import pytest

from fastdeploy_mtp.harness import real_fastdeploy as real
from fastdeploy_mtp.harness import real_fastdeploy_ops as ops
from helpers import child_env

SRC = os.environ.get("FASTDEPLOY_SRC")
DEPS = os.environ.get(real.DEPS_ENV) or real.DEFAULT_DEPS
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _skip_reason():
    if not SRC:
        return "FASTDEPLOY_SRC is not set (a FastDeploy source tree)"
    try:
        real.check_tree(SRC)
    except real.HarnessError as e:
        return str(e)
    lacking = real.missing_deps(DEPS)
    if lacking:
        return f"FastDeploy's Python dependencies missing from {DEPS}: {', '.join(lacking)}"
    return None


needs_tree = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


def _run(**kw):
    kw.setdefault("steps", 24)
    kw.setdefault("batch", 3)
    kw.setdefault("mode", "exact")
    return real.run(SRC, deps=DEPS, **kw)


def _registration(op):
    rel = {"draft_model_preprocess": f"{ops.DRAFT}/draft_model_preprocess.cu",
           "update_attn_mask_offsets": "custom_ops/gpu_ops/update_attn_mask_offsets.cu"}[op]
    return ops.registration(pathlib.Path(SRC), rel, op)


@needs_tree
@pytest.mark.parametrize("role,k,chunk,eos", [("mixed", 2, 0, 0.0), ("pd", 2, 0, 0.1),
                                              ("mixed", 1, 8, 0.0), ("pd", 3, 8, 0.0)])
def test_our_ops_give_fastdeploys_trace(role, k, chunk, eos):
    """With the plugin in exact mode (our ops bit-exact copies of FastDeploy's
    kernels) every forward the draft makes and every buffer after every step
    is byte-identical to the run with FastDeploy's own kernels (modelled);
    `eos`: drafts ending early too."""
    ours = _run(role=role, k=k, chunk=chunk, kernels="ours", draft_eos_prob=eos)
    theirs = _run(role=role, k=k, chunk=chunk, kernels="fastdeploy", draft_eos_prob=eos)
    assert ours.forms["preprocess_module"].startswith("fastdeploy_mtp.plugin"), ours.forms
    assert theirs.forms["preprocess_module"].endswith("real_fastdeploy_ops"), theirs.forms
    assert ours.tokens > 50 and ours.requests > 2, ours.line()
    assert ours.forms["draft_model_preprocess"] in ("pr5245", "pr5738", "shadow"), ours.forms
    assert len(ours.trace) == len(theirs.trace) > 0
    assert ours.trace == theirs.trace, (ours.line(), theirs.line())
    assert (ours.tokens, ours.disagreements, ours.violations) == \
        (theirs.tokens, theirs.disagreements, theirs.violations)


@needs_tree
def test_judge_catches_a_planted_drift():
    """FastDeploy's mask op with each decode's last mask end one too far: the
    invariant and the oracle both see it, and the trace differs."""
    clean = _run(role="mixed", k=2, kernels="fastdeploy")
    drifted = _run(role="mixed", k=2, kernels="fastdeploy", drift=True)
    assert drifted.violations["mask"] > 0, drifted.line()
    assert drifted.disagreements > clean.disagreements, (clean.line(), drifted.line())
    assert drifted.trace != clean.trace


@needs_tree
def test_chunked_prefill_feeds_the_base_models_guess():
    """A chunk before a prompt's last puts the base model's sample, not the
    prompt's next token, at the chunk's last draft position (the known
    chunked-prefill case): the tokens invariant counts it and the oracle
    disagrees; without chunks at k=2 a mixed run has none of it."""
    chunked = _run(role="mixed", k=2, chunk=6)
    assert chunked.violations["tokens"] > 0, chunked.line()
    assert chunked.disagreements > 0
    assert "the base model's token" in chunked.first["tokens"]


@needs_tree
@pytest.mark.parametrize("role,k,chunk,prefix,eos", [
    ("mixed", 2, 0, 0.0, 0.05), ("pd", 2, 0, 0.0, 0.05), ("mixed", 2, 8, 0.0, 0.0),
    ("pd", 3, 8, 0.0, 0.0), ("mixed", 2, 0, 0.5, 0.0), ("mixed", 1, 6, 0.0, 0.0)])
def test_with_the_plugin_fastdeploy_s_own_proposer_is_exact(role, k, chunk, prefix, eos):
    """FASTDEPLOY_MTP_MODE unset (the corrected mode, the plugin's default):
    FastDeploy's own proposer at this tree, with early-ending drafts, chunked
    prefill and prefix-cache starts, computes what the cache-free oracle does
    and breaks no invariant; the same run with FastDeploy's own kernels does
    not, where the verdict says its version drifts (the drift this proves
    fixed)."""
    ours = _run(role=role, k=k, chunk=chunk, prefix_cache=prefix, draft_eos_prob=eos,
                mode="", steps=30, batch=4)
    assert ours.tokens > 50, ours.line()
    assert ours.disagreements == 0 and sum(ours.violations.values()) == 0, \
        (ours.line(), ours.first)
    if chunk and role == "mixed":  # (ba915e03e's own kernels at pd k = 3 fail outright)
        theirs = _run(role=role, k=k, chunk=chunk, prefix_cache=prefix, draft_eos_prob=eos,
                      kernels="fastdeploy", steps=30, batch=4)
        assert theirs.disagreements > 0, theirs.line()


@needs_tree
def test_fastdeploys_int_kvcache_scheduler_v1_reaches_the_plugin(tmp_path):
    """ba915e03e's proposer passes envs.ENABLE_V1_KVCACHE_SCHEDULER, an int,
    as the bool attribute kvcache_scheduler_v1 (mtp.py line 709 there). Run
    FastDeploy's proposer with that int handed to the plugin's op as is: the
    op must take it."""
    inputs, attrs = _registration("draft_model_preprocess")
    if len(inputs) != 20:
        pytest.skip("FastDeploy at this tree passes kvcache_scheduler_v1 as a bool "
                    "(only the 20-tensor op, ba915e03e, passes the int)")
    code = ("import fastdeploy.envs as e; import sys; "
            "sys.exit(0 if type(e.ENABLE_V1_KVCACHE_SCHEDULER) is int else 3)")
    probe = subprocess.run([sys.executable, "-c", code],
                           env=child_env(SRC, DEPS, ENABLE_V1_KVCACHE_SCHEDULER="1",
                                         FD_LOG_DIR=str(tmp_path)),
                           capture_output=True, text=True)
    assert probe.returncode == 0, "FastDeploy's ENABLE_V1_KVCACHE_SCHEDULER is not an int here"
    res = _run(role="mixed", k=2, kernels="ours", workaround=False)
    assert "workaround" not in res.forms
    assert res.tokens > 0


def test_cli_says_in_one_line_what_is_missing(tmp_path):
    """No tree, not a tree, no dependencies: one line each, exit 2."""
    env = child_env(FASTDEPLOY_SRC=None)
    mod = [sys.executable, "-m", "fastdeploy_mtp.harness.real_fastdeploy"]
    cases = [
        ([], "FASTDEPLOY_SRC is not set"),
        (["--src", str(tmp_path)], "is not a FastDeploy source tree"),
    ]
    fake = tmp_path / "fd"
    (fake / "fastdeploy" / "spec_decode").mkdir(parents=True)
    (fake / "fastdeploy" / "spec_decode" / "mtp.py").write_text("")
    (fake / "custom_ops" / "gpu_ops").mkdir(parents=True)
    empty = tmp_path / "nodeps"
    empty.mkdir()
    lacking = real.missing_deps(str(empty))
    if lacking:
        cases.append((["--src", str(fake), "--deps", str(empty)],
                      f"FastDeploy's Python dependencies missing: {lacking[0]}"))
    cases += [
        (["--src", str(fake), "--kv-scheduler", "v0", "--role", "pd"],
         "the v0 scheduler's runs are a mixed node's"),
        (["--src", str(fake), "--kv-scheduler", "v0", "--image-prob", "0.5"],
         "the v0 scheduler's runs are a mixed node's"),
        (["--src", str(fake), "--kv-scheduler", "v0"], "has no v0 scheduler's chunk path"),
    ]
    for args, text in cases:
        out = subprocess.run(mod + args, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and text in lines[0], (args, out.stderr)
    with pytest.raises(real.HarnessError, match="not set"):
        real.run(None) if not os.environ.get("FASTDEPLOY_SRC") else real.check_tree(None)


@needs_tree
@pytest.mark.parametrize("role,k,chunk,prefix,eos", [("mixed", 2, 0, 0.0, 0.1),
                                                     ("pd", 2, 0, 0.0, 0.1),
                                                     ("mixed", 3, 8, 0.0, 0.05),
                                                     ("mixed", 2, 0, 0.5, 0.05)])
def test_the_replay_agrees_with_fastdeploys_proposer_state_for_state(role, k, chunk, prefix,
                                                                     eos):
    """The replay's step (sim_fastdeploy, sim_models: what `simulate --runner
    fastdeploy` runs) on a copy of the buffers FastDeploy's MTPProposer.run
    gets, every step: the same tokens fed, the same mask offsets each
    substep, the same draft buffers and base draft tokens after it. Drafts end
    early (`eos`) so that the end-token rules run; the tree's own kernels
    (modelled) and ours in the exact mode both. The replay's shadow form is
    7a6c28781's runner: at a tree whose draft update packs its outputs
    (dad5a432a) the two part only in the buffers that update writes
    otherwise, a request not fed keeping its draft_tokens and the
    not_need_stop it leaves."""
    for kernels in ("ours", "fastdeploy"):
        r = _run(role=role, k=k, chunk=chunk, prefix_cache=prefix, draft_eos_prob=eos,
                 kernels=kernels, against_replay=True)
        assert r.replay["steps"] >= 24 and r.replay["substeps"] > r.replay["steps"], r.replay
        if r.forms["draft_model_update"] == "compact":
            assert set(r.replay["kinds"]) <= {"draft_tokens", "not_need_stop"}, r.replay
        else:
            assert r.replay["mismatches"] == 0, r.replay.get("first")


@needs_tree
def test_the_replay_check_sees_a_kernel_the_replay_does_not_transcribe():
    """FastDeploy's mask op planted one mask end too far (--drift): the
    replay's own op gives the true offsets, and the check names the substep
    where they part."""
    r = _run(role="mixed", k=2, kernels="fastdeploy", drift=True, against_replay=True)
    assert r.replay["mismatches"] > 0
    assert "the mask offsets" in r.replay["first"], r.replay


@needs_tree
def test_the_replay_check_refuses_the_corrected_mode():
    """The replay transcribes FastDeploy's own rules; the corrected mode's ops
    are not those: one line, before anything runs."""
    with pytest.raises(real.HarnessError, match="FASTDEPLOY_MTP_MODE=exact"):
        _run(role="mixed", k=2, mode="corrected", against_replay=True)


def _v0_path_skip():
    runner = pathlib.Path(SRC or "") / "fastdeploy" / "worker" / "gpu_model_runner.py"
    if runner.is_file() and "update_task_chunk_prefill(" not in runner.read_text():
        pytest.skip("FastDeploy's runner at FASTDEPLOY_SRC never calls the v0 chunk path "
                    "(97eee7567 retired the v0 scheduler)")


@needs_tree
@pytest.mark.parametrize("k,chunk,eos", [(1, 6, 0.0), (2, 8, 0.1), (3, 5, 0.0), (4, 7, 0.1)])
def test_the_v0_chunk_path_with_the_plugin_is_exact(k, chunk, eos, monkeypatch):
    """ENABLE_V1_KVCACHE_SCHEDULER=0 (a mixed node, text prompts, chunked
    prefill): FastDeploy's own insert_prefill_inputs and
    update_task_chunk_prefill, called by its runner's own insert and
    _update_chunked_prefill, with the plugin in its default mode compute what
    the cache-free oracle does. The same ops without the plugin's patches (a
    form named by FASTDEPLOY_MTP_FORM applies none) feed a chunk's last draft
    input the base model's sample: the drift the patches fix."""
    _v0_path_skip()
    kw = dict(role="mixed", k=k, chunk=chunk, draft_eos_prob=eos, kv_scheduler="v0",
              steps=30, batch=4, seed=k)
    ours = _run(mode="", **kw)
    assert ours.kv_scheduler == "v0" and ours.tokens > 50 and ours.requests > 3, ours.line()
    assert ours.disagreements == 0 and ours.total_violations == 0, (ours.line(), ours.first)
    monkeypatch.setenv("FASTDEPLOY_MTP_FORM", "corrected_" + ours.forms["draft_model_preprocess"])
    unpatched = _run(mode="", **kw)
    assert unpatched.violations["tokens"] > 0 and unpatched.disagreements > 0, unpatched.line()
    assert "the base model's token" in unpatched.first["tokens"]


@needs_tree
def test_on_the_v0_path_our_exact_ops_give_fastdeploys_trace():
    """The v0 scheduler's path with the plugin in exact mode and with
    FastDeploy's own kernels (modelled): every forward and every buffer after
    every step byte-identical, chunks and early-ending drafts included."""
    _v0_path_skip()
    kw = dict(role="mixed", k=3, chunk=5, draft_eos_prob=0.1, kv_scheduler="v0")
    ours, theirs = _run(kernels="ours", **kw), _run(kernels="fastdeploy", **kw)
    assert ours.tokens > 50 and ours.kv_scheduler == "v0", ours.line()
    assert len(ours.trace) == len(theirs.trace) > 0 and ours.trace == theirs.trace, \
        (ours.line(), theirs.line())
