"""Bad input: a clear error naming request, field and values; nothing changed.

Each per-request check is provoked in one request of an otherwise valid
batch (with a second bad request later, to pin that the first is reported),
on every device; the reference must refuse the same request and field.
"""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fastdeploy_mtp import ops, reference
from fastdeploy_mtp.harness import states
from fastdeploy_mtp.signature import DRAFT_MODEL_PREPROCESS, UPDATE_ATTN_MASK_OFFSETS
from helpers import DEVICES, WITH_GUARDED, assert_unchanged, call_op, preprocess_attrs, to_tensors
from bad_states import (EXTREMES, bounds_of, corrupt, empty_written, mismatch_at_bound,
                        narrow_tables, outcome_mismatch, seek_bound)

BAD, LATER_BAD, BSZ = 5, 9, 12


def idle_preprocess_state(k=3, bsz=BSZ, **kw):
    """A valid batch where every request is parked by the base model."""
    s = states.preprocess_state(np.random.default_rng(1), bsz, num_model_step=k, **kw)
    s["base_model_stop_flags"][:] = True
    return s


def decode_request(s, i, k, a=1):
    s["base_model_stop_flags"][i] = False
    s["batch_drop"][i] = False
    s["seq_lens_encoder"][i] = 0
    s["stop_flags"][i] = False
    s["seq_lens_decoder"][i] = 10 + k
    s["accept_num"][i] = a
    s["base_model_step_idx"][i] = a + 1


def prefill_request(s, i, E):
    s["base_model_stop_flags"][i] = False
    s["batch_drop"][i] = False
    s["seq_lens_encoder"][i] = E


def break_first_token(s, i, k):
    prefill_request(s, i, s["input_ids"].shape[1])  # column E == L: one past the end


def break_accept_num_high(s, i, k):
    decode_request(s, i, k)
    s["accept_num"][i] = min(s["accept_tokens"].shape[1], s["draft_tokens"].shape[1]) + 1
    s["base_model_step_idx"][i] = s["accept_num"][i]


def break_accept_num_negative(s, i, k):
    decode_request(s, i, k)
    s["accept_num"][i] = -1


def break_pre_ids_before_start(s, i, k):
    decode_request(s, i, k, a=2)
    s["base_model_step_idx"][i] = 1  # window [-1, 1)


def break_pre_ids_past_end(s, i, k):
    decode_request(s, i, k, a=2)
    s["base_model_step_idx"][i] = s["pre_ids"].shape[1] + 1


def break_rollback_below_int32(s, i, k):
    # The rollback S - (k-1) one below INT32_MIN (k >= 2).
    decode_request(s, i, k)
    s["seq_lens_decoder"][i] = -(2**31) + k - 2


def break_recovery_below_int32(s, i, k):
    # The re-sync's base_model_seq_lens_decoder - accept_num one below INT32_MIN.
    decode_request(s, i, k, a=2)
    s["stop_flags"][i] = True
    s["base_model_seq_lens_decoder"][i] = -(2**31) + 1


def break_recovery_accept_num_negative(s, i, k):
    # A re-sync subtracts accept_num from base_model_step_idx: refused before
    # any of that arithmetic (the sanitized guarded driver sees an overflow).
    decode_request(s, i, k)
    s["stop_flags"][i] = True
    s["accept_num"][i] = -1


def break_negative_encoder(s, i, k):
    decode_request(s, i, k)
    s["seq_lens_encoder"][i] = -1


PREPROCESS_CASES = {
    "first token past input_ids": (break_first_token, "input_ids"),
    "accept_num above min(A, D)": (break_accept_num_high, "accept_num"),
    "accept_num negative": (break_accept_num_negative, "accept_num"),
    "re-sync with accept_num negative": (break_recovery_accept_num_negative, "accept_num"),
    "pre_ids window before column 0": (break_pre_ids_before_start, "pre_ids"),
    "pre_ids window past the end": (break_pre_ids_past_end, "pre_ids"),
    "rollback takes seq_lens_decoder below int32": (break_rollback_below_int32,
                                                     "seq_lens_decoder"),
    "recovery takes seq_lens_decoder below int32": (break_recovery_below_int32,
                                                    "seq_lens_decoder"),
    "running request with negative seq_lens_encoder": (break_negative_encoder, "seq_lens_encoder"),
}


