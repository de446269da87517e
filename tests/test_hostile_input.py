"""Hostile input: every class of misuse is refused with nothing changed, or,
for exact aliasing of an argument the op never reads, gives the result of
separate copies. No crash, no write outside a tensor.

Classes: integer limits (wrap-around), None, overlapping arguments, written
tensors that require grad or are non-contiguous views, attributes of the wrong
type, proposer misuse, command-line misuse, and the zero-token mask call's
warnings. The op classes run on every device of helpers.DEVICES.
"""

import argparse

import numpy as np
import pytest

from fastdeploy_mtp import forms, ops, reference
from fastdeploy_mtp.harness import states
from fastdeploy_mtp.signature import DRAFT_MODEL_PREPROCESS, UPDATE_ATTN_MASK_OFFSETS
from helpers import (DEVICES, WITH_GUARDED, assert_unchanged, call_op, preprocess_attrs, to_numpy,
                     to_tensors)
from bad_states import outcome_mismatch
from case_states import one_token_decodes

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def decode_batch(bsz=4, k=1):
    """Every request a running decode request with one accepted token."""
    s = states.preprocess_state(np.random.default_rng(7), bsz, num_model_step=k)
    for i in range(bsz):
        s["base_model_stop_flags"][i] = s["base_model_is_block_step"][i] = False
        s["batch_drop"][i] = s["stop_flags"][i] = False
        s["seq_lens_encoder"][i] = 0
        s["seq_lens_decoder"][i] = 20 + k
        s["step_idx"][i] = 10 + k
        s["accept_num"][i] = 1
        s["base_model_step_idx"][i] = 3
    return s


def preprocess(t, k=1, **kw):
    ops.draft_model_preprocess(**t, **preprocess_attrs(k, v1=True), **kw)


def refused(call, t, before, *needles):
    with pytest.raises(ops.BadInputError) as info:
        call(t)
    for needle in needles:
        assert needle in str(info.value), str(info.value)
    assert_unchanged(t, before)
    return str(info.value)


def same_outcome_as_reference(s, attrs, device):
    """The op refuses the request the reference refuses (nothing changed), or
    both agree on every array."""
    mismatch = outcome_mismatch(lambda t: call_op(DRAFT_MODEL_PREPROCESS, t, attrs),
                                lambda r: reference.draft_model_preprocess(r, **attrs),
                                s, device)
    assert mismatch is None, mismatch


# ---------------------------------------------------------------------------
# 1 and 6: integer limits


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("victim", [0, 1])
def test_issue_reproducer_int64_min_step(device, victim):
    """The reported case: accept_num [0, 1], one base_model_step_idx -2**63."""
    s = decode_batch(2)
    s["accept_num"][:] = [0, 1]
    s["base_model_step_idx"][victim] = I64_MIN
    t = to_tensors(s, device)
    if victim == 1:  # its accepted token would land before pre_ids
        refused(lambda t: preprocess(t), t, s, "request 1: pre_ids")
    else:  # accept_num 0 writes nothing to pre_ids: any step is allowed (the exemption)
        same_outcome_as_reference(s, preprocess_attrs(1, v1=True), device)


PREPROCESS_LIMITS = {
    # field, value, the refused field (None: valid, must equal the reference)
    # A negative new step or length that is representable is written as it is
    # (FastDeploy's decode-node preset step_idx = 1 with k = 3).
    "step_idx below k-1": ("step_idx", 1, None),
    "step_idx at the int64 floor": ("step_idx", I64_MIN + 2, None),
    "step_idx one past the int64 floor": ("step_idx", I64_MIN + 1, "step_idx"),
    "step_idx int64 min": ("step_idx", I64_MIN, "step_idx"),
    "seq_lens_decoder below k-1": ("seq_lens_decoder", 1, None),
    "seq_lens_decoder at the int32 floor": ("seq_lens_decoder", I32_MIN + 2, None),
    "seq_lens_decoder one past the int32 floor": ("seq_lens_decoder", I32_MIN + 1,
                                                  "seq_lens_decoder"),
    "step_idx int64 max": ("step_idx", I64_MAX, None),
    "base step int64 max": ("base_model_step_idx", I64_MAX, "pre_ids"),
    "base step int64 min": ("base_model_step_idx", I64_MIN, "pre_ids"),
    "mask_rollback int32 max": ("mask_rollback", I32_MAX, "mask_rollback"),
    "mask_rollback int32 min": ("mask_rollback", I32_MIN, None),
    "seq_lens_decoder int32 min": ("seq_lens_decoder", I32_MIN, "seq_lens_decoder"),
    "seq_lens_decoder int32 max": ("seq_lens_decoder", I32_MAX, None),
    "accept_num int32 max": ("accept_num", I32_MAX, "accept_num"),
    "accept_num int32 min": ("accept_num", I32_MIN, "accept_num"),
    "seq_lens_encoder int32 min": ("seq_lens_encoder", I32_MIN, "seq_lens_encoder"),
}


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("case", sorted(PREPROCESS_LIMITS))
@pytest.mark.parametrize("bsz,where", [(1, 0), (2, 1), (5, 0), (5, 2), (5, 4)])
def test_preprocess_limits_at_every_position(device, case, bsz, where):
    field, value, refused_field = PREPROCESS_LIMITS[case]
    k = 3
    s = decode_batch(bsz, k)
    s[field].reshape(-1)[where] = value
    attrs = preprocess_attrs(k, v1=True)
    if refused_field is None:
        same_outcome_as_reference(s, attrs, device)
    else:
        refused(lambda t: call_op(DRAFT_MODEL_PREPROCESS, t, attrs), to_tensors(s, device), s,
                f"request {where}: {refused_field}")


