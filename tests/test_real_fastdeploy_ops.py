"""The harness's models of FastDeploy's compiled ops that no FastDeploy tree
is needed to check (fastdeploy_mtp.harness.real_fastdeploy_ops): the v0
scheduler's draft block step, ``mtp_step_paddle``
(speculate_decoding/draft_model/mtp_step_paddle.cu, 9018ccf74 lines 16-156)."""

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

from fastdeploy_mtp.harness import real_fastdeploy_ops as ops  # noqa: E402

BLOCK = 4   # block_size
K = 1       # max_draft_tokens: a request needs the block of position dec + 2


def state(base_stop, dec, tables, enc_lens, used, free):
    rows = len(dec)
    free_list = np.full(16, -1, np.int32)
    free_list[:len(free)] = free
    return {
        "base_model_stop_flags": np.array(base_stop, bool),
        "stop_flags": np.zeros(rows, bool),
        "batch_drop": np.zeros(rows, bool),
        "seq_lens_this_time": np.full(rows, 2, np.int32),
        "seq_lens_encoder": np.zeros(rows, np.int32),
        "seq_lens_decoder": np.array(dec, np.int32),
        "block_tables": np.array(tables, np.int32),
        "encoder_block_lens": np.array(enc_lens, np.int32),
        "used_list_len": np.array(used, np.int32),
        "free_list": free_list,
        "free_list_len": np.array([len(free)], np.int32),
    }


def step(s):
    t = {k: paddle.to_tensor(v, place=paddle.CPUPlace()) for k, v in s.items()}
    ops.mtp_step_paddle(*t.values(), BLOCK, K)
    return {k: v.numpy() for k, v in t.items()}


def test_a_stopped_request_gives_its_decode_blocks_back():
    # Row 0 stopped holding encoder block 10 and decode blocks 11, 12.
    out = step(state([True, False], [8, 1], [[10, 11, 12, -1], [20, -1, -1, -1]],
                     [1, 1], [2, 0], [30]))
    assert out["free_list_len"][0] == 3
    assert sorted(out["free_list"][:3]) == [11, 12, 30]
    np.testing.assert_array_equal(out["block_tables"][0], [10, -1, -1, -1])
    assert out["used_list_len"][0] == 0 and out["encoder_block_lens"][0] == 0
    np.testing.assert_array_equal(out["block_tables"][1], [20, -1, -1, -1])  # row 1 needs none


def test_a_request_whose_next_positions_leave_its_blocks_gets_the_free_list_s_last():
    # Row 0 at dec 6: position 6 + K + 1 = 8 is in block 2, not in its table.
    out = step(state([False], [6], [[10, 11, -1, -1]], [2], [0], [30, 31]))
    np.testing.assert_array_equal(out["block_tables"][0], [10, 11, 31, -1])
    assert out["used_list_len"][0] == 1 and out["free_list_len"][0] == 1
    assert not out["stop_flags"][0] and not out["batch_drop"][0]


def test_more_asking_than_free_drops_the_request_holding_the_most_decode_blocks():
    # Both rows need a block and none is free: row 1 holds two decode blocks,
    # row 0 one; row 1 is dropped, its blocks freed, and row 0 gets one.
    out = step(state([False, False], [6, 10], [[10, 11, -1, -1], [20, 21, 22, -1]],
                     [1, 1], [1, 2], []))
    assert out["stop_flags"].tolist() == [False, True]
    assert out["batch_drop"].tolist() == [False, True]
    assert out["seq_lens_this_time"][1] == 0 and out["seq_lens_decoder"][1] == 0
    np.testing.assert_array_equal(out["block_tables"][1], [20, -1, -1, -1])
    assert out["used_list_len"].tolist() == [2, 0]
    assert out["block_tables"][0, 2] in (21, 22) and out["free_list_len"][0] == 1
    assert out["seq_lens_decoder"][0] == 6 and out["seq_lens_this_time"][0] == 2


def test_nothing_to_free_or_hand_out_changes_nothing():
    s = state([False, False], [1, 2], [[10, 11, -1, -1], [20, 21, -1, -1]], [1, 1], [1, 1],
              [30])
    out = step(s)
    for name, value in s.items():
        np.testing.assert_array_equal(out[name], value, err_msg=name)
