"""Every form's refusals at the int32 and int64 extremes: for each sum and
difference a form's rules compute (custom_ops/mtp_bookkeeping.h:
preprocess_failures, mask_request_failures, the rollback's new value, the
shadow form's length limit), a state whose result lies exactly on the bound
and one whose result lies one past it, each run by the form's op and by its
numpy reference.

The reference of the rollback, recompute and shadow forms is
fastdeploy_mtp/reference.py, which refuses by its own rules. The forms that
are FastDeploy's own kernels (pr5245, pr5738, pr6403, xpu) are held to the
numpy model of that kernel (fastdeploy_mtp/reference_fastdeploy.py), which
wraps where the kernel's int arithmetic wraps; here it runs with its wrap
made strict (a value that would wrap raises), so "the model would wrap" is
the refusal the form's op must make, and where nothing wraps the two must
leave the same arrays. Either way a refused call changes no tensor, and the
state at the bound is accepted while the one past it is refused: each case
is shown to sit on the bound it names.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from fastdeploy_mtp import forms, ops, reference, reference_fastdeploy
from fastdeploy_mtp.harness import states
from fastdeploy_mtp.signature import FORMS
import guarded
from case_states import one_token_decodes, recompute_decode_state, running_decodes
from case_states import shadow_decode_state as case_shadow_decode_state
from fastdeploy_forms import FASTDEPLOY_MODELS
from helpers import WITH_GUARDED, GUARDED, preprocess_attrs, to_numpy, to_tensors

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
K = 3          # num_model_step: a decode rolls back K - 1 = 2
VICTIM = 1     # the request set on the bound, in a batch of three


class Wraps(ArithmeticError):
    """The kernel's int arithmetic would leave its type here."""


def _strict(bits):
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def check(x):
        if not lo <= int(x) <= hi:
            raise Wraps(f"{int(x)} leaves int{bits}")
        return int(x)
    return check


@contextlib.contextmanager
def strict_wraps():
    """reference_fastdeploy's kernels with every wrapping sum raising Wraps."""
    saved = reference_fastdeploy.wrap32, reference_fastdeploy.wrap64
    reference_fastdeploy.wrap32, reference_fastdeploy.wrap64 = _strict(32), _strict(64)
    try:
        yield
    finally:
        reference_fastdeploy.wrap32, reference_fastdeploy.wrap64 = saved


# ---------------------------------------------------------------------------
# Each form's states, ops and references


def _ours(form, s):
    return {n: s[n] for n in FORMS[form]["draft_model_preprocess"].input_names}


def rollback_decode_state(bsz=3):
    """The rollback form's running decodes, one token accepted, room to roll back."""
    return running_decodes(states.preprocess_state(np.random.default_rng(7), bsz,
                                                   num_model_step=K))


def shadow_decode_state(bsz=3):
    """The shadow form's running decodes, far from their length limit."""
    return case_shadow_decode_state(K, bsz)


def decode_state(form):
    if form == "rollback":
        return rollback_decode_state()
    if form == "shadow":
        return shadow_decode_state()
    s = recompute_decode_state(K, bsz=3)
    s["base_model_seq_lens_this_time"][:] = K + 1
    s["recompute_token_num"][:] = K - 1
    return _ours(form, s)


def attrs_of(form):
    if form == "shadow":
        return dict(num_model_step=K, is_splitwise_prefill=False)
    return preprocess_attrs(K, v1=True)


CORRECTED = tuple(f for f in FORMS if f.startswith("corrected_"))


def _corrected(fn, form):
    return lambda s, **attrs: fn(s, **attrs, form=form)


REFERENCES = {"rollback": reference.draft_model_preprocess,
              "recompute": reference.draft_model_preprocess_recompute,
              "shadow": reference.draft_model_preprocess_shadow,
              **{f: _corrected(reference.draft_model_preprocess_corrected, f)
                 for f in CORRECTED}}
MASK_REFERENCES = {"pr6403": reference.update_attn_mask_offsets_pr6403,
                   "shadow": reference.update_attn_mask_offsets_shadow,
                   **{f: _corrected(reference.update_attn_mask_offsets_corrected, f)
                      for f in CORRECTED}}


def reference_verdict(form, op, state):
    """(request refused or None, the state after, the output) by `form`'s
    numpy reference; `state` is left as it was."""
    s = {k: v.copy() for k, v in state.items()}
    try:
        if op == "update_attn_mask_offsets":
            out = MASK_REFERENCES.get(form, reference.update_attn_mask_offsets)(s)
            return None, s, out
        if form in FASTDEPLOY_MODELS:
            with strict_wraps():
                FASTDEPLOY_MODELS[form](s, **attrs_of(form))
        else:
            REFERENCES[form](s, **attrs_of(form))
    except ops.BadInputError as e:
        return str(e), None, None
    except (Wraps, reference_fastdeploy.OutOfRowAccess) as e:
        return f"{e}", None, None
    return None, s, None