@pytest.mark.parametrize("device", DEVICES)
def test_recovery_to_a_negative_step_is_written(device):
    s = decode_batch(3, k=2)
    s["stop_flags"][2] = True  # recovers: step_idx = base_model_step_idx - accept_num
    s["base_model_seq_lens_decoder"][2] = 40
    s["accept_num"][2] = 0
    s["base_model_step_idx"][2] = -1
    t = to_tensors(s, device)
    preprocess(t, k=2)
    assert int(t["step_idx"].numpy().reshape(-1)[2]) == -1
    assert int(t["seq_lens_decoder"].numpy().reshape(-1)[2]) == 40


@pytest.mark.parametrize("device", DEVICES)
def test_mask_rollback_of_a_stopped_request_must_stay_int32(device):
    s = decode_batch(3)
    s["base_model_stop_flags"][1] = True  # not running: seq_lens_decoder becomes 0
    s["seq_lens_decoder"][1] = 5
    s["mask_rollback"][1] = I32_MAX - 4
    refused(lambda t: preprocess(t), to_tensors(s, device), s, "request 1: mask_rollback")


@pytest.mark.parametrize("device", DEVICES)
def test_mask_rollback_may_absorb_a_change_that_alone_leaves_int32(device):
    # Only the new mask_rollback must fit: an old seq_lens_decoder near
    # INT32_MIN, re-synced to 59, changes by less than INT32_MIN, and the
    # rollback of 100 brings the sum back (the reference once raised here).
    s = decode_batch(3)
    s["stop_flags"][1] = True  # re-syncs: base_model_seq_lens_decoder - accept_num
    s["base_model_seq_lens_decoder"][1] = 60
    s["seq_lens_decoder"][1] = I32_MIN + 10
    s["mask_rollback"][1] = 100
    t = to_tensors(s, device)
    preprocess(t)
    got = to_numpy(t)
    assert got["seq_lens_decoder"][1] == 59
    assert got["mask_rollback"][1] == 100 + (I32_MIN + 10) - 59
    same_outcome_as_reference(s, preprocess_attrs(1, v1=True), device)


@pytest.mark.parametrize("device", DEVICES)
def test_first_token_at_int32_max_is_refused(device):
    s = decode_batch(2)
    s["seq_lens_encoder"][1] = I32_MAX  # prefill: the first token goes to column E
    refused(lambda t: preprocess(t), to_tensors(s, device), s, "request 1: input_ids")


def mask_batch(bsz=4):
    """Every request a decode request with one token."""
    return one_token_decodes(bsz)


def prompt_request(s, i, n=1):
    s["seq_lens_encoder"][i] = 5
    s["seq_lens_decoder"][i] = 0
    s["seq_lens_this_time"][i] = n
    s["decode_states"][i, 0] = 0
    # The batch packed again around its n tokens.
    s["cu_seqlens_q"][1:] = np.cumsum(s["seq_lens_this_time"])
    s["ids_remove_padding"] = np.zeros(int(s["cu_seqlens_q"][-1]), np.int64)