def assert_refused(call, tensors, before, op, request, field):
    with pytest.raises(ops.BadInputError) as info:
        call(tensors)
    msg = str(info.value)
    assert msg.startswith(f"{op}: "), msg
    if request is not None:
        assert f"request {request}: {field}" in msg, msg
        assert re.search(r"-?\d+", msg.split(f"{field}", 1)[1]), f"no values in: {msg}"
    else:
        assert field in msg, msg
    assert_unchanged(tensors, before)
    return msg


def ref_refusal(fn, s, *args):
    s = {k: v.copy() for k, v in s.items()}
    with pytest.raises(ops.BadInputError) as info:
        fn(s, **(args[0] if args else {}))
    m = re.search(r"request (\d+): (\w+)", str(info.value))
    return int(m.group(1)), m.group(2)


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("case", sorted(PREPROCESS_CASES))
@pytest.mark.parametrize("k", [1, 3])
def test_preprocess_request_checks(device, case, k):
    breaker, field = PREPROCESS_CASES[case]
    if case.startswith("rollback") and k == 1:
        pytest.skip("k = 1 rolls nothing back")
    s = idle_preprocess_state(k)
    breaker(s, BAD, k)
    breaker(s, LATER_BAD, k)
    attrs = preprocess_attrs(k, v1=True)
    assert ref_refusal(reference.draft_model_preprocess, s, attrs) == (BAD, field)
    assert_refused(lambda t: call_op(DRAFT_MODEL_PREPROCESS, t, attrs), to_tensors(s, device), s,
                   "draft_model_preprocess", BAD, field)


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("truncate", [False, True])
def test_prefill_node_first_token_check(device, truncate):
    s = idle_preprocess_state(1, splitwise_prefill=True)
    s["seq_lens_encoder"][:] = 0
    L = s["input_ids"].shape[1]
    s["seq_lens_encoder"][BAD] = L + 1 if truncate else L
    attrs = preprocess_attrs(1, truncate=truncate, splitwise=True)
    assert ref_refusal(reference.draft_model_preprocess, s, attrs) == (BAD, "input_ids")
    assert_refused(lambda t: call_op(DRAFT_MODEL_PREPROCESS, t, attrs), to_tensors(s, device), s,
                   "draft_model_preprocess", BAD, "input_ids")


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("missing", ["accept_tokens", "pre_ids"])
def test_prefill_needs_column_zero(device, missing):
    s = idle_preprocess_state(2)
    s[missing] = s[missing][:, :0].copy()
    prefill_request(s, BAD, 2)
    attrs = preprocess_attrs(2)
    assert ref_refusal(reference.draft_model_preprocess, s, attrs) == (BAD, missing)
    request, words = BAD, missing
    if empty_written(DRAFT_MODEL_PREPROCESS, s, device):
        # Paddle 2: the written table of no columns is refused before any request.
        request, words = None, f"{missing} is written in place but has no elements"
    assert_refused(lambda t: call_op(DRAFT_MODEL_PREPROCESS, t, attrs), to_tensors(s, device), s,
                   "draft_model_preprocess", request, words)


def _other_dtype(arr):
    return arr.astype(np.int32) if arr.dtype != np.int32 else arr.astype(np.int64)


# A wrong dtype of the same byte size: a check that compared sizes only, or
# read the bytes as the right type, would take it.
SAME_SIZE = {np.dtype(bool): np.uint8, np.dtype(np.int32): np.float32,
             np.dtype(np.int64): np.float64}


def _same_size_dtype(arr):
    return arr.astype(SAME_SIZE[arr.dtype])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", [t.name for t in DRAFT_MODEL_PREPROCESS.inputs])
