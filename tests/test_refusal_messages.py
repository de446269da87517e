"""Every refusal's whole message, values included; and the mask op's branch
for every value of decode_states' first column, each a fixed case.

One hand-built batch per check of docs/contract.md ("What is refused"),
request 1 the bad one, chosen so that every value the message carries is a
different number: a message that names the wrong value, or swaps two, fails
here (the other bad-input tests match the request and field only). On each
device the bindings word (the CPU and the GPU), and nothing changed.
"""

import numpy as np
import pytest

from fastdeploy_mtp import ops
from fastdeploy_mtp.signature import DRAFT_MODEL_PREPROCESS, UPDATE_ATTN_MASK_OFFSETS
from helpers import DEVICES, assert_unchanged, call_op, preprocess_attrs, to_tensors
from bad_states import empty_written

INT32_MAX, INT64_MIN = 2**31 - 1, -(2**63)
i32, i64 = np.int32, np.int64


def preprocess_batch(L=7, D=5, A=6, P=11, Db=3):
    """Two requests, both stopped by the base model (nothing to check), with
    tables of distinct widths: input_ids L, draft_tokens D, accept_tokens A,
    pre_ids P, base_model_draft_tokens Db columns."""
    n = 2
    return {
        "draft_tokens": np.zeros((n, D), i64), "input_ids": np.zeros((n, L), i64),
        "stop_flags": np.zeros(n, bool), "seq_lens_this_time": np.zeros(n, i32),
        "seq_lens_encoder": np.zeros(n, i32), "seq_lens_decoder": np.zeros(n, i32),
        "step_idx": np.zeros(n, i64), "not_need_stop": np.zeros(1, bool),
        "is_block_step": np.zeros(n, bool), "batch_drop": np.zeros(n, bool),
        "pre_ids": np.zeros((n, P), i64), "mask_rollback": np.zeros(n, i32),
        "accept_tokens": np.ones((n, A), i64), "accept_num": np.zeros(n, i32),
        "base_model_seq_lens_this_time": np.zeros(n, i32),
        "base_model_seq_lens_encoder": np.zeros(n, i32),
        "base_model_seq_lens_decoder": np.zeros(n, i32),
        "base_model_step_idx": np.zeros(n, i64),
        "base_model_stop_flags": np.ones(n, bool),
        "base_model_is_block_step": np.zeros(n, bool),
        "base_model_draft_tokens": np.zeros((n, Db), i64),
    }


def decoding(s, S=20, accept=2, base_step=9, base_S=23, step=30):
    """Request 1 decodes: S KV positions, `accept` tokens accepted."""
    s["base_model_stop_flags"][1] = False
    s["seq_lens_decoder"][1] = S
    s["accept_num"][1] = accept
    s["base_model_step_idx"][1] = base_step
    s["base_model_seq_lens_decoder"][1] = base_S
    s["step_idx"][1] = step
    return s


def prefilling(s, E):
    s["base_model_stop_flags"][1] = False
    s["seq_lens_encoder"][1] = E
    return s