MASK_LIMITS = {
    "cursor minus rollback negative": (
        lambda s, i: s["mask_rollback"].__setitem__(i, 41), "attn_mask_offsets_decoder"),
    "rollback int32 min": (
        lambda s, i: s["mask_rollback"].__setitem__(i, I32_MIN), "attn_mask_offsets"),
    "cursor int32 max": (
        lambda s, i: (s["attn_mask_offsets_decoder"].__setitem__(i, I32_MAX),
                      s["mask_rollback"].__setitem__(i, 0)), "attn_mask_offsets"),
    "prompt offset int32 max": (
        lambda s, i: (prompt_request(s, i), s["attn_mask_offsets_full"].__setitem__((i, 0), I32_MAX)),
        "attn_mask_offsets_full"),
    "prompt offset int32 max after a valid one": (
        lambda s, i: (prompt_request(s, i, n=2), s["attn_mask_offsets_full"].__setitem__((i, 0), 0),
                      s["attn_mask_offsets_full"].__setitem__((i, 1), I32_MAX)),
        "attn_mask_offsets_full"),
    "prompt offset negative": (
        lambda s, i: (prompt_request(s, i), s["attn_mask_offsets_full"].__setitem__((i, 0), -1)),
        "attn_mask_offsets_full"),
    "vision generation past int32": (
        lambda s, i: (prompt_request(s, i), s["decode_states"].__setitem__((i, 0), 2),
                      s["seq_lens_decoder"].__setitem__(i, I32_MAX)), "attn_mask_offsets"),
    "cu_seqlens_q int32 max": (
        lambda s, i: s["cu_seqlens_q"].__setitem__(i, I32_MAX), "cu_seqlens_q"),
    "tokens into the next request's": (
        lambda s, i: s["seq_lens_this_time"].__setitem__(i, 2), "cu_seqlens_q"),
    "next request starting before this one": (
        lambda s, i: s["cu_seqlens_q"].__setitem__(i + 1, i - 1), "cu_seqlens_q"),
    "seq_lens_this_time int32 min": (
        lambda s, i: s["seq_lens_this_time"].__setitem__(i, I32_MIN), "seq_lens_this_time"),
}


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("case", sorted(MASK_LIMITS))
@pytest.mark.parametrize("bsz,where", [(1, 0), (2, 1), (5, 0), (5, 2), (5, 4)])
def test_mask_limits_at_every_position(device, case, bsz, where):
    breaker, field = MASK_LIMITS[case]
    s = mask_batch(bsz)
    breaker(s, where)
    with pytest.raises(ops.BadInputError) as info:
        reference.update_attn_mask_offsets({k: v.copy() for k, v in s.items()})
    assert f"request {where}: {field}" in str(info.value)
    refused(lambda t: call_op(UPDATE_ATTN_MASK_OFFSETS, t), to_tensors(s, device), s,
            f"request {where}: {field}")


@pytest.mark.parametrize("device", DEVICES)
def test_mask_cursor_exactly_at_the_limits_is_accepted(device):
    s = mask_batch(2)
    s["attn_mask_offsets_decoder"][0] = 7
    s["mask_rollback"][0] = 7  # cursor 0: the first offset is 1
    s["attn_mask_offsets_decoder"][1] = I32_MAX - 1
    s["mask_rollback"][1] = 0  # cursor + 1 token == INT32_MAX
    t = to_tensors(s, device)
    out = ops.update_attn_mask_offsets(**t).numpy()
    assert out[1] == 1 and out[3] == I32_MAX
    assert t["attn_mask_offsets_decoder"].numpy().tolist() == [1, I32_MAX]


# ---------------------------------------------------------------------------
# 2: None in place of a tensor (wrapper and raw op)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", DRAFT_MODEL_PREPROCESS.input_names)
def test_preprocess_none_at_every_position(device, name):
    s = decode_batch(3)
    t = to_tensors(s, device)
    before = {k: v for k, v in s.items() if k != name}
    t_none = dict(t, **{name: None})
    with pytest.raises(ops.BadInputError,
                       match=f"{name} (must be a paddle.Tensor, got NoneType|is missing \\(None\\))"):
        preprocess(t_none)
    assert_unchanged({k: v for k, v in t.items() if k != name}, before)
    # The raw library op (as FastDeploy calls it) refuses it too, without crashing.
    lib = forms.load("rollback").library
    args = [t_none[n] for n in DRAFT_MODEL_PREPROCESS.input_names] + [1, False, False, True]
    with pytest.raises(Exception, match=f"{name} is missing"):
        lib.draft_model_preprocess(*args)
    assert_unchanged({k: v for k, v in t.items() if k != name}, before)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", UPDATE_ATTN_MASK_OFFSETS.input_names)
def test_mask_none_at_every_position(device, name):
    s = mask_batch(3)
    t = to_tensors(s, device)
    t_none = dict(t, **{name: None})
    before = {k: v for k, v in s.items() if k != name}
    with pytest.raises(ops.BadInputError,
                       match=f"{name} (must be a paddle.Tensor|is missing \\(None\\))"):
        ops.update_attn_mask_offsets(**t_none)
    lib = forms.load("rollback").library
    with pytest.raises(Exception, match=f"{name} is missing"):
        lib.update_attn_mask_offsets(*[t_none[n] for n in UPDATE_ATTN_MASK_OFFSETS.input_names])
    assert_unchanged({k: v for k, v in t.items() if k != name}, before)


@pytest.mark.parametrize("junk", [np.zeros(3, np.int32), 3, "x"])
def test_non_tensors_are_refused_in_our_words(junk):
    s = mask_batch(3)
    t = to_tensors(s)
    t["seq_lens_decoder"] = junk  # a read-only position: Paddle refuses it, we say which
    with pytest.raises(ops.BadInputError, match="seq_lens_decoder must be a paddle.Tensor, got"):
        ops.update_attn_mask_offsets(**t)
    assert_unchanged({k: v for k, v in t.items() if k != "seq_lens_decoder"},
                     {k: v for k, v in s.items() if k != "seq_lens_decoder"})


