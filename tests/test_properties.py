"""Properties the contract states, asserted directly on the ops' results.

These do not use ``reference.py``: each rule of docs/contract.md is restated
here as an assertion on (input, output), so a bug made the same way in the
shared header and in the reference still fails. Hypothesis draws the states;
the generator's edges and exemptions are checked to be drawn.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastdeploy_mtp import ops
from fastdeploy_mtp.harness import states
from helpers import DEVICES, assert_unchanged, preprocess_attrs, run_mask_op, to_numpy, to_tensors
from case_states import prompts_state, skipped_mask_requests

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def vec(a):
    return a.reshape(a.shape[0])


def run_preprocess(s, attrs, device):
    t = to_tensors(s, device)
    ops.draft_model_preprocess(**t, **attrs)
    return to_numpy(t)


def assert_preprocess_properties(s, o, attrs):
    k = attrs["num_model_step"]
    split, v1, trunc = (attrs["splitwise_prefill"], attrs["kvcache_scheduler_v1"],
                        attrs["truncate_first_token"])
    i_ = {n: vec(s[n]) for n in s if s[n].ndim == 1 or (s[n].ndim == 2 and s[n].shape[1] == 1)}
    o_ = {n: vec(o[n]) for n in i_}
    bsz = s["seq_lens_this_time"].shape[0]
    running_any = False
    for i in range(bsz):
        E, S, a = int(i_["seq_lens_encoder"][i]), int(i_["seq_lens_decoder"][i]), int(i_["accept_num"][i])
        t = s["accept_tokens"][i, 0]
        base_stop, base_block = bool(i_["base_model_stop_flags"][i]), bool(i_["base_model_is_block_step"][i])
        where = f"request {i}"
        # Columns a request never writes keep their values (checked per case below).
        untouched = {"draft_tokens": set(range(s["draft_tokens"].shape[1])),
                     "pre_ids": set(range(s["pre_ids"].shape[1])),
                     "input_ids": set(range(s["input_ids"].shape[1]))}
        if split:
            running = E > 0
            np.testing.assert_array_equal(o["base_model_draft_tokens"][i],
                                          s["base_model_draft_tokens"][i], err_msg=where)
            parked = dropped = False
        else:
            assert (o["base_model_draft_tokens"][i, 1:] == -1).all(), where
            assert o["base_model_draft_tokens"][i, 0] == s["base_model_draft_tokens"][i, 0], where
            parked = base_stop and base_block and v1
            dropped = bool(i_["batch_drop"][i]) or (base_stop and base_block and not v1)
            running = not (base_stop or dropped)
            if base_stop and base_block:
                assert o_["stop_flags"][i], where
                assert (o_["is_block_step"][i] if v1 else o_["batch_drop"][i]), where
        running_any |= running
        if not running:
            assert o_["stop_flags"][i] and o_["seq_lens_this_time"][i] == 0, where
            assert o_["seq_lens_decoder"][i] == 0 and o_["seq_lens_encoder"][i] == 0, where
            new_S = 0
        elif E > 0:
            col = E - 1 if trunc else E
            assert not o_["stop_flags"][i], where
            assert o["input_ids"][i, col] == t, where
            untouched["input_ids"].discard(col)
            assert o_["seq_lens_this_time"][i] == col + 1, where
            assert o_["seq_lens_encoder"][i] == E and o_["seq_lens_decoder"][i] == S, where
            assert not o_["is_block_step"][i], where  # a running prefill is never parked
            if not split:
                assert o["pre_ids"][i, 0] == t, where
                untouched["pre_ids"].discard(0)
            new_S = S
        else:
            base_step = int(i_["base_model_step_idx"][i])
            if i_["stop_flags"][i]:  # re-sync from the base model
                new_S = int(i_["base_model_seq_lens_decoder"][i]) - a
                new_step = base_step - a
            else:
                new_S, new_step = S - (k - 1), int(i_["step_idx"][i]) - (k - 1)
            assert o_["seq_lens_decoder"][i] == new_S and o_["step_idx"][i] == new_step, where
            assert not o_["stop_flags"][i] and o_["seq_lens_this_time"][i] == a, where
            np.testing.assert_array_equal(o["draft_tokens"][i, :a], s["accept_tokens"][i, :a])
            np.testing.assert_array_equal(o["pre_ids"][i, base_step - a:base_step],
                                          s["accept_tokens"][i, :a], err_msg=where)
            untouched["draft_tokens"] -= set(range(a))
            untouched["pre_ids"] -= set(range(base_step - a, base_step))
            if v1 and not base_block and i_["is_block_step"][i]:
                assert not o_["is_block_step"][i], where
            if not parked:
                assert o_["is_block_step"][i] == (i_["is_block_step"][i] and not
                                                  (v1 and not base_block)), where
        # The rule: mask_rollback takes up exactly the change of seq_lens_decoder,
        # but a prefill starts afresh from 0.
        carried = 0 if running and E > 0 else int(i_["mask_rollback"][i])
        assert int(o_["mask_rollback"][i]) - carried == S - new_S, where
        for name, cols in untouched.items():
            cols = sorted(cols)
            np.testing.assert_array_equal(o[name][i, cols], s[name][i, cols],
                                          err_msg=f"{where} {name}")
    assert bool(o["not_need_stop"].reshape(-1)[0]) == running_any
    for name in s:  # rows past bsz are never touched
        if name != "not_need_stop" and s[name].shape[0] > bsz:
            np.testing.assert_array_equal(o[name][bsz:], s[name][bsz:], err_msg=name)
    for name in ("accept_tokens", "accept_num", "base_model_seq_lens_decoder",
                 "base_model_step_idx", "base_model_stop_flags", "base_model_is_block_step"):
        np.testing.assert_array_equal(o[name], s[name], err_msg=f"{name} is read-only")


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 64), k=st.integers(1, 10),
       truncate=st.booleans(), splitwise=st.booleans(), v1=st.booleans(),
       extra_rows=st.integers(0, 2), column=st.booleans())
def test_preprocess_properties(device, seed, bsz, k, truncate, splitwise, v1, extra_rows, column):
    s = states.preprocess_state(np.random.default_rng(seed), bsz, num_model_step=k,
                                splitwise_prefill=splitwise, truncate_first_token=truncate,
                                extra_rows=extra_rows, column_vectors=column)
    attrs = preprocess_attrs(k, truncate, splitwise, v1)
    assert_preprocess_properties(s, run_preprocess(s, attrs, device), attrs)


def assert_mask_properties(s, out, o):
    n_all, E, S = vec(s["seq_lens_this_time"]), vec(s["seq_lens_encoder"]), vec(s["seq_lens_decoder"])
    cursor, rollback, block = (vec(s["attn_mask_offsets_decoder"]), vec(s["mask_rollback"]),
                               vec(s["is_block_step"]))
    cu = s["cu_seqlens_q"].reshape(-1)
    T = s["ids_remove_padding"].shape[0]
    assert out.shape == (2 * T,) and (out[0::2] == 0).all()
    written = np.zeros(T, bool)
    for i in range(n_all.shape[0]):
        n, q = int(n_all[i]), int(cu[i])
        where = f"request {i}"
        unchanged = ("attn_mask_offsets_decoder", "mask_rollback", "decode_states")
        skipped = block[i] or (E[i] <= 0 and S[i] <= 0)
        # A skipped request's tokens may lie anywhere: its rows are not read.
        rows = None if skipped else out[2 * (q + np.arange(n)) + 1]
        if skipped:
            pass  # nothing written: its entries stay 0 (checked below)
        elif E[i] > 0:
            if s["decode_states"][i, 0] == 2 and S[i] > 0:
                assert (rows == S[i] + n).all(), where
            else:
                np.testing.assert_array_equal(rows, s["attn_mask_offsets_full"][i, :n] + 1)
            written[q:q + n] = True
        else:
            c = int(cursor[i]) - int(rollback[i])
            np.testing.assert_array_equal(rows, c + 1 + np.arange(n), err_msg=where)
            assert vec(o["attn_mask_offsets_decoder"])[i] == c + n, where
            assert vec(o["mask_rollback"])[i] == 0, where
            # A decode of several tokens: its tokens' columns 0, the rest -1;
            # a one-token (or empty) decode leaves the row as it was.
            old = s["decode_states"][i]
            want = np.where(np.arange(old.shape[0]) < n, 0, -1) if n > 1 else old
            np.testing.assert_array_equal(o["decode_states"][i], want, err_msg=where)
            unchanged = ()
            written[q:q + n] = True
        for name in unchanged:
            np.testing.assert_array_equal(o[name][i], s[name][i], err_msg=f"{where} {name}")
    assert (out[1::2][~written] == 0).all(), "entries no request owns must be 0"
    bsz = n_all.shape[0]
    for name in ("attn_mask_offsets_decoder", "mask_rollback", "decode_states"):
        np.testing.assert_array_equal(o[name][bsz:], s[name][bsz:], err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 64), extra_rows=st.integers(0, 2),
       padding=st.integers(0, 3), column=st.booleans(), short_cu=st.booleans())
def test_mask_properties(device, seed, bsz, extra_rows, padding, column, short_cu):
    s = states.mask_state(np.random.default_rng(seed), bsz, extra_rows=extra_rows,
                          padding_tokens=padding, column_vectors=column, short_cu=short_cu)
    t = to_tensors(s, device)
    out = ops.update_attn_mask_offsets(**t).numpy()
    assert_mask_properties(s, out, to_numpy(t))


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 12), moves=st.integers(1, 4),
       padding=st.integers(0, 3))
def test_no_two_requests_share_a_token(device, seed, bsz, moves, padding):
    """cu_seqlens_q moved at a few places: the call is accepted exactly when
    cu_seqlens_q never decreases and each request's tokens end by the next
    request's first one, so that no token has two writers (on the GPU the
    winner would depend on thread timing). Accepted, every property holds;
    refused, the earliest request that breaks the rule is named and nothing
    has changed."""
    rng = np.random.default_rng(seed)
    s = states.mask_state(rng, bsz, padding_tokens=padding)
    cu = s["cu_seqlens_q"]
    for _ in range(moves):
        cu[rng.integers(0, bsz + 1)] += rng.integers(-3, 4)
    T = s["ids_remove_padding"].shape[0]
    n_all = vec(s["seq_lens_this_time"])
    skipped = skipped_mask_requests(s)
    writes = np.where(skipped, 0, n_all)
    breaks = [(not skipped[i] and (cu[i] < 0 or cu[i] + n_all[i] > T))
              or cu[i] + writes[i] > cu[i + 1] for i in range(bsz)]
    t = to_tensors(s, device)
    if not any(breaks):
        out = ops.update_attn_mask_offsets(**t).numpy()
        owners = np.zeros(T, int)
        for i in range(bsz):
            owners[cu[i]:cu[i] + writes[i]] += 1
        assert owners.max(initial=0) <= 1
        assert_mask_properties(s, out, to_numpy(t))
        return
    with pytest.raises(ops.BadInputError) as info:
        ops.update_attn_mask_offsets(**t)
    assert f"request {breaks.index(True)}: cu_seqlens_q" in str(info.value), str(info.value)
    assert_unchanged(t, s)


@pytest.mark.parametrize("device", DEVICES)
def test_preprocess_then_mask_keeps_the_cursor_aligned(device):
    """attn_mask_offsets_decoder - mask_rollback - seq_lens_decoder is the
    same before preprocess and after the mask op, for every decode request."""
    k = 3
    s = states.preprocess_state(np.random.default_rng(9), 64, num_model_step=k)
    rng = np.random.default_rng(10)
    cursor = rng.integers(1000, 2000, 64).astype(np.int32)
    before = cursor - s["mask_rollback"] - s["seq_lens_decoder"]
    attrs = preprocess_attrs(k, v1=True)
    o = run_preprocess(s, attrs, device)
    decode = (~o["stop_flags"]) & (o["seq_lens_encoder"] == 0) & (o["seq_lens_decoder"] > 0)
    after = cursor - o["mask_rollback"] - o["seq_lens_decoder"]
    np.testing.assert_array_equal(after[decode], before[decode])
    m = {"ids_remove_padding": np.zeros(int(o["seq_lens_this_time"].sum()), np.int64),
         "seq_lens_this_time": o["seq_lens_this_time"], "seq_lens_encoder": o["seq_lens_encoder"],
         "seq_lens_decoder": o["seq_lens_decoder"],
         "cu_seqlens_q": np.concatenate([[0], np.cumsum(o["seq_lens_this_time"])]).astype(np.int32),
         "attn_mask_offsets_full": np.tile(np.arange(64, dtype=np.int32), (64, 1)),
         "attn_mask_offsets_decoder": cursor, "is_block_step": o["is_block_step"],
         "decode_states": np.zeros((64, 8), np.int32), "mask_rollback": o["mask_rollback"]}
    t = to_tensors(m, device)
    out = ops.update_attn_mask_offsets(**t).numpy()
    r = to_numpy(t)
    # After consuming the rollback: cursor == seq_lens_decoder + the constant, and
    # each decode token's end is its KV position + 1 + that constant.
    np.testing.assert_array_equal(r["attn_mask_offsets_decoder"][decode] - r["mask_rollback"][decode]
                                  - o["seq_lens_decoder"][decode] - o["seq_lens_this_time"][decode],
                                  before[decode])
    cu = m["cu_seqlens_q"]
    for i in np.nonzero(decode & (o["seq_lens_this_time"] > 0))[0]:
        n = o["seq_lens_this_time"][i]
        ends = out[2 * (cu[i] + np.arange(n)) + 1]
        np.testing.assert_array_equal(ends, o["seq_lens_decoder"][i] + np.arange(n) + 1 + before[i])


def test_the_generator_draws_every_edge():
    """The exemptions and limits the contract names turn up in the states."""
    seen = set()
    for seed in range(60):
        rng = np.random.default_rng(seed)
        k = 1 + seed % 4
        s = states.preprocess_state(rng, 64, num_model_step=k, truncate_first_token=seed % 2 == 0)
        P, L = s["pre_ids"].shape[1], s["input_ids"].shape[1]
        A, D = s["accept_tokens"].shape[1], s["draft_tokens"].shape[1]
        running = ~s["base_model_stop_flags"] & ~s["batch_drop"]
        decode = running & (s["seq_lens_encoder"] == 0)
        a, step = s["accept_num"], s["base_model_step_idx"]
        if ((a == 0) & decode & ((step < 0) | (step > P))).any():
            seen.add("accept_num 0 with a step outside pre_ids")
        if ((a > 0) & decode & (step == a)).any():
            seen.add("window flush with column 0")
        if ((a > 0) & decode & (step == P)).any():
            seen.add("window flush with the last column")
        if ((a == min(A, D)) & decode).any():
            seen.add("accept_num at its maximum")
        if (decode & ~s["stop_flags"] & (s["seq_lens_decoder"] == k - 1)).any():
            seen.add("rollback to seq_lens_decoder 0")
        if (decode & ~s["stop_flags"] & (s["step_idx"] == k - 1)).any():
            seen.add("rollback to step_idx 0")
        if (decode & s["stop_flags"] & (s["base_model_seq_lens_decoder"] == a)).any():
            seen.add("re-sync to seq_lens_decoder 0")
        max_E = L if seed % 2 == 0 else L - 1
        if (running & (s["seq_lens_encoder"] == max_E)).any():
            seen.add("first token in the last column")
        m = states.mask_state(rng, 64)
        dec = (m["seq_lens_encoder"] == 0) & (m["seq_lens_decoder"] > 0) & ~m["is_block_step"]
        if (dec & (m["attn_mask_offsets_decoder"] == m["mask_rollback"])).any():
            seen.add("mask cursor 0 after the rollback")
        if (dec & (m["seq_lens_this_time"] > 1)).any():
            seen.add("decode with several tokens")
        if ((m["decode_states"][:, 0] == 2) & (m["seq_lens_encoder"] > 0)
                & (m["seq_lens_decoder"] > 0)).any():
            seen.add("vision generation")
    want = {"accept_num 0 with a step outside pre_ids", "window flush with column 0",
            "window flush with the last column", "accept_num at its maximum",
            "rollback to seq_lens_decoder 0", "rollback to step_idx 0",
            "re-sync to seq_lens_decoder 0", "first token in the last column",
            "mask cursor 0 after the rollback", "decode with several tokens", "vision generation"}
    assert want <= seen, want - seen


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [65, 300, 4000])
def test_a_long_prompt_is_written_whole(device, n):
    """The odd entry of a prompt's token j is its offset j + 1, the even ones
    0, however long the prompt (on the GPU, past 64 tokens, every thread of
    the block writes a share of it)."""
    s = prompts_state(n, 1, n, 4096)
    s["attn_mask_offsets_full"][0] = 3 * np.arange(4096, dtype=np.int32)
    out, _ = run_mask_op(s, device)
    np.testing.assert_array_equal(out[1::2], 3 * np.arange(n) + 1)
    np.testing.assert_array_equal(out[0::2], 0)