@pytest.mark.parametrize("fault", ["dtype", "same-size dtype", "rank", "rows"])
def test_preprocess_static_checks(device, name, fault):
    s = idle_preprocess_state(2)
    decode_request(s, 0, 2)
    if fault == "dtype":
        s[name] = _other_dtype(s[name])
        expect = "must be"
    elif fault == "same-size dtype":
        s[name] = _same_size_dtype(s[name])
        expect = "must be"
    elif fault == "rank":
        s[name] = s[name].reshape(s[name].shape + (1, 1))
        expect = "shape"
    else:
        if name in ("seq_lens_this_time",):
            pytest.skip("seq_lens_this_time defines bsz")
        if name == "not_need_stop":
            s[name] = s[name][:0]
            expect = "at least 1 element"
        else:
            s[name] = s[name][: BSZ - 1].copy()
            expect = "fewer than the batch size"
    if name == "not_need_stop" and fault == "rank":
        pytest.skip("not_need_stop is read as a flat flag of any rank")
    attrs = preprocess_attrs(2)
    msg = assert_refused(lambda t: ops.draft_model_preprocess(**t, **attrs),
                         to_tensors(s, device), s, "draft_model_preprocess", None, name)
    assert expect in msg, msg


def _per_request(sig):
    """The inputs the table declares one value a request ([N] or [bsz])."""
    return [t.name for t in sig.inputs if re.match(r"\[(N|bsz)\]( |$)", t.doc)]


def test_the_per_request_inputs_are_every_vector_of_a_valid_batch():
    """The table's "[N]"/"[bsz]" docs pick the inputs below; a doc reworded
    must not silently drop one from the test."""
    pre = idle_preprocess_state(2)
    mask = mask_base()
    for sig, s, flat in ((DRAFT_MODEL_PREPROCESS, pre, {"not_need_stop"}),
                         (UPDATE_ATTN_MASK_OFFSETS, mask, {"ids_remove_padding", "cu_seqlens_q"})):
        vectors = {n for n in sig.input_names if s[n].ndim == 1 and n not in flat}
        assert set(_per_request(sig)) == vectors, sig.name


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", _per_request(DRAFT_MODEL_PREPROCESS) +
                         _per_request(UPDATE_ATTN_MASK_OFFSETS))
def test_a_per_request_vector_of_two_columns_is_refused(device, name):
    """[N, 2] is not [N] or [N, 1]: read as one, its rows would be the wrong
    values (every second one), so it is refused, not read."""
    if name in DRAFT_MODEL_PREPROCESS.input_names:
        s = idle_preprocess_state(2)
        decode_request(s, 0, 2)
        attrs = preprocess_attrs(2)
        op, call = "draft_model_preprocess", lambda t: ops.draft_model_preprocess(**t, **attrs)
    else:
        s, op = mask_base(), "update_attn_mask_offsets"
        call = lambda t: ops.update_attn_mask_offsets(**t)  # noqa: E731
    s[name] = np.stack([s[name], s[name]], axis=1)
    msg = assert_refused(call, to_tensors(s, device), s, op, None, name)
    assert "must have shape [N] or [N, 1]" in msg, msg


@pytest.mark.parametrize("device", DEVICES)
def test_num_model_step_must_be_positive(device):
    s = idle_preprocess_state(2)
    assert_refused(lambda t: ops.draft_model_preprocess(**t, **preprocess_attrs(0)),
                   to_tensors(s, device), s, "draft_model_preprocess", None, "num_model_step")


# ---------------------------------------------------------------------------
# update_attn_mask_offsets


def mask_base(bsz=BSZ):
    s = states.mask_state(np.random.default_rng(3), bsz, padding_tokens=2)
    s["is_block_step"][:] = True
    return s


def decode_mask_request(s, i, n):
    s["is_block_step"][i] = False
    s["seq_lens_encoder"][i] = 0
    s["seq_lens_decoder"][i] = 7
    set_tokens(s, i, n)


def set_tokens(s, i, n):
    s["seq_lens_this_time"][i] = n
    cu = np.zeros(s["seq_lens_this_time"].shape[0] + 1, np.int32)
    cu[1:] = np.cumsum(np.maximum(s["seq_lens_this_time"], 0))
    s["cu_seqlens_q"] = cu
    s["ids_remove_padding"] = np.zeros(int(cu[-1]) + 2, np.int64)


def break_negative_n(s, i):
    decode_mask_request(s, i, 1)
    s["seq_lens_this_time"][i] = -1


def break_tokens_past_ids(s, i):
    decode_mask_request(s, i, 1)
    s["cu_seqlens_q"][i] = s["ids_remove_padding"].shape[0]