def test_raise_pending_errors_refuses_none():
    with pytest.raises(ops.BadInputError, match="x must be a paddle.Tensor"):
        ops.raise_pending_errors(None)


# ---------------------------------------------------------------------------
# 3: overlapping arguments


@pytest.mark.parametrize("device", DEVICES)
def test_same_tensor_for_an_unread_argument_equals_separate_copies(device):
    """FastDeploy's own test passes seq_lens_this_time as
    base_model_seq_lens_this_time too; the op never reads the latter."""
    k = 2
    s = states.preprocess_state(np.random.default_rng(11), 16, num_model_step=k)
    s["base_model_seq_lens_this_time"] = s["seq_lens_this_time"].copy()
    s["base_model_seq_lens_encoder"] = s["seq_lens_encoder"].copy()
    attrs = preprocess_attrs(k, v1=True)
    separate = to_tensors(s, device)
    ops.draft_model_preprocess(**separate, **attrs)
    shared = to_tensors(s, device)
    shared["base_model_seq_lens_this_time"] = shared["seq_lens_this_time"]
    shared["base_model_seq_lens_encoder"] = shared["seq_lens_encoder"]
    ops.draft_model_preprocess(**shared, **attrs)
    got, want = to_numpy(shared), to_numpy(separate)
    for name in DRAFT_MODEL_PREPROCESS.input_names:
        if name not in ("base_model_seq_lens_this_time", "base_model_seq_lens_encoder"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("written,other", [
    ("stop_flags", "base_model_stop_flags"),          # same shape and dtype, both read
    ("seq_lens_decoder", "base_model_seq_lens_decoder"),
    ("step_idx", "base_model_step_idx"),
    ("mask_rollback", "accept_num"),
])
def test_same_tensor_for_a_written_and_a_read_argument_is_refused(device, written, other):
    s = decode_batch(4)
    t = to_tensors(s, device)
    t[other] = t[written]
    before = dict(s, **{other: s[written]})
    refused(lambda t: preprocess(t), t, before, f"{written} and {other} share memory"
            if DRAFT_MODEL_PREPROCESS.input_names.index(written) <
            DRAFT_MODEL_PREPROCESS.input_names.index(other) else f"{other} and {written} share")


@pytest.mark.parametrize("device", DEVICES)
def test_views_into_one_buffer_are_refused(device):
    """mask_rollback and accept_num as overlapping slices of one int32 buffer."""
    import paddle

    from helpers import place_of

    s = decode_batch(4)
    buf = paddle.to_tensor(np.zeros(10, np.int32), place=place_of(device))
    t = to_tensors(s, device)
    t["mask_rollback"] = buf[0:4]
    t["accept_num"] = buf[2:6]
    before = to_numpy(t)
    with pytest.raises(ops.BadInputError, match="mask_rollback and accept_num share memory"):
        preprocess(t)
    assert_unchanged(t, before)
    assert buf.numpy().tolist() == [0] * 10


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("second", [4, 3])
def test_adjacent_views_are_taken_and_views_one_element_over_are_not(device, second):
    """mask_rollback = buf[0:4] and accept_num = buf[second:second + 4]: at 4 the
    two touch without sharing an element, which is two tensors (the op runs as
    on separate copies); at 3 they share one element, which is refused."""
    import paddle

    from helpers import place_of

    s = decode_batch(4)
    want = {k: v.copy() for k, v in s.items()}
    reference.draft_model_preprocess(want, **preprocess_attrs(1, v1=True))
    whole = np.zeros(10, np.int32)
    whole[second:second + 4] = s["accept_num"]
    whole[0:4] = s["mask_rollback"]
    buf = paddle.to_tensor(whole, place=place_of(device))
    t = to_tensors(s, device)
    t["mask_rollback"], t["accept_num"] = buf[0:4], buf[second:second + 4]
    assert t["accept_num"].data_ptr() - t["mask_rollback"].data_ptr() == 4 * second  # views
    if second == 4:
        preprocess(t)
        got = to_numpy(t)
        for name in DRAFT_MODEL_PREPROCESS.input_names:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    else:
        before = to_numpy(t)
        with pytest.raises(ops.BadInputError, match="mask_rollback and accept_num share memory"):
            preprocess(t)
        assert_unchanged(t, before)


@pytest.mark.parametrize("device", DEVICES)
def test_one_tensor_for_two_arguments_of_different_shapes_is_refused(device):
    """pre_ids passed for draft_tokens too (both [N, *] int64, both written)."""
    s = decode_batch(4)
    t = to_tensors(s, device)
    t["draft_tokens"] = t["pre_ids"]
    before = to_numpy(t)
    with pytest.raises(ops.BadInputError, match="draft_tokens and pre_ids share memory"):
        preprocess(t)
    assert_unchanged(t, before)


@pytest.mark.parametrize("device", DEVICES)
def test_mask_written_tensor_overlapping_a_read_one_is_refused(device):
    s = mask_batch(4)
    t = to_tensors(s, device)
    t["mask_rollback"] = t["seq_lens_decoder"]
    before = to_numpy(t)
    with pytest.raises(ops.BadInputError, match="seq_lens_decoder and mask_rollback share"):
        ops.update_attn_mask_offsets(**t)
    assert_unchanged(t, before)


@pytest.mark.parametrize("device", DEVICES)
def test_ids_remove_padding_may_alias_anything(device):
    """Only its length is read."""
    s = mask_batch(4)
    s["ids_remove_padding"] = np.zeros(4, np.int32)
    want_out, want = None, {k: v.copy() for k, v in s.items()}
    want_out = reference.update_attn_mask_offsets(want)
    t = to_tensors(s, device)
    t["ids_remove_padding"] = t["mask_rollback"]  # [4] int32, written by the op
    out = ops.update_attn_mask_offsets(**t).numpy()
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(t["attn_mask_offsets_decoder"].numpy(),
                                  want["attn_mask_offsets_decoder"])


# ---------------------------------------------------------------------------
# 4 and 5: written tensors that require grad, or are non-contiguous views


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", DRAFT_MODEL_PREPROCESS.written)
def test_written_tensor_requiring_grad_is_refused_before_anything_changes(device, name):
    s = decode_batch(3)
    t = to_tensors(s, device)
    t[name].stop_gradient = False
    refused(lambda t: preprocess(t), t, s, f"{name} is written in place but requires grad")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["mask_rollback", "attn_mask_offsets_decoder"])
