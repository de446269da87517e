"""The ops against the numpy reference on random valid states.

Hypothesis draws the shape of the problem (batch size, k, flags, seed); the
seed then draws every value, so each example is a whole batch that mixes all
branches. Every tensor is compared, rows past bsz included.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastdeploy_mtp.harness import states
from helpers import (WITH_GUARDED, assert_mask_like_reference, assert_states_equal,
                     preprocess_attrs, run_mask_ref, run_preprocess_op, run_preprocess_ref)

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def check_preprocess(seed, bsz, k, truncate, splitwise, v1, extra_rows, column, device="cpu"):
    rng = np.random.default_rng(seed)
    s = states.preprocess_state(rng, bsz, num_model_step=k, splitwise_prefill=splitwise,
                                truncate_first_token=truncate, extra_rows=extra_rows,
                                column_vectors=column)
    attrs = preprocess_attrs(k, truncate, splitwise, v1)
    want = run_preprocess_ref(s, attrs)
    got = run_preprocess_op(s, attrs, device)
    assert_states_equal(got, want, f"seed={seed} bsz={bsz} attrs={attrs}")


def check_mask(seed, bsz, extra_rows, padding, column, device="cpu"):
    rng = np.random.default_rng(seed)
    s = states.mask_state(rng, bsz, extra_rows=extra_rows, padding_tokens=padding,
                          column_vectors=column)
    assert_mask_like_reference(s, device, f"seed={seed} bsz={bsz}")


@pytest.mark.parametrize("device", WITH_GUARDED)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 96), k=st.integers(1, 10),
       truncate=st.booleans(), splitwise=st.booleans(), v1=st.booleans(),
       extra_rows=st.integers(0, 3), column=st.booleans())
def test_preprocess_matches_reference(device, seed, bsz, k, truncate, splitwise, v1,
                                      extra_rows, column):
    check_preprocess(seed, bsz, k, truncate, splitwise, v1, extra_rows, column, device)


@pytest.mark.parametrize("device", WITH_GUARDED)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 96), extra_rows=st.integers(0, 3),
       padding=st.integers(0, 4), column=st.booleans())
def test_mask_matches_reference(device, seed, bsz, extra_rows, padding, column):
    check_mask(seed, bsz, extra_rows, padding, column, device)


@pytest.mark.parametrize("device", WITH_GUARDED)
@settings(SETTINGS, max_examples=60)
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 600), cols=st.integers(65, 1100))
def test_mask_with_a_wide_full_table_matches_reference(device, seed, bsz, cols):
    """A real engine's attn_mask_offsets_full has max_model_len columns: batches
    of short prompts and decodes run the GPU kernels that may share out long
    prompts. The columns past the drawn ones hold -1, which no request may
    read; the results are those of the narrow table."""
    narrow = states.mask_state(np.random.default_rng(seed), bsz)
    s = states.widen_mask_full(narrow, cols, fill=-1)
    want_out = assert_mask_like_reference(s, device, f"seed={seed} bsz={bsz} cols={cols}")
    narrow_out, _ = run_mask_ref(narrow)
    np.testing.assert_array_equal(want_out, narrow_out)


@pytest.mark.parametrize("device", WITH_GUARDED)
@settings(SETTINGS, max_examples=40)
@given(seed=st.integers(0, 2**32 - 1), bsz=st.integers(1, 600), prefills=st.integers(0, 8),
       chunk=st.integers(1, 300), extra_cols=st.integers(0, 800))
def test_decodes_with_prefill_chunks_match_reference(device, seed, bsz, prefills, chunk,
                                                     extra_cols):
    """The step a chunked-prefill engine runs while requests arrive: decodes,
    a few prompt chunks at random slots, a table max_model_len wide."""
    prefills = min(prefills, bsz)
    s = states.prefill_chunks_state(np.random.default_rng(seed), bsz, prefills=prefills,
                                    chunk=chunk, cols=chunk + extra_cols)
    prompts = s["seq_lens_encoder"][:bsz] > 0
    assert prompts.sum() == prefills and (s["seq_lens_this_time"][prompts] == chunk).all()
    assert not s["is_block_step"][:bsz].any()
    assert_mask_like_reference(s, device,
                               f"seed={seed} bsz={bsz} prefills={prefills} chunk={chunk}")


def test_given_branches_and_prompt_tokens_are_kept_and_checked():
    rng = np.random.default_rng(5)
    branches = ["prompt", "decode", "idle", "block_step", "vision"] * 4
    s = states.mask_state(rng, 20, mask_cols=30, branches=branches, prompt_tokens=30)
    enc, n = s["seq_lens_encoder"], s["seq_lens_this_time"]
    assert ((enc > 0) == np.isin(branches, ["prompt", "vision"])).all()
    assert (n[enc > 0] == 30).all()
    assert (s["is_block_step"] == (np.array(branches) == "block_step")).all()
    with pytest.raises(ValueError, match="branches"):
        states.mask_state(rng, 3, branches=["decode", "chat", "idle"])
    with pytest.raises(ValueError, match="prompt_tokens"):
        states.mask_state(rng, 3, mask_cols=8, prompt_tokens=9)
    with pytest.raises(ValueError, match="prefills"):
        states.prefill_chunks_state(rng, 3, prefills=4, chunk=2, cols=8)


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("bsz", [1, 512, 4096])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_preprocess_large_batches(device, bsz, k):
    for splitwise in (False, True):
        check_preprocess(bsz * 10 + k, bsz, k, truncate=bool(k % 2), splitwise=splitwise,
                         v1=not k % 2, extra_rows=1, column=False, device=device)


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("bsz", [1, 512, 4096])
def test_mask_large_batches(device, bsz):
    check_mask(bsz, bsz, extra_rows=2, padding=3, column=False, device=device)


def test_state_generator_reaches_every_branch():
    """Guards the generator: the differential tests above are only as good as
    the branches it produces."""
    from fastdeploy_mtp.reference import _vec

    rng = np.random.default_rng(0)
    s = states.preprocess_state(rng, 200, num_model_step=3)
    base_stop, base_block = _vec(s["base_model_stop_flags"]), _vec(s["base_model_is_block_step"])
    E, stop, drop = s["seq_lens_encoder"][:200], s["stop_flags"][:200], s["batch_drop"][:200]
    running = ~(base_stop | drop)
    assert (base_stop & base_block).any() and (base_stop & ~base_block).any() and drop.any()
    assert (running & (E > 0)).any()
    assert (running & (E == 0) & stop).any() and (running & (E == 0) & ~stop).any()
    assert (running & (E == 0) & (s["accept_num"][:200] == 0)).any()
    assert (running & (E == 0) & s["is_block_step"][:200] & ~base_block).any()
    m = states.mask_state(rng, 200)
    enc, dec, n = m["seq_lens_encoder"], m["seq_lens_decoder"], m["seq_lens_this_time"]
    vision = (enc[:200] > 0) & (m["decode_states"][:200, 0] == 2) & (dec[:200] > 0)
    assert m["is_block_step"].any() and ((enc == 0) & (dec == 0)).any() and vision.any()
    assert ((enc[:200] > 0) & ~vision).any()
    decode = (enc[:200] == 0) & (dec[:200] > 0) & ~m["is_block_step"][:200]
    assert (decode & (n > 1)).any() and (decode & (n == 1)).any()
