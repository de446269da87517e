"""Bad states and how the op and the numpy reference end on them: cells
corrupted to extreme values, tables cut narrow, a cell moved onto the bound
where the reference's verdict changes, and the comparison of the two
outcomes (the same refusal with nothing changed, or the same arrays)."""

from __future__ import annotations

import numpy as np

from fastdeploy_mtp import _build, ops
from helpers import GUARDED, to_numpy, to_tensors


# Values a corrupted cell takes, clipped to its field's dtype (an int32 field
# gets the int32 limits).
EXTREMES = (-(2**63), -(2**31), -5, -1, 10**6, 2**31 - 1, 2**63 - 1)


def random_cell(rng, s, fields):
    """A random cell of a state: (field, its flat view, index), in a random
    one of `fields`, at any column (a 2-D field's deep columns are a long
    prompt's tokens) of a request's row or of row bsz: cu_seqlens_q's last
    entry (where the last request's tokens must end), or a row past the
    batch that the ops must not read."""
    fields = [f for f in fields if s[f].size]  # a table of no columns has no cell
    name = fields[rng.integers(len(fields))]
    rows = min(s[name].shape[0], s["seq_lens_this_time"].shape[0] + 1)
    cols = s[name].shape[1] if s[name].ndim == 2 else 1
    return name, s[name].reshape(-1), int(rng.integers(rows)) * cols + int(rng.integers(cols))


def corrupt(rng, s, fields, cells=1, values=EXTREMES, nudge=False):
    """Sets `cells` random cells of a state (random_cell) to random `values`.
    With `nudge`, half of them move by 1 or 2 from their value instead (onto a
    bound the state was drawn next to)."""
    for _ in range(cells):
        _, arr, i = random_cell(rng, s, fields)
        info = np.iinfo(arr.dtype)
        if nudge and rng.integers(2):
            v = int(arr[i]) + int(rng.choice([-2, -1, 1, 2]))
        else:
            v = values[rng.integers(len(values))]
        arr[i] = np.clip(v, info.min, info.max)


def narrow_tables(rng, s, keep=()):
    """Trims some of a state's 2-D inputs to 0, 1 or 2 columns (at least 1
    for the fields in `keep`, which the op needs a column of): the narrowest
    tables the op takes, where a request's first column may already be
    past the row."""
    for name in sorted(k for k, v in s.items() if v.ndim == 2):
        if rng.integers(2):
            cols = int(rng.integers(1 if name in keep else 0, 3))
            s[name] = np.ascontiguousarray(s[name][:, :cols])


def bounds_of(s):
    """The sizes a state's checks compare with, and one either side: each 2-D
    field's columns, and the batch's tokens (ids_remove_padding's length)."""
    sizes = {a.shape[1] for a in s.values() if a.ndim == 2}
    if "ids_remove_padding" in s:
        sizes.add(s["ids_remove_padding"].shape[0])
    return tuple(n + d for n in sorted(sizes) for d in (-1, 0, 1))


def refusal_said(error, field=True):
    """What a refusal names: "request N" and, with `field`, ": field" ("op:
    request N: field: ..."; the op and the reference word the rest each
    their own way)."""
    return ": ".join(str(error).split(": ")[1:3 if field else 2])


def verdict(run_ref, state):
    """None where the reference accepts `state`, else the request and field
    it names; `state` is left as it was."""
    try:
        run_ref({k: v.copy() for k, v in state.items()})
    except ops.BadInputError as e:
        return refusal_said(e)
    return None


def seek_bound(rng, s, fields, run_ref, tries=16):
    """Moves one random cell of `s` (random_cell) onto a bound: a value v
    such that v and a neighbour (v - 1 or v + 1, returned) get different
    verdicts from the reference. It bisects between the cell's value and a
    limit of its dtype that changes the verdict, so it finds an exact bound
    without knowing the rule behind it (a column count, the batch's tokens,
    zero, INT32_MAX less another value) and whichever check comes first
    there. Returns (field, index, neighbour), or None where no cell of
    `tries` changed the verdict at either limit (`s` as it was)."""
    base = verdict(run_ref, s)
    for _ in range(tries):
        name, arr, i = random_cell(rng, s, fields)
        info = np.iinfo(arr.dtype)
        start = int(arr[i])

        def differs(v):
            arr[i] = v
            return verdict(run_ref, s) != base

        far = next((f for f in rng.permutation([info.min, info.max]) if differs(int(f))), None)
        if far is None:
            arr[i] = start
            continue
        same, other = start, int(far)  # the verdict: base at `same`, not at `other`
        while abs(other - same) > 1:
            mid = (same + other) // 2
            if differs(mid):
                other = mid
            else:
                same = mid
        here, there = (same, other) if rng.integers(2) else (other, same)
        arr[i] = here
        return name, i, there
    return None


def empty_written(sig, state, device) -> list:
    """The inputs `sig` writes in place that have no elements in `state`,
    where the op on `device` refuses them: Paddle 2 takes an in-place output
    with no elements for one never given memory and raises after the op has
    run, so there the op refuses it before any write (tensor_checks.h).
    Paddle 3 and the guarded driver (no Paddle) take them."""
    if device == GUARDED or _build.paddle_major() >= 3:
        return []
    return [a.name for a in sig.inputs if a.written and state[a.name].size == 0]


def outcome_mismatch(run_op, run_ref, state, device="cpu", field=False, sig=None):
    """None where the op on `device` and the numpy reference, each given
    `state`, both refuse it naming the same request (with `field`, and the
    same field: the reference words the rest its own way) and the op leaves
    every tensor unchanged, or both accept it and leave the same arrays (and
    output); else what differed. Given the op's `sig`, a state with a written
    tensor of no elements must instead be refused for it on Paddle 2
    (empty_written)."""
    ref_state = {k: v.copy() for k, v in state.items()}
    try:
        ref_out, ref_err = run_ref(ref_state), None
    except ops.BadInputError as e:
        ref_out, ref_err = None, refusal_said(e, field)
    empty = empty_written(sig, state, device) if sig is not None else []
    t = to_tensors(state, device)
    try:
        out, err = run_op(t), None
    except ops.BadInputError as e:
        out, err = None, refusal_said(e, field)
    got = to_numpy(t)
    if empty:
        if err is None or err.split(" is written in place but has no elements")[0] not in empty:
            return f"the op said {err!r}, not that one of {empty} is written and empty"
        ref_err = err
    if err is not None or ref_err is not None:
        if err != ref_err:
            return f"the op said {err!r}, the reference {ref_err!r}"
        changed = [k for k in state if got[k].tobytes() != state[k].tobytes()]
        return f"refused, but changed {changed}" if changed else None
    if out is not None and not np.array_equal(out, ref_out):
        return "attn_mask_offsets differ"
    differ = [k for k in state if not np.array_equal(got[k], ref_state[k])]
    return f"{differ} differ" if differ else None


def mismatch_at_bound(s, found, run_op, run_ref, device="cpu"):
    """outcome_mismatch (naming the field) on each side of the bound that
    seek_bound `found` in `s`, or None; `s` ends on the far side."""
    name, i, there = found
    for side in ("here", "there"):
        mismatch = outcome_mismatch(run_op, run_ref, s, device, field=True)
        if mismatch is not None:
            return f"{name}[{i}] = {s[name].reshape(-1)[i]} ({side}): {mismatch}"
        s[name].reshape(-1)[i] = there
    return None