def test_mask_written_non_contiguous_view_is_refused(device, name):
    import paddle

    from helpers import place_of

    s = mask_batch(3)
    t = to_tensors(s, device)
    wide = np.zeros(6, np.int32)
    wide[::2] = s[name]
    t[name] = paddle.to_tensor(wide, place=place_of(device))[::2]
    if not hasattr(t[name], "is_contiguous") or t[name].is_contiguous():
        pytest.skip("this Paddle copies a strided slice: no non-contiguous views")
    before = to_numpy(t)
    with pytest.raises(ops.BadInputError, match=f"{name} is written in place but is a "
                                                "non-contiguous view"):
        ops.update_attn_mask_offsets(**t)
    assert_unchanged(t, before)


@pytest.mark.parametrize("device", DEVICES)
def test_read_only_non_contiguous_view_is_fine(device):
    """Paddle hands the op a copy of a read-only view; nothing is lost."""
    import paddle

    from helpers import place_of

    if not hasattr(paddle.Tensor, "is_contiguous"):
        pytest.skip("Paddle 2 has no strided views (and its own slicing kernel does not run "
                    "on every GPU)")

    s = mask_batch(3)
    want = {k: v.copy() for k, v in s.items()}
    want_out = reference.update_attn_mask_offsets(want)
    t = to_tensors(s, device)
    wide = np.zeros(6, np.int32)
    wide[::2] = s["seq_lens_decoder"]
    t["seq_lens_decoder"] = paddle.to_tensor(wide, place=place_of(device))[::2]
    np.testing.assert_array_equal(ops.update_attn_mask_offsets(**t).numpy(), want_out)
    np.testing.assert_array_equal(t["mask_rollback"].numpy(), want["mask_rollback"])