def op_verdict(form, op, state, device):
    """(refusal or None, the state after, the output) by `form`'s op on `device`."""
    sig = FORMS[form][op]
    attrs = attrs_of(form) if op == "draft_model_preprocess" else {}
    t = to_tensors(state, device)
    try:
        if device == GUARDED:
            out = guarded.call(sig, t, attrs, form=form)
        else:
            out = getattr(forms.load(form), op)(**t, **attrs)
            out = None if out is None else out.numpy()
    except ops.BadInputError as e:
        after = to_numpy(t)
        changed = [n for n in state if after[n].tobytes() != state[n].tobytes()]
        assert not changed, f"refused ({e}) but changed {changed}"
        return str(e), None, None
    return None, to_numpy(t), out


def assert_on_the_bound(form, op, at, past, device, what):
    """`at` is accepted by the op and the reference alike, with the same
    arrays; `past` is refused by both, the op naming request VICTIM and
    changing nothing."""
    ref_err, want, want_out = reference_verdict(form, op, at)
    assert ref_err is None, f"{what}: the reference refuses the state at the bound: {ref_err}"
    err, got, out = op_verdict(form, op, at, device)
    assert err is None, f"{what}: the op refuses the state at the bound: {err}"
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"{what}: {name}")
    if want_out is not None:
        np.testing.assert_array_equal(out, want_out, err_msg=f"{what}: attn_mask_offsets")
    ref_err, _, _ = reference_verdict(form, op, past)
    assert ref_err is not None, f"{what}: the reference accepts the state past the bound"
    err, _, _ = op_verdict(form, op, past, device)
    assert err is not None, f"{what}: the op accepts the state past the bound"
    assert f"request {VICTIM}:" in err, f"{what}: {err}"


# ---------------------------------------------------------------------------
# draft_model_preprocess: (forms, setup, field, value at the bound, one past)

ROLLS_BACK_K = ("rollback", "pr5245", "xpu")      # a running decode rolls back k - 1
RECOMPUTES = ("recompute", "pr5738", "pr6403")    # ... the recomputed tokens
KERNELS = ("pr5245", "pr5738", "pr6403", "xpu")   # FastDeploy's kernel: its re-sync


def _set_cell(s, name, i, v):
    """Request i's value of `name` (a 2-D table's column 0)."""
    a = s[name]
    if a.ndim == 2:
        a[i, 0] = v
    else:
        a[i] = v


def _set(**values):
    def setup(s, i):
        for name, v in values.items():
            _set_cell(s, name, i, v)
    return setup


def _recomputing(r):
    """recompute_token_num r; base_model_seq_lens_this_time leaves it unclamped."""
    return _set(recompute_token_num=r, base_model_seq_lens_this_time=r + 2 if r > 0 else 4)


