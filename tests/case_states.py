"""States made for one case, on top of fastdeploy_mtp.harness.states: a
request broken on purpose, packed prompts, running decodes of a 22-tensor
form, a decode_states row; and which requests the mask op skips."""

from __future__ import annotations

import numpy as np

from fastdeploy_mtp.harness import states


def break_preprocess_request(s, i, accept_num):
    """Request i of a preprocess state decodes with accept_num (out of range
    when it is negative or past the accepted tokens' columns)."""
    s["base_model_stop_flags"][i] = s["batch_drop"][i] = False
    s["seq_lens_encoder"][i] = 0
    s["accept_num"][i] = accept_num


def break_mask_request(s, i):
    """Request i of a mask state decodes with seq_lens_this_time = -1."""
    s["seq_lens_this_time"][i] = -1
    s["is_block_step"][i] = False
    s["seq_lens_encoder"][i] = 0
    s["seq_lens_decoder"][i] = 3


def prompts_state(seed, count, n, cols):
    """A mask state of `count` prompt requests of n tokens each, packed, with
    attn_mask_offsets_full of `cols` columns."""
    s = states.mask_state(np.random.default_rng(seed), count, mask_cols=cols)
    s["seq_lens_this_time"][:] = n
    s["seq_lens_encoder"][:] = 5
    s["seq_lens_decoder"][:] = 0
    s["is_block_step"][:] = False
    s["cu_seqlens_q"][:] = n * np.arange(count + 1)
    s["ids_remove_padding"] = np.zeros(n * count, np.int64)
    return s


def skipped_mask_requests(s):
    """Which requests of a mask state update_attn_mask_offsets skips (the
    contract: is_block_step, or neither length positive)."""
    bsz = s["seq_lens_this_time"].shape[0]
    block = s["is_block_step"].reshape(-1)[:bsz]
    E, S = s["seq_lens_encoder"].reshape(-1)[:bsz], s["seq_lens_decoder"].reshape(-1)[:bsz]
    return block | ((E <= 0) & (S <= 0))


def recompute_decode_state(k=3, bsz=2):
    """A 22-tensor form's state (states.recompute_state) of `bsz` running
    decode requests with room to roll back: 40 KV positions, step 30, one
    token accepted, the base model at step 5, nothing pending."""
    return running_decodes(states.recompute_state(np.random.default_rng(3), bsz,
                                                  num_model_step=k))


def running_decodes(s):
    """Every request of a rollback-family state (21 or 22 tensors) a running
    decode, as recompute_decode_state says; in place, and returned."""
    for i in range(s["seq_lens_this_time"].shape[0]):
        s["seq_lens_encoder"][i] = 0
        s["stop_flags"][i] = False
        s["batch_drop"][i] = False
        s["base_model_stop_flags"][i] = False
        s["base_model_is_block_step"][i] = False
        s["is_block_step"][i] = False
        s["accept_num"][i] = 1
        s["base_model_step_idx"][i] = 5
        s["seq_lens_decoder"][i] = 40
        s["step_idx"][i] = 30
        s["mask_rollback"][i] = 0
    return s


def one_token_decodes(bsz=4, rollback=2):
    """A mask state (states.mask_state's) of `bsz` decode requests of one
    token each: 30 KV positions, the cursor at 40, `rollback` pending."""
    s = states.mask_state(np.random.default_rng(5), bsz)
    s["is_block_step"][:] = False
    s["seq_lens_encoder"][:] = 0
    s["seq_lens_decoder"][:] = 30
    s["seq_lens_this_time"][:] = 1
    s["cu_seqlens_q"] = np.arange(bsz + 1, dtype=np.int32)
    s["ids_remove_padding"] = np.zeros(bsz, np.int64)
    s["attn_mask_offsets_decoder"][:] = 40
    s["mask_rollback"][:] = rollback
    return s


def shadow_decode_state(k=3, bsz=2):
    """The shadow form's state of `bsz` running decode requests, far from
    their length limit: two tokens accepted, the target model at step 6 and
    40 KV positions."""
    s = states.shadow_state(np.random.default_rng(5), bsz, num_model_step=k)
    for i in range(bsz):
        s["seq_lens_encoder"][i] = 0
        s["target_model_stop_flags"][i] = False
        s["accept_num"][i] = 2
        s["target_model_step_idx"][i] = 6
        s["target_model_seq_lens_decoder"][i] = 40
        s["max_dec_len"][i] = 1000
    return s


def decode_states_case(state, before, n):
    """A two-request mask state (`state`: mask_state's or shadow_mask_state's,
    request 0 a decode, request 1 a one-token prompt) set so that request 0
    decodes `n` tokens on the row `before` of decode_states, and request 1's
    row is all 3 (a prompt's row, which no rule touches)."""
    s = dict(state)
    s["decode_states"] = np.array([before, [3] * len(before)], np.int32)
    s["seq_lens_this_time"] = np.array([n, 1], np.int32)
    s["cu_seqlens_q"] = np.array([0, n, n + 1], np.int32)
    s["ids_remove_padding"] = np.zeros(n + 1, np.int64)
    s["seq_lens_encoder"] = s["seq_lens_encoder"].copy()
    s["seq_lens_encoder"][1] = 4
    return s