# ---------------------------------------------------------------------------
# 7: attributes


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("attr,value,needle", [
    ("num_model_step", 2.7, "must be an int"),
    ("num_model_step", True, "must be an int"),
    ("num_model_step", "2", "must be an int"),
    ("num_model_step", None, "must be an int"),
    ("num_model_step", 0, "must be in [1, 2147483647]"),
    ("num_model_step", -1, "must be in [1, 2147483647]"),
    ("num_model_step", 2**31, "must be in [1, 2147483647], got 2147483648"),
    ("num_model_step", 2**63, "must be in [1, 2147483647], got 9223372036854775808"),
    ("num_model_step", np.int32(0), "must be in [1, 2147483647], got 0"),
    ("num_model_step", np.int64(2**31), "must be in [1, 2147483647], got 2147483648"),
    ("num_model_step", np.float32(2), "must be an int"),
    ("splitwise_prefill", "False", "must be a bool"),
    ("truncate_first_token", 1, "must be a bool"),
    ("kvcache_scheduler_v1", None, "must be a bool"),
    # numpy integers are ints, not bools, even 0 and 1 (np.bool_ is a bool)
    ("splitwise_prefill", np.int64(1), "must be a bool"),
    ("truncate_first_token", np.int32(0), "must be a bool"),
    ("kvcache_scheduler_v1", np.uint8(1), "must be a bool"),
])
def test_attributes_are_type_checked(device, attr, value, needle):
    s = decode_batch(3)
    attrs = dict(preprocess_attrs(2, v1=True), **{attr: value})
    refused(lambda t: ops.draft_model_preprocess(**t, **attrs), to_tensors(s, device), s,
            f"draft_model_preprocess: {attr} {needle}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [I32_MAX, np.int32(I32_MAX), np.int64(I32_MAX), 1, np.int8(1)])
def test_num_model_step_at_either_end_of_its_range_is_accepted(device, k):
    """The bounds themselves, as Python and numpy integers, are in range: a
    batch whose base requests all stopped runs (nothing to roll back) and
    agrees with the reference."""
    s = decode_batch(3)
    s["base_model_stop_flags"][:] = True
    attrs = dict(preprocess_attrs(2, v1=True), num_model_step=k)
    t = to_tensors(s, device)
    call_op(DRAFT_MODEL_PREPROCESS, t, attrs)  # raises if the attribute were refused
    want = {n: a.copy() for n, a in s.items()}
    reference.draft_model_preprocess(want, **attrs)
    for name, arr in want.items():
        assert np.array_equal(t[name].numpy(), arr), name


@pytest.mark.parametrize("device", DEVICES)
def test_numpy_attribute_types_are_accepted(device):
    s = decode_batch(3, k=2)
    attrs = dict(num_model_step=np.int64(2), truncate_first_token=np.bool_(False),
                 splitwise_prefill=False, kvcache_scheduler_v1=np.bool_(True))
    same_outcome_as_reference(s, attrs, device)


# ---------------------------------------------------------------------------
# 9b: a written table of no columns


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("name", ["draft_tokens", "input_ids", "pre_ids",
                                  "base_model_draft_tokens"])
@pytest.mark.parametrize("accepted", [0, 1])
def test_a_written_table_of_no_columns(device, name, accepted):
    """Where no request writes a column of it (accept_num 0), the op ends as
    the reference does; where one would, it refuses that request. On Paddle 2,
    which raises after an op returns an in-place output with no elements,
    the op refuses the table itself first, every tensor unchanged."""
    s = decode_batch(3)
    s["accept_num"][:] = accepted
    s[name] = np.zeros((s[name].shape[0], 0), np.int64)
    attrs = preprocess_attrs(1, v1=True)
    mismatch = outcome_mismatch(lambda t: call_op(DRAFT_MODEL_PREPROCESS, t, attrs),
                                lambda r: reference.draft_model_preprocess(r, **attrs),
                                s, device, field=True, sig=DRAFT_MODEL_PREPROCESS)
    assert mismatch is None, mismatch


# ---------------------------------------------------------------------------
# 10: a mask call with no tokens says nothing


def test_zero_token_mask_call_prints_no_warning(capfd):
    import paddle

    if int(paddle.__version__.split(".")[0]) in (1, 2):
        pytest.skip("Paddle 2 needs the reshape workaround, which it may warn about")
    s = mask_batch(3)
    s["seq_lens_this_time"][:] = 0
    s["cu_seqlens_q"][:] = 0
    s["ids_remove_padding"] = np.zeros(0, np.int64)
    t = to_tensors(s)
    capfd.readouterr()
    out = ops.update_attn_mask_offsets(**t)
    assert list(out.shape) == [0]
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == "", captured


# ---------------------------------------------------------------------------
# 8: the proposer


def _proposer(role="mixed", k=3, N=4, L=32):
    from fastdeploy_mtp.proposer import MTPProposer, ProposerConfig, make_base_buffers

    return MTPProposer(ProposerConfig(num_model_steps=k, max_model_len=L, max_num_seqs=N,
                                      role=role), make_base_buffers(N, k))


def _snapshot(p):
    return {n: t.numpy().copy() for n, t in p.state.items()}


def _assert_same(p, before):
    after = _snapshot(p)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)


def test_inserting_into_a_running_slot_is_refused():
    from fastdeploy_mtp.proposer import ProposerError, Request

    p = _proposer()
    p.insert([Request(slot=1, prompt=[4, 5, 6])])
    before = _snapshot(p)
    with pytest.raises(ProposerError, match="slot 1 holds a request: release it first"):
        p.insert([Request(slot=2, prompt=[7, 8]), Request(slot=1, prompt=[9, 9, 9])])
    _assert_same(p, before)
    p.release([1])
    p.insert([Request(slot=1, prompt=[9, 9, 9])])  # free again
    assert p.state["seq_lens_encoder"].numpy()[1] == 3