def break_overlap_next(s, i):
    decode_mask_request(s, i, 2)
    s["cu_seqlens_q"][i + 1] = s["cu_seqlens_q"][i] + 1


def break_decreasing_at_skipped(s, i):
    # Request i stays skipped (nothing to write) and would overlap nothing,
    # but cu_seqlens_q is prefix sums: a decrease is refused wherever it is.
    s["cu_seqlens_q"][i] = s["cu_seqlens_q"][i + 1] + 1


def break_prompt_past_full(s, i):
    decode_mask_request(s, i, s["attn_mask_offsets_full"].shape[1] + 1)
    s["seq_lens_encoder"][i] = 5
    s["decode_states"][i, 0] = 0


MASK_CASES = {
    "negative seq_lens_this_time": (break_negative_n, "seq_lens_this_time"),
    "tokens past ids_remove_padding": (break_tokens_past_ids, "cu_seqlens_q"),
    "tokens past the next request's first": (break_overlap_next, "cu_seqlens_q"),
    "cu_seqlens_q decreasing at a skipped request": (break_decreasing_at_skipped, "cu_seqlens_q"),
    "prompt longer than attn_mask_offsets_full": (break_prompt_past_full, "attn_mask_offsets_full"),
}


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("case", sorted(MASK_CASES))
def test_mask_request_checks(device, case):
    breaker, field = MASK_CASES[case]
    s = mask_base()
    breaker(s, BAD)
    assert ref_refusal(reference.update_attn_mask_offsets, s) == (BAD, field)
    assert_refused(lambda t: call_op(UPDATE_ATTN_MASK_OFFSETS, t), to_tensors(s, device), s,
                   "update_attn_mask_offsets", BAD, field)


@pytest.mark.parametrize("device", WITH_GUARDED)
def test_mask_last_request_one_token_past_ids_remove_padding(device):
    """cu_seqlens_q's last entry lies past the tokens too, so no later request's
    first token is crossed: only the bound on ids_remove_padding refuses it (in
    "tokens past ids_remove_padding" the next request's start refuses it as
    well, so a bound off by one went unseen there)."""
    s = mask_base()
    last = s["seq_lens_this_time"].shape[0] - 1
    decode_mask_request(s, last, 1)
    T = s["ids_remove_padding"].shape[0]
    s["cu_seqlens_q"][last], s["cu_seqlens_q"][last + 1] = T, T + 1
    assert ref_refusal(reference.update_attn_mask_offsets, s) == (last, "cu_seqlens_q")
    assert_refused(lambda t: call_op(UPDATE_ATTN_MASK_OFFSETS, t), to_tensors(s, device), s,
                   "update_attn_mask_offsets", last, "cu_seqlens_q")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", [t.name for t in UPDATE_ATTN_MASK_OFFSETS.inputs
                                  if t.name != "ids_remove_padding"])
@pytest.mark.parametrize("fault", ["dtype", "same-size dtype", "rows"])
def test_mask_static_checks(device, name, fault):
    s = mask_base()
    if fault == "dtype":
        s[name] = _other_dtype(s[name])
        expect = "must be"
    elif fault == "same-size dtype":
        s[name] = _same_size_dtype(s[name])
        expect = "must be"
    elif name == "seq_lens_this_time":
        pytest.skip("seq_lens_this_time defines bsz")
    elif name == "cu_seqlens_q":
        s[name] = s[name][: BSZ - 1].copy()  # bsz entries are taken; one fewer is not
        expect = "at least"
    else:
        s[name] = s[name][: BSZ - 1].copy()
        expect = "fewer than the batch size"
    msg = assert_refused(lambda t: ops.update_attn_mask_offsets(**t), to_tensors(s, device), s,
                         "update_attn_mask_offsets", None, name)
    assert expect in msg, msg


@pytest.mark.parametrize("device", DEVICES)
def test_decode_states_needs_a_column(device):
    s = mask_base()
    s["decode_states"] = s["decode_states"][:, :0].copy()
    msg = assert_refused(lambda t: ops.update_attn_mask_offsets(**t), to_tensors(s, device), s,
                         "update_attn_mask_offsets", None, "decode_states")
    assert "at least 1 columns" in msg