PREPROCESS_CASES = {
    # A running decode's seq_lens_decoder and step_idx less k - 1.
    "seq_lens_decoder - (k-1) at int32 min": (
        ROLLS_BACK_K, _set(), "seq_lens_decoder", I32_MIN + 2, I32_MIN + 1),
    "step_idx - (k-1) at int64 min": (
        ROLLS_BACK_K, _set(), "step_idx", I64_MIN + 2, I64_MIN + 1),
    # The rollback form's mask_rollback plus the change of seq_lens_decoder,
    # on each branch that changes it.
    "mask_rollback + (k-1) at int32 max": (
        ("rollback",), _set(), "mask_rollback", I32_MAX - 2, I32_MAX - 1),
    "a stop's mask_rollback + seq_lens_decoder at int32 max": (
        ("rollback",), _set(base_model_stop_flags=True), "mask_rollback", I32_MAX - 40,
        I32_MAX - 39),
    "a re-sync's mask_rollback + a negative change at int32 min": (
        ("rollback",), _set(stop_flags=True, mask_rollback=I32_MIN, accept_num=1),
        "base_model_seq_lens_decoder", 41, 42),
    "a re-sync's base_model_seq_lens_decoder - accept_num at int32 min": (
        ("rollback",), _set(stop_flags=True, mask_rollback=I32_MIN, accept_num=1),
        "base_model_seq_lens_decoder", I32_MIN + 1, I32_MIN),
    # The recomputed tokens: mask_rollback plus them, seq_lens_decoder and
    # step_idx less them, either sign (a negative recompute_token_num steps up).
    "mask_rollback + recomputed at int32 max": (
        RECOMPUTES, _recomputing(2), "mask_rollback", I32_MAX - 2, I32_MAX - 1),
    "mask_rollback + a negative recomputed at int32 min": (
        RECOMPUTES, _recomputing(-2), "mask_rollback", I32_MIN + 2, I32_MIN + 1),
    "seq_lens_decoder - recomputed at int32 min": (
        RECOMPUTES, _recomputing(2), "seq_lens_decoder", I32_MIN + 2, I32_MIN + 1),
    "seq_lens_decoder - a negative recomputed at int32 max": (
        RECOMPUTES, _recomputing(-2), "seq_lens_decoder", I32_MAX - 2, I32_MAX - 1),
    "step_idx - recomputed at int64 min": (
        RECOMPUTES, _recomputing(2), "step_idx", I64_MIN + 2, I64_MIN + 1),
    "step_idx - a negative recomputed at int64 max": (
        RECOMPUTES, _recomputing(-2), "step_idx", I64_MAX - 2, I64_MAX - 1),
    # FastDeploy's kernel re-syncs a stopped draft from
    # base_model_seq_lens_this_time, of either sign (accept_num 0: no
    # pre_ids window to check first).
    "a re-sync's base decoder - base_model_seq_lens_this_time at int32 min": (
        KERNELS, _set(stop_flags=True, base_model_seq_lens_this_time=2),
        "base_model_seq_lens_decoder", I32_MIN + 2, I32_MIN + 1),
    "a re-sync's base decoder - a negative base_model_seq_lens_this_time at int32 max": (
        KERNELS, _set(stop_flags=True, base_model_seq_lens_this_time=-1),
        "base_model_seq_lens_decoder", I32_MAX - 1, I32_MAX),
    "a re-sync's base step - base_model_seq_lens_this_time at int64 min": (
        KERNELS, _set(stop_flags=True, base_model_seq_lens_this_time=2, accept_num=0),
        "base_model_step_idx", I64_MIN + 2, I64_MIN + 1),
    "a re-sync's base step - a negative base_model_seq_lens_this_time at int64 max": (
        KERNELS, _set(stop_flags=True, base_model_seq_lens_this_time=-1, accept_num=0),
        "base_model_step_idx", I64_MAX - 1, I64_MAX),
    # The shadow form: a decode takes the target's lengths less accept_num;
    # a prefill takes the target's step less 1.
    "shadow decode's target decoder - accept_num at int32 min": (
        ("shadow",), _set(), "target_model_seq_lens_decoder", I32_MIN + 2, I32_MIN + 1),
    "shadow prefill's target step - 1 at int64 min": (
        ("shadow",), _set(seq_lens_encoder=2), "target_model_step_idx", I64_MIN + 1, I64_MIN),
}

def _corrected_resync(change):
    """A corrected decode (every decode re-syncs): accept_num 1, its
    seq_lens_decoder `change` above the base model's less accept_num, and a
    mask_rollback (where the form has one) that leaves room for any new
    seq_lens_decoder."""
    def setup(s, i):
        _set_cell(s, "accept_num", i, 1)
        S = int(s["seq_lens_decoder"].reshape(s["seq_lens_decoder"].shape[0], -1)[i, 0])
        _set_cell(s, "base_model_seq_lens_decoder", i, S - change + 1)
        if "mask_rollback" in s:
            _set_cell(s, "mask_rollback", i, I32_MIN)
    return setup


def _corrected_rollback(change):
    def setup(s, i):
        _set_cell(s, "accept_num", i, 1)
        S = int(s["seq_lens_decoder"].reshape(s["seq_lens_decoder"].shape[0], -1)[i, 0])
        _set_cell(s, "base_model_seq_lens_decoder", i, S - change + 1)
    return setup


PREPROCESS_CASES.update({
    # The corrected forms: every running decode takes the base model's
    # seq_lens_decoder less accept_num (a stopped draft or not), and adds the
    # change of seq_lens_decoder to mask_rollback where the form has one.
    "a corrected decode's base decoder - accept_num at int32 min": (
        CORRECTED, _corrected_resync(0), "base_model_seq_lens_decoder", I32_MIN + 1, I32_MIN),
    "a corrected decode's mask_rollback + the change at int32 max": (
        ("corrected_pr5738", "corrected_pr6403"), _corrected_rollback(2), "mask_rollback",
        I32_MAX - 2, I32_MAX - 1),
})