def _preprocess_cases():
    k3 = preprocess_attrs(3)
    trunc = preprocess_attrs(3, truncate=True)
    resync = decoding(preprocess_batch(), S=13, accept=2, base_S=-(2**31) + 1)
    resync["stop_flags"][1] = True
    return {
        "first token past input_ids": (
            prefilling(preprocess_batch(L=7), 9), trunc,
            "input_ids: the first token goes to column 8, outside input_ids' 7 columns "
            "(seq_lens_encoder = 9)"),
        "no accept_tokens column": (
            prefilling(preprocess_batch(A=0), 4), k3,
            "accept_tokens: the first token is read from column 0, but accept_tokens has 0 "
            "columns"),
        "no pre_ids column": (
            prefilling(preprocess_batch(P=0), 4), k3,
            "pre_ids: the first token is written to column 0, but pre_ids has 0 columns"),
        "accept_num out of range": (
            decoding(preprocess_batch(D=5, A=6), accept=8, base_step=10), k3,
            "accept_num: 8 is outside [0, min(accept_tokens columns 6, draft_tokens columns 5)]"),
        "pre_ids window": (
            decoding(preprocess_batch(P=11), accept=3, base_step=2), k3,
            "pre_ids: the 3 accepted tokens (accept_num) go to the columns before "
            "base_model_step_idx = 2, outside pre_ids' 11 columns"),
        "seq_lens_decoder leaves int32": (
            resync, k3,
            "seq_lens_decoder: the new value -2147483649 leaves the int32 range "
            "(seq_lens_decoder = 13, base_model_seq_lens_decoder = -2147483647, accept_num = 2)"),
        "seq_lens_decoder rolled back past int32": (
            decoding(preprocess_batch(), S=-(2**31) + 1), k3,
            "seq_lens_decoder: the rolled-back value seq_lens_decoder - (num_model_step - 1) "
            "= -2147483647 - 2 = -2147483649 leaves the int32 range"),
        "negative seq_lens_encoder": (
            prefilling(decoding(preprocess_batch()), -3), k3,
            "seq_lens_encoder: -3 is negative for a running request"),
        "step_idx leaves int64": (
            decoding(preprocess_batch(), step=INT64_MIN + 1), k3,
            "step_idx: the new value step_idx - (num_model_step - 1) = -9223372036854775807 - 2 "
            "leaves the int64 range"),
        "mask_rollback leaves int32": (
            _with(decoding(preprocess_batch(), S=20), "mask_rollback", INT32_MAX - 1),
            preprocess_attrs(4),
            "mask_rollback: 2147483646 + (seq_lens_decoder 20 - new seq_lens_decoder 17) leaves "
            "the int32 range"),
    }


def _with(s, name, value, i=1):
    s[name][i] = value
    return s


def mask_batch(n=(1, 3), E=(0, 0), S=(5, 8), cursor=(6, 12), rollback=(0, 0), cols=4,
               state0=(0, 0), cu=None, T=None):
    """Two requests: n tokens each, packed (cu_seqlens_q of bsz + 1 entries
    unless `cu` is given), T tokens in all unless given."""
    cu = np.array([0, n[0], n[0] + n[1]] if cu is None else cu, i32)
    total = int(sum(max(x, 0) for x in n)) if T is None else T
    ds = np.zeros((2, 3), i32)
    ds[:, 0] = state0
    full = np.tile(np.arange(cols, dtype=i32), (2, 1))
    return {
        "ids_remove_padding": np.zeros(total, i64), "seq_lens_this_time": np.array(n, i32),
        "seq_lens_encoder": np.array(E, i32), "seq_lens_decoder": np.array(S, i32),
        "cu_seqlens_q": cu, "attn_mask_offsets_full": full,
        "attn_mask_offsets_decoder": np.array(cursor, i32),
        "is_block_step": np.zeros(2, bool), "decode_states": ds,
        "mask_rollback": np.array(rollback, i32),
    }


def _mask_cases():
    bad_offset = mask_batch(n=(1, 3), E=(0, 3), cols=5)
    bad_offset["attn_mask_offsets_full"][1] = [0, 5, -7, 3, 4]
    return {
        "negative seq_lens_this_time": (
            mask_batch(n=(1, -2), T=1), "seq_lens_this_time: -2 is negative"),
        "tokens outside ids_remove_padding": (
            mask_batch(n=(1, 4), cu=(0, 3), T=5),
            "cu_seqlens_q: the 4 tokens from 3 (cu_seqlens_q = 3, seq_lens_this_time = 4) lie "
            "outside the 5 tokens of ids_remove_padding"),
        "tokens past the next request": (
            _with(mask_batch(n=(1, 3), cu=(0, 1, 3), T=6), "seq_lens_this_time", 3),
            "cu_seqlens_q: the 3 tokens from 1 run past the next request's first token 3 "
            "(cu_seqlens_q[i+1], or the token total after its last entry); cu_seqlens_q must "
            "not decrease and requests' tokens must not overlap"),
        "prompt past attn_mask_offsets_full": (
            mask_batch(n=(1, 6), E=(0, 6), cols=4),
            "attn_mask_offsets_full: seq_lens_this_time = 6 prompt tokens, but it has 4 columns"),
        "prompt offset out of range": (
            bad_offset, "attn_mask_offsets_full: column 2 holds -7, outside [0, 2147483647)"),
        "cursor below its rollback": (
            mask_batch(cursor=(6, 3), rollback=(0, 5)),
            "attn_mask_offsets_decoder: the cursor 3 - mask_rollback 5 is negative"),
        "decode offsets past int32": (
            mask_batch(cursor=(6, INT32_MAX - 1), rollback=(0, 1)),
            "attn_mask_offsets: the offsets would reach 2147483645 + seq_lens_this_time 3, past "
            "the int32 range"),
        "vision generation past int32": (
            mask_batch(n=(1, 2), E=(0, 2), S=(5, INT32_MAX - 1), state0=(0, 2)),
            "attn_mask_offsets: the offsets would reach 2147483646 + seq_lens_this_time 2, past "
            "the int32 range"),
    }