# First, middle and last request; batches of 1 and 2; both sides of the GPU's
# one-block limits (update_attn_mask_offsets: 32 requests, a warp each;
# draft_model_preprocess: 256) and grids of several blocks, with warps that
# take several requests (the mask op past 2048).
POSITIONS = [(1, 0), (2, 0), (2, 1), (7, 3), (32, 31), (33, 32), (256, 255), (257, 256),
             (512, 511), (513, 0),
             (513, 512), (1025, 512), (2049, 2048), (4097, 4096), (4097, 2049)]


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("case", sorted(PREPROCESS_CASES))
@pytest.mark.parametrize("bsz,where", POSITIONS)
def test_preprocess_refusal_at_every_position(device, case, bsz, where):
    breaker, field = PREPROCESS_CASES[case]
    k = 3
    s = idle_preprocess_state(k, bsz)
    breaker(s, where, k)
    attrs = preprocess_attrs(k, v1=True)
    assert_refused(lambda t: call_op(DRAFT_MODEL_PREPROCESS, t, attrs), to_tensors(s, device), s,
                   "draft_model_preprocess", where, field)


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("case", sorted(MASK_CASES))
@pytest.mark.parametrize("bsz,where", POSITIONS)
def test_mask_refusal_at_every_position(device, case, bsz, where):
    breaker, field = MASK_CASES[case]
    s = mask_base(bsz)
    breaker(s, where)
    assert_refused(lambda t: call_op(UPDATE_ATTN_MASK_OFFSETS, t), to_tensors(s, device), s,
                   "update_attn_mask_offsets", where, field)


# Random corruption, the whole state at once: up to three cells of any of an
# op's integer inputs, each set to a limit of its dtype, a value around zero,
# a size a request's rules compare with (bounds_of), or moved by 1 or 2. The
# op and the reference must come to the same end: both refuse naming the
# same request and field, the op changing nothing, or both accept and leave
# the same arrays. The cases above each provoke one check on purpose; these
# find what no one thought to provoke (several bad values in one request or
# several requests, a bad value in a field no case names).
CORRUPT_VALUES = EXTREMES + (0, 1, 2, 3, 7, 64, 2**31 - 2)
CORRUPT_SETTINGS = settings(max_examples=150, deadline=None,
                            suppress_health_check=[HealthCheck.too_slow])


def _integer_inputs(sig):
    return [a.name for a in sig.inputs if a.dtype in (np.int32, np.int64)]


class Corrupted:
    """A random valid state of one op with `cells` of its integer inputs'
    cells corrupted (random values, sizes the checks compare with, or a
    nudge), and how to run the op and the reference on it."""

    def __init__(self, rng, state, sig, attrs, run_ref, cells, context, narrow=False):
        if narrow:
            narrow_tables(rng, state, keep=("decode_states",))
        self.rng, self.state, self.sig, self.fields = rng, state, sig, _integer_inputs(sig)
        self.run_op = lambda t: call_op(sig, t, attrs)
        self.run_ref, self.context = run_ref, context
        corrupt(rng, state, self.fields, cells, CORRUPT_VALUES + bounds_of(state), nudge=True)

    @classmethod
    def preprocess(cls, seed, bsz, k, truncate, splitwise, v1, extra_rows, cells, narrow=False):
        rng = np.random.default_rng(seed)
        s = states.preprocess_state(rng, bsz, num_model_step=k, splitwise_prefill=splitwise,
                                    truncate_first_token=truncate, extra_rows=extra_rows)
        attrs = preprocess_attrs(k, truncate, splitwise, v1)
        return cls(rng, s, DRAFT_MODEL_PREPROCESS, attrs,
                   lambda r: reference.draft_model_preprocess(r, **attrs), cells,
                   f"seed={seed} bsz={bsz} attrs={attrs}", narrow)

    @classmethod
    def mask(cls, seed, bsz, extra_rows, padding, cols, cells, narrow=False):
        rng = np.random.default_rng(seed)
        s = states.mask_state(rng, bsz, extra_rows=extra_rows, padding_tokens=padding,
                              mask_cols=cols)
        return cls(rng, s, UPDATE_ATTN_MASK_OFFSETS, {},
                   reference.update_attn_mask_offsets, cells,
                   f"seed={seed} bsz={bsz} cols={cols}", narrow)

    def assert_ends_as_in_the_reference(self, device):
        mismatch = outcome_mismatch(self.run_op, self.run_ref, self.state, device, field=True,
                                    sig=self.sig)
        assert mismatch is None, f"{self.context}: {mismatch}"

    def assert_ends_as_in_the_reference_at_a_bound(self, device):
        found = seek_bound(self.rng, self.state, self.fields, self.run_ref)
        assume(found is not None)
        mismatch = mismatch_at_bound(self.state, found, self.run_op, self.run_ref, device)
        assert mismatch is None, f"{self.context}: {mismatch}"


