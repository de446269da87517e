"""The raw registered ops, called positionally as FastDeploy calls them, and
what they refuse: a wrong dtype, a row too few, a written tensor passed again
as another argument."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fastdeploy_mtp.signature import FLAG
from helpers import assert_states_equal, to_numpy, to_tensors


def raw_refusal_cases(sig, state, bsz_from="seq_lens_this_time"):
    """(case id, bad state, expected message) for op `sig`'s raw registered op
    on `state`: every input of a known dtype given as float32, and every
    per-request input but the one that sets the batch size given one row too
    few. The raw op is what FastDeploy calls, positionally."""
    bsz = state[bsz_from].shape[0]
    cases = []
    for t in sig.inputs:
        if t.dtype is not None:
            bad = dict(state, **{t.name: state[t.name].astype(np.float32)})
            cases.append((f"{t.name}-dtype", bad,
                          f"{t.name} must be {np.dtype(t.dtype).name}, "
                          "got float32"))
        if t.name != bsz_from and state[t.name].shape[0] == bsz and bsz > 1:
            bad = dict(state, **{t.name: state[t.name][:bsz - 1].copy()})
            cases.append((f"{t.name}-rows", bad,
                          f"{t.name} has {bsz - 1} rows, fewer than the batch size {bsz}"))
    return cases


def call_raw(library, sig, tensors, attrs=()):
    """`sig`'s raw registered op of `library`, positionally, as FastDeploy calls it."""
    return getattr(library, sig.name)(*[tensors[n] for n in sig.input_names], *attrs)


RAW_REFUSED = (OSError, ValueError, RuntimeError)  # what Paddle makes of a C++ refusal


def same_kind_pairs(sig, state, not_read=()):
    """(written, other): every written tensor of `sig`, declared in place or
    not, and every other argument of its dtype and rank in `state` that the op
    reads (`not_read` may alias anything)."""
    kind = {n: (state[n].dtype, state[n].ndim) for n in sig.input_names}
    return [(w, o) for w in sig.written for o in sig.input_names
            if o != w and o not in not_read and kind[o] == kind[w]]


def assert_raw_alias_refused(library, sig, state, written, other, attrs, device):
    """`written` passed again as `other` to the raw op: refused, naming both,
    with every tensor unchanged. The flag, which may be on the host or the
    device, is on the device where it shares another tensor's memory there
    (on the host it would be refused for its place first)."""
    s = dict(state)
    if s[other].shape != s[written].shape:  # the overlap, not a shape, is what is refused
        s[other] = s[written].copy()
    t = to_tensors(s, device, host_flag=FLAG not in (sig.input(written).check,
                                                     sig.input(other).check))
    t[other] = t[written]
    before = dict(s, **{other: s[written]})
    with pytest.raises(RAW_REFUSED, match="share memory") as e:
        call_raw(library, sig, t, attrs)
    assert written in str(e.value) and other in str(e.value), str(e.value)
    assert_states_equal(to_numpy(t), before)


def assert_raw_refused(library, sig, state, attrs, message, device):
    """The raw op refuses `state` with `message`, every tensor unchanged."""
    t = to_tensors(state, device)
    with pytest.raises(RAW_REFUSED, match=re.escape(message)):
        call_raw(library, sig, t, attrs)
    assert_states_equal(to_numpy(t), state)