PREPROCESS = _preprocess_cases()
MASK = _mask_cases()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(PREPROCESS))
def test_preprocess_refusal_message(device, case):
    s, attrs, words = PREPROCESS[case]
    want = f"draft_model_preprocess: request 1: {words}"
    for name in empty_written(DRAFT_MODEL_PREPROCESS, s, device):
        # Paddle 2 refuses a written table of no elements before any request.
        want = (f"draft_model_preprocess: {name} is written in place but has no elements "
                f"(shape {list(s[name].shape)}): Paddle 2 refuses an empty in-place output "
                f"after the op has run; give it a row and a column, or use Paddle 3")
    t = to_tensors(s, device)
    with pytest.raises(ops.BadInputError) as info:
        call_op(DRAFT_MODEL_PREPROCESS, t, attrs)
    assert str(info.value) == want
    assert_unchanged(t, s)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(MASK))
def test_mask_refusal_message(device, case):
    s, words = MASK[case]
    t = to_tensors(s, device)
    with pytest.raises(ops.BadInputError) as info:
        call_op(UPDATE_ATTN_MASK_OFFSETS, t)
    assert str(info.value) == f"update_attn_mask_offsets: request 1: {words}"
    assert_unchanged(t, s)


def test_every_check_has_a_message_case():
    """One case a check: the table of checks (mtp_bookkeeping.h) has as many
    entries as there are cases here."""
    import re
    from pathlib import Path

    header = (Path(__file__).resolve().parent.parent / "custom_ops" / "mtp_bookkeeping.h").read_text()
    checks = re.findall(r"^\s*X\((k\w+), \d+,", header, re.M)
    # The recompute, pr5738 and shadow forms' own (their messages are checked
    # in test_form_recompute.py, test_form_pr5738.py and test_form_shadow.py).
    recompute = {"kRecomputeStepIdxOverflow", "kRecomputeRollbackOutOfRange",
                 "kShadowStepIdxOverflow", "kResyncDecoderOutOfRange", "kResyncStepIdxOverflow",
                 "kRecomputeDecoderOutOfRange"}
    assert recompute <= set(checks)
    # kMaskCursorOverflow is met by two branches (decode and vision generation).
    assert len(checks) - len(recompute) + 1 == len(PREPROCESS) + len(MASK), checks


# -- the mask op's branch for every value of decode_states' column 0 ---------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("state0", [-1, 0, 1, 2, 3, 7])
@pytest.mark.parametrize("S", [0, 5])
def test_only_state_2_with_kv_positions_is_vision_generation(device, state0, S):
    """A prompt request (3 tokens, prompt offsets [0, 2, 2]) is vision
    generation only where decode_states[i, 0] == 2 and seq_lens_decoder > 0:
    every token's end is then S + n; otherwise its prompt offset + 1."""
    s = mask_batch(n=(1, 3), E=(0, 3), S=(5, S), state0=(0, state0), cols=4)
    s["attn_mask_offsets_full"][1] = [0, 2, 2, 3]
    t = to_tensors(s, device)
    out = call_op(UPDATE_ATTN_MASK_OFFSETS, t)
    ends = out[(1 + np.arange(3)) * 2 + 1].tolist()
    assert ends == ([S + 3] * 3 if state0 == 2 and S > 0 else [1, 3, 3])
    assert out[0::2].tolist() == [0] * 4  # every start 0