PREPROCESS_DRAWS = dict(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 6),
                        truncate=st.booleans(), splitwise=st.booleans(), v1=st.booleans())
MASK_DRAWS = dict(seed=st.integers(0, 2**32 - 1), padding=st.integers(0, 3),
                  cols=st.sampled_from([None, 80, 130]))
CORRUPT_SIZES = dict(bsz=st.integers(1, 64), extra_rows=st.integers(0, 2),
                     cells=st.integers(1, 3))


@pytest.mark.parametrize("device", WITH_GUARDED)
@CORRUPT_SETTINGS
@given(**CORRUPT_SIZES, **PREPROCESS_DRAWS)
def test_corrupted_preprocess_state_ends_as_in_the_reference(device, **draws):
    Corrupted.preprocess(**draws).assert_ends_as_in_the_reference(device)


@pytest.mark.parametrize("device", WITH_GUARDED)
@CORRUPT_SETTINGS
@given(**CORRUPT_SIZES, **MASK_DRAWS)
def test_corrupted_mask_state_ends_as_in_the_reference(device, **draws):
    Corrupted.mask(**draws).assert_ends_as_in_the_reference(device)


# The narrowest tables the op takes: a 2-D input of 0, 1 or 2 columns (the
# static checks ask for none but decode_states' first), where a request's
# first column, or its kept tokens, may lie past its row: every read and
# write must stay inside, so the op refuses or computes what the reference
# does. With up to two cells corrupted besides.
NARROW_SIZES = dict(bsz=st.integers(1, 24), extra_rows=st.integers(0, 1),
                    cells=st.integers(0, 2))


@pytest.mark.parametrize("device", WITH_GUARDED)
@CORRUPT_SETTINGS
@given(**NARROW_SIZES, **PREPROCESS_DRAWS)
def test_preprocess_with_narrow_tables_ends_as_in_the_reference(device, **draws):
    Corrupted.preprocess(**draws, narrow=True).assert_ends_as_in_the_reference(device)


@pytest.mark.parametrize("device", WITH_GUARDED)
@CORRUPT_SETTINGS
@given(**NARROW_SIZES, **MASK_DRAWS)
def test_mask_with_narrow_tables_ends_as_in_the_reference(device, **draws):
    Corrupted.mask(**draws, narrow=True).assert_ends_as_in_the_reference(device)


# Every bound, exactly: one cell moved onto a value where the reference's
# verdict changes (seek_bound bisects to it, knowing no rule), then the op
# must end as the reference does on both sides of it. Random values rarely
# land on a bound (accept_num at its columns + 1, a request's last token one
# past the batch's); here every example does, for whatever rule the cell
# takes part in, a check's order among the request's checks included. Small
# batches: the bisection runs the reference some 30 to 64 times.
BOUND_SETTINGS = settings(max_examples=120, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
BOUND_SIZES = dict(bsz=st.integers(1, 16), extra_rows=st.integers(0, 1), cells=st.integers(0, 1))


@pytest.mark.parametrize("device", WITH_GUARDED)
@BOUND_SETTINGS
@given(**BOUND_SIZES, **PREPROCESS_DRAWS)
def test_preprocess_at_a_bound_ends_as_in_the_reference(device, **draws):
    Corrupted.preprocess(**draws).assert_ends_as_in_the_reference_at_a_bound(device)


@pytest.mark.parametrize("device", WITH_GUARDED)
@BOUND_SETTINGS
@given(**BOUND_SIZES, **MASK_DRAWS)
def test_mask_at_a_bound_ends_as_in_the_reference(device, **draws):
    Corrupted.mask(**draws).assert_ends_as_in_the_reference_at_a_bound(device)