@pytest.mark.parametrize("request_kw,needle", [
    (dict(slot="1"), "not an int"),
    (dict(slot=True), "not an int"),
    (dict(slot=1.7), "not an int"),
    (dict(slot=None), "not an int"),
    (dict(prompt=[4, -1]), "prompt must lie in [0,"),
    (dict(prompt=[4, 2**70]), "prompt must be a flat sequence of integers"),
    (dict(prompt=[4.0, 5.0]), "prompt must be a flat sequence of integers"),
    (dict(prompt=["a", "b"]), "prompt must be a flat sequence of integers"),
    (dict(prompt=[[4, 5]]), "prompt must be a flat sequence of integers"),
    (dict(prompt=[True, False]), "prompt must be a flat sequence of integers"),
    (dict(prompt=[4, 5, 6], mask_offsets=[0, 0, 2]), "mask_offsets[1] = 0"),
    (dict(prompt=[4, 5, 6], mask_offsets=[0, 1, 3]), "mask_offsets[2] = 3"),
    (dict(prompt=[4, 5, 6], mask_offsets=[0, 1, 2**40]), "mask_offsets must lie in"),
    (dict(prompt=[4, 5, 6], mask_offsets=[0.0, 1.0, 2.0]), "mask_offsets must be a flat"),
])
def test_bad_request_values_are_refused(request_kw, needle):
    from fastdeploy_mtp.proposer import ProposerError, Request

    p = _proposer()
    before = _snapshot(p)
    kw = dict(slot=0, prompt=[4, 5, 6])
    kw.update(request_kw)
    with pytest.raises(ProposerError) as info:
        p.insert([Request(**kw)])
    assert needle in str(info.value), str(info.value)
    _assert_same(p, before)


@pytest.mark.parametrize("first,draft", [(-1, 5), (5, "6"), (5, 2**64), (True, 5), (5, None)])
def test_bad_handover_tokens_are_refused(first, draft):
    from fastdeploy_mtp.proposer import ProposerError, Request

    p = _proposer("decode")
    before = _snapshot(p)
    with pytest.raises(ProposerError, match="first_token and draft_token"):
        p.insert([Request(slot=0, prompt=[4, 5, 6], first_token=first, draft_token=draft)])
    _assert_same(p, before)


@pytest.mark.parametrize("first,draft", [(0, 0), (0, 2**63 - 1), (2**63 - 1, 0)])
def test_handover_tokens_at_their_bounds_are_taken(first, draft):
    """Token id 0 and the largest int64 are token ids like any other: the
    decode node takes them and the draft reads the handed-over token."""
    from fastdeploy_mtp.proposer import Request

    p = _proposer("decode")
    p.insert([Request(slot=0, prompt=[0, 5, 6], first_token=first, draft_token=draft)])
    assert int(p.state["draft_tokens"].numpy()[0, 0]) == draft


@pytest.mark.parametrize("slots", [["1"], [True], [1.5], [-1], [4]])
def test_bad_release_slots_are_refused(slots):
    from fastdeploy_mtp.proposer import ProposerError, Request

    p = _proposer()
    p.insert([Request(slot=1, prompt=[4, 5, 6])])
    before = _snapshot(p)
    with pytest.raises(ProposerError, match="MTPProposer.release: slot"):
        p.release(slots)
    _assert_same(p, before)


@pytest.mark.parametrize("kw,needle", [
    (dict(role="decode", num_model_steps=4, max_model_len=4), "leaves no room for a prompt"),
    (dict(max_draft_tokens=3.5), "max_draft_tokens must be None or an int"),
    (dict(max_draft_tokens=True), "max_draft_tokens must be None or an int"),
    (dict(kvcache_scheduler_v1="no"), "kvcache_scheduler_v1 must be a bool"),
    (dict(truncate_first_token=1), "truncate_first_token must be a bool"),
    (dict(num_model_steps=2.0), "num_model_steps must be an int"),
    (dict(num_model_steps=True), "num_model_steps must be an int"),
    (dict(max_num_seqs="8"), "max_num_seqs must be an int"),
    (dict(max_model_len=2**40), "max_model_len must be an int in [2, 2147483647]"),
])
def test_bad_configurations_are_refused(kw, needle):
    from fastdeploy_mtp.proposer import ProposerConfig, ProposerError

    args = dict(num_model_steps=2, max_model_len=32, max_num_seqs=4)
    args.update(kw)
    with pytest.raises(ProposerError) as info:
        ProposerConfig(**args)
    assert needle in str(info.value), str(info.value)


def test_decode_role_needs_room_for_k_positions():
    from fastdeploy_mtp.proposer import ProposerConfig

    cfg = ProposerConfig(num_model_steps=4, max_model_len=5, max_num_seqs=1, role="decode")
    assert cfg.max_prompt == 1  # one prompt token, then the k - 1 draft positions and the first


# ---------------------------------------------------------------------------
# 9: the command line