PREPROCESS_PARAMS = [(form, case) for case, (fs, *_) in sorted(PREPROCESS_CASES.items())
                     for form in fs]


def _states(form, case):
    _, setup, field, at_value, past_value = PREPROCESS_CASES[case]
    at, past = decode_state(form), decode_state(form)
    for s, v in ((at, at_value), (past, past_value)):
        setup(s, VICTIM)
        _set_cell(s, field, VICTIM, v)
    return at, past


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("form,case", PREPROCESS_PARAMS)
def test_preprocess_at_and_one_past_each_bound(device, form, case):
    at, past = _states(form, case)
    assert_on_the_bound(form, "draft_model_preprocess", at, past, device, f"{form}: {case}")


def test_every_form_has_preprocess_bounds():
    assert {f for f, _ in PREPROCESS_PARAMS} == set(FORMS)


# The shadow form's length limit: target step + k >= max_dec_len skips the
# request, compared without forming a sum that could leave int64. Not a
# refusal: the op must leave what the reference leaves on every side of it.
@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("max_dec_len,step,skipped", [
    (I64_MAX, I64_MAX - K - 1, False),
    (I64_MAX, I64_MAX - K, True),       # the sum is INT64_MAX: at the limit
    (I64_MAX, I64_MAX - K + 1, True),   # the sum would leave int64
    (I64_MAX, I64_MAX, True),
    (I64_MIN, I64_MIN, True),           # any step is at or past a limit of INT64_MIN
    (I64_MIN + K + 1, I64_MIN + 1, True),
    (I64_MIN + K + 2, I64_MIN + 1, False),
])
def test_shadow_length_limit_at_the_int64_ends(request, device, max_dec_len, step, skipped):
    s = shadow_decode_state()
    s["accept_num"][VICTIM] = 0  # no pre_ids window: any step is a valid decode
    s["max_dec_len"][VICTIM] = max_dec_len
    s["target_model_step_idx"][VICTIM] = step
    ref_err, want, _ = reference_verdict("shadow", "draft_model_preprocess", s)
    err, got, _ = op_verdict("shadow", "draft_model_preprocess", s, device)
    assert ref_err is None and err is None, (ref_err, err)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert bool(got["stop_flags"][VICTIM]) == skipped


# ---------------------------------------------------------------------------
# update_attn_mask_offsets: a decode's cursor less its rollback, and its end;
# a vision-generation request's end.


def mask_state(form, bsz=3):
    """Every request a decode of one token."""
    s = one_token_decodes(bsz, rollback=0)
    return {n: s[n] for n in FORMS[form]["update_attn_mask_offsets"].input_names}


CURSOR_FORMS = tuple(f for f in FORMS if f != "shadow" and f not in CORRECTED)
MASK_CASES = {
    "cursor - rollback at 0": (
        CURSOR_FORMS, _set(attn_mask_offsets_decoder=40), "mask_rollback", 40, 41),
    "cursor - rollback + tokens at int32 max": (
        CURSOR_FORMS, _set(mask_rollback=0), "attn_mask_offsets_decoder", I32_MAX - 1, I32_MAX),
    # -1 - INT32_MIN is INT32_MAX: the difference leaves int32 on its own.
    "cursor - a rollback near int32 min, + tokens at int32 max": (
        CURSOR_FORMS, _set(attn_mask_offsets_decoder=-1), "mask_rollback", I32_MIN + 1, I32_MIN),
    "a vision generation's seq_lens_decoder + tokens at int32 max": (
        tuple(FORMS), _set(seq_lens_encoder=5, decode_states=2), "seq_lens_decoder",
        I32_MAX - 1, I32_MAX),
    "a decode numbered from its KV positions: seq_lens_decoder + tokens at int32 max": (
        ("shadow", *CORRECTED), _set(), "seq_lens_decoder", I32_MAX - 1, I32_MAX),
}
MASK_PARAMS = [(form, case) for case, (fs, *_) in sorted(MASK_CASES.items()) for form in fs]


@pytest.mark.parametrize("device", WITH_GUARDED)
@pytest.mark.parametrize("form,case", MASK_PARAMS)
def test_mask_at_and_one_past_each_bound(device, form, case):
    _, setup, field, at_value, past_value = MASK_CASES[case]
    at, past = mask_state(form), mask_state(form)
    for s, v in ((at, at_value), (past, past_value)):
        setup(s, VICTIM)
        _set_cell(s, field, VICTIM, v)
    assert_on_the_bound(form, "update_attn_mask_offsets", at, past, device, f"{form}: {case}")
