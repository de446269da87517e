"""The simulator's FastDeploy-style runner (``simulate --runner fastdeploy``):
FastDeploy's own per-role inserts and presets driving our ops, with the tiny
draft model and the cache-free oracle."""

import numpy as np
import pytest

from fastdeploy_mtp import ops
from fastdeploy_mtp.harness import sim_fastdeploy, simulate, simulate_cli
from fastdeploy_mtp.buffers import write
from fastdeploy_mtp.proposer import MTPProposer, ProposerConfig, make_base_buffers
from fastdeploy_mtp.slots import Request
from helpers import sim_args


def run(**kw):
    a = sim_args(**{"steps": 30, "batch": 6, "runner": "fastdeploy", "draft_model": "tiny",
                    "image_prob": 0.5, **kw})
    return simulate.run(a, legacy=False, print_rows=False)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_a_mixed_node_under_fastdeploy_s_inserts_is_exact(k):
    """Its inserts never write mask_rollback (nor clear is_block_step): the
    ops' prefill rule leaves nothing of the slot's last request behind."""
    t = run(mode="mixed", num_model_steps=k, seed=1)
    assert t.model.tokens > 200 and t.rolled_back > 20
    assert t.violations == 0, t.first_violation
    assert t.model.disagreements == 0, t.model.first
    assert t.outside.total == 0, t.outside.first


@pytest.mark.parametrize("k", [2, 3, 4])
def test_fastdeploy_s_decode_node_presets_drift_for_k_above_one(k):
    """Its decode-node insert (seq_lens_decoder = prompt length, step_idx 1)
    is k-1 positions behind the base model after the first preprocess: the
    loop sees the draft misaligned and computing on the wrong context."""
    t = run(mode="pd", num_model_steps=k, seed=1)
    assert t.align_violations > 0, t.first_violation
    assert "seq_lens_decoder" in t.first_violation
    assert t.model.disagreements > 0


def test_fastdeploy_s_decode_node_at_k_4_writes_outside_pre_ids():
    """step_idx 1 - 3 = -2, then draft_model_update adds the tokens and writes
    pre_ids[i, step_idx] before column 0: the count sees it."""
    t = run(mode="pd", num_model_steps=4, seed=1)
    assert t.outside.draft_update > 0
    assert "pre_ids[" in t.outside.first and ", -" in t.outside.first, t.outside.first


def test_our_runner_counts_nothing_outside():
    t = simulate.run(sim_args(steps=30, batch=6, mode="pd", num_model_steps=4), legacy=False,
                     print_rows=False)
    assert t.outside is None and t.violations == 0


def test_the_insert_writes_no_mask_rollback_and_keeps_the_parked_flag():
    ops.load_library()
    k = 3
    base = make_base_buffers(2, k)
    for role in ("mixed", "decode"):
        p = MTPProposer(ProposerConfig(num_model_steps=k, max_model_len=64, max_num_seqs=2,
                                       role=role), base)
        rb = p.state["mask_rollback"].numpy()
        rb[:] = [7, 9]
        blk = p.state["is_block_step"].numpy()
        blk[:] = True
        write(p.state["mask_rollback"], rb)
        write(p.state["is_block_step"], blk)
        req = Request(slot=1, prompt=[5, 6, 7, 8], mask_offsets=[0, 2, 2, 3],
                      first_token=11 if role == "decode" else None,
                      draft_token=12 if role == "decode" else None)
        sim_fastdeploy.insert(p, [req])
        st = {n: p.state[n].numpy().reshape(2, -1) for n in p.state if n != "not_need_stop"}
        assert st["is_block_step"][1, 0]  # FastDeploy's insert leaves it
        assert st["attn_mask_offsets_decoder"][1, 0] == 4
        np.testing.assert_array_equal(st["input_ids"][1, :3], [6, 7, 8])
        if role == "decode":
            assert st["mask_rollback"][1, 0] == 1 - (k - 1)
            assert st["step_idx"][1, 0] == 1 and st["seq_lens_decoder"][1, 0] == 4
            assert st["seq_lens_this_time"][1, 0] == k + 1 and st["draft_tokens"][1, 0] == 12
        else:
            assert st["mask_rollback"][1, 0] == 9  # never written
            assert st["seq_lens_encoder"][1, 0] == 4 and st["step_idx"][1, 0] == 0
        assert st["mask_rollback"][0, 0] == 7  # another slot: untouched


def test_the_command_line_prints_the_outside_count(capsys):
    a = sim_args(steps=12, batch=4, runner="fastdeploy", mode="pd", num_model_steps=4,
                 quiet=True)
    assert simulate_cli.main(a) == 1
    out = capsys.readouterr().out
    assert "FastDeploy's runner" in out.splitlines()[0]
    assert "FastDeploy's kernels on these states:" in out


@pytest.mark.parametrize("flag", [{"graphs": True}, {"without_fix": True}])
def test_the_fastdeploy_runner_refuses_graphs_and_the_old_behaviour(flag, capsys):
    a = sim_args(runner="fastdeploy", **flag)
    assert simulate_cli.main(a) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--runner fastdeploy" in err