@pytest.mark.parametrize("argv,needle", [
    (["simulate", "--seed", "-1"], "--seed must be >= 0, got -1"),
    (["simulate", "-k", "100000"], "--num-model-steps must be within [1, 64]"),
    (["simulate", "-k", "0"], "--num-model-steps must be within [1, 64]"),
    (["simulate", "--max-prompt", "10000000"], "--max-prompt must be within [2, 8192]"),
    (["simulate", "--batch", "100000000"], "--batch must be within [1, 4096]"),
    (["simulate", "--steps", "0"], "--steps must be within [1, 100000]"),
    (["simulate", "--finish-prob", "1.5"], "--finish-prob must be within [0, 1], got 1.5"),
    (["simulate", "--draft-eos-prob", "-0.25"], "--draft-eos-prob must be within [0, 1], got -0.25"),
    (["simulate", "--arrival-prob", "nan"], "--arrival-prob must be within [0, 1], got nan"),
    # argparse's own refusals, in one line too, naming the value
    (["simulate", "--mode", "foo"], "invalid choice: 'foo'"),
    (["simulate", "-k", "three"], "invalid int value: 'three'"),
    (["simulate", "--draft-model", "big"], "invalid choice: 'big'"),
    (["simulate", "--image-prob", "half"], "invalid float value: 'half'"),
    (["simulate", "stray"], "unrecognized arguments: stray"),
    (["bogus"], "invalid choice: 'bogus'"),
    ([], "the following arguments are required: COMMAND"),
    (["bench", "--bsz"], "expected at least one argument"),
    (["simulate", "--plot", "/nonexistent-folder/x.png"],
     "the folder /nonexistent-folder does not exist"),
    # a folder that exists, where even root cannot make a file (os.access says it can)
    (["simulate", "--plot", "/proc/x.png"], "--plot /proc/x.png: cannot write there"),
    (["simulate", "--plot", "plot.notanimage"], "unknown image type 'notanimage'"),
    (["simulate", "--graphs"], "--graphs needs --device gpu"),
    (["bench", "--bsz", "-1"], "--bsz must be within [1, 1048576], got -1"),
    (["bench", "--repeat", "0"], "--repeat must be within [1, 1000000], got 0"),
    (["bench", "--repeat", "-5"], "--repeat must be within"),
    (["bench-gpu", "--rounds", "0"], "--rounds must be within"),
    (["bench", "--rounds", "0"], "--rounds must be within [1, 1000], got 0"),
    (["bench-gpu", "--bsz", "0"], "--bsz must be within [1, 1048576], got 0"),
    (["bench-gpu", "--calls", "0"], "--calls must be within [1, 1000000], got 0"),
])
def test_command_line_misuse_is_one_line_and_exit_2(capsys, argv, needle):
    import importlib.util

    from fastdeploy_mtp.__main__ import main

    if "--plot" in argv and importlib.util.find_spec("matplotlib") is None:
        needle = "--plot needs matplotlib"  # the README's test extras have none
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "", out  # refused before any run: no table rows
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert "usage:" not in err, err  # the mistake alone, not argparse's usage


def test_plot_without_matplotlib_is_one_line_and_exit_2(monkeypatch, capsys):
    import sys

    from fastdeploy_mtp.__main__ import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    assert main(["simulate", "--plot", "x.png"]) == 2
    out, err = capsys.readouterr()
    assert out == "", out
    assert err == ('simulate: --plot needs matplotlib, which is not installed: pip install -e '
                   '".[plot]" in a checkout, or pip install matplotlib\n'), err


# Both causes, whatever this machine has: Paddle's answers are replaced.
NO_GPU = [(False, 0, "needs a CUDA build of Paddle (paddlepaddle-gpu)"),
          (True, 0, "needs a GPU, and this CUDA build of Paddle sees none")]


def _pretend(monkeypatch, cuda: bool, gpus: int) -> None:
    import paddle

    monkeypatch.setattr(paddle, "is_compiled_with_cuda", lambda: cuda)
    monkeypatch.setattr(paddle.device.cuda, "device_count", lambda: gpus)


@pytest.mark.parametrize("cuda,gpus,said", NO_GPU)
def test_bench_gpu_without_a_gpu_is_one_line_and_exit_2(monkeypatch, capsys, cuda, gpus, said):
    from fastdeploy_mtp.__main__ import main

    _pretend(monkeypatch, cuda, gpus)
    assert main(["bench-gpu", "--bsz", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"bench-gpu {said}") and err.count("\n") == 1, err


@pytest.mark.parametrize("cuda,gpus,said", NO_GPU)
def test_bench_on_a_gpu_without_one_is_one_line_and_exit_2(monkeypatch, capsys, cuda, gpus, said):
    from fastdeploy_mtp.__main__ import main

    _pretend(monkeypatch, cuda, gpus)
    assert main(["bench", "--device", "gpu", "--bsz", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"bench: --device gpu {said}") and err.count("\n") == 1, err
    assert err.endswith("; use --device cpu\n"), err


def test_bench_without_a_gpu_times_the_cpu(monkeypatch, capsys):
    """A CUDA build of Paddle on a machine with no GPU: bench's default is the CPU."""
    from fastdeploy_mtp.bench import cpu as bench

    _pretend(monkeypatch, True, 0)
    monkeypatch.setattr(bench, "insert_bench", lambda rounds: print("insert timed"))
    assert bench.main(argparse.Namespace(device=None, bsz=[1], repeat=1, rounds=1)) == 0
    out = capsys.readouterr().out
    assert out.startswith("device: cpu") and "insert timed" in out, out
