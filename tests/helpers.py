"""Shared test helpers: run an op on numpy state through Paddle tensors."""

from __future__ import annotations

import os
import re
import sys

import numpy as np
import paddle
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastdeploy_mtp import _build, forms, ops, reference, reference_fastdeploy
from fastdeploy_mtp.harness import states  # noqa: E402
from fastdeploy_mtp.buffers import tensors  # noqa: E402
from fastdeploy_mtp.signature import FLAG, DRAFT_MODEL_PREPROCESS, UPDATE_ATTN_MASK_OFFSETS  # noqa: E402


def gpu_available() -> bool:
    return paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0


DEVICES = ["cpu"] + (["gpu"] if gpu_available() else [])
# The CPU driver with a guard page on each side of every tensor (tests/guarded.py):
# its "tensors" are a state's numpy arrays, and call_op runs it. It comes first,
# so that a write outside a tensor faults before a Paddle tensor hides it.
GUARDED = "guarded"
WITH_GUARDED = [GUARDED] + DEVICES


def place_of(device: str):
    """"cpu", "gpu" (gpu:0) or "gpu:N"."""
    if device == "cpu":
        return paddle.CPUPlace()
    return paddle.CUDAPlace(int(device.partition(":")[2] or 0))


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


def to_tensors(state, device="cpu", host_flag=True):
    """Paddle tensors of a numpy state on `device` ("cpu", "gpu" or "gpu:N"),
    or copies of its arrays for GUARDED. not_need_stop stays on the CPU
    unless host_flag is False. Only copies: Paddle's own GPU kernels are not
    used."""
    if device == GUARDED:
        return {k: v.copy() for k, v in state.items()}
    return tensors(state, place_of(device), flag_on_gpu=not host_flag)


def to_numpy(tensors):
    return {k: v if isinstance(v, np.ndarray) else v.numpy() for k, v in tensors.items()}


def call_op(sig, t, attrs=None):
    """Op `sig` on `t` (to_tensors' result, of any device) with `attrs`: its
    wrapper in fastdeploy_mtp.ops, or the guarded driver for numpy arrays.
    Returns the op's result as a numpy array (None for preprocess)."""
    attrs = attrs or {}
    if all(isinstance(v, np.ndarray) for v in t.values()):
        import guarded

        return guarded.call(sig, t, attrs)
    out = getattr(ops, sig.name)(**t, **attrs)
    return None if out is None else out.numpy()


def run_preprocess_op(state, attrs, device="cpu"):
    """Runs the op; returns the state after it (numpy)."""
    t = to_tensors(state, device)
    call_op(DRAFT_MODEL_PREPROCESS, t, attrs)
    return to_numpy(t)


def run_preprocess_ref(state, attrs):
    s = {k: v.copy() for k, v in state.items()}
    reference.draft_model_preprocess(s, **attrs)
    return s


def run_mask_op(state, device="cpu"):
    t = to_tensors(state, device)
    out = call_op(UPDATE_ATTN_MASK_OFFSETS, t)
    return out, to_numpy(t)


def run_mask_ref(state):
    s = {k: v.copy() for k, v in state.items()}
    out = reference.update_attn_mask_offsets(s)
    return out, s


def assert_states_equal(got, want, context=""):
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"{context} field {name}")


def assert_mask_like_reference(state, device="cpu", context=""):
    """update_attn_mask_offsets on `device` leaves its output and every tensor
    as the numpy reference does; returns the reference's output."""
    want_out, want = run_mask_ref(state)
    got_out, got = run_mask_op(state, device)
    np.testing.assert_array_equal(got_out, want_out, err_msg=f"{context} attn_mask_offsets")
    assert_states_equal(got, want, context)
    return want_out


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


def recompute_decode_state(k=3, bsz=2):
    """A 22-tensor form's state (states.recompute_state) of `bsz` running
    decode requests with room to roll back: 40 KV positions, step 30, one
    token accepted, the base model at step 5, nothing pending."""
    s = states.recompute_state(np.random.default_rng(3), bsz, num_model_step=k)
    for i in range(bsz):
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


def preprocess_attrs(k, truncate=False, splitwise=False, v1=False):
    return dict(num_model_step=k, truncate_first_token=truncate, splitwise_prefill=splitwise,
                kvcache_scheduler_v1=v1)


def run_form_preprocess(form, state, attrs, device):
    """`form`'s draft_model_preprocess (its typed wrapper) on `state` placed on
    `device`; the state after it, in numpy."""
    t = to_tensors(state, device)
    forms.load(form).draft_model_preprocess(**t, **attrs)
    return to_numpy(t)


# The model of FastDeploy's kernel each FastDeploy-kernel form is held to.
FASTDEPLOY_MODELS = {"pr5245": reference_fastdeploy.draft_model_preprocess_pr5245,
                     "pr5738": reference_fastdeploy.draft_model_preprocess_pr5738,
                     "pr6403": reference_fastdeploy.draft_model_preprocess_pr5738,
                     "xpu": reference_fastdeploy.draft_model_preprocess_xpu}


def run_fastdeploy_model(form, state, attrs):
    """FastDeploy's kernel of `form`, as its numpy model runs it, on a copy."""
    s = {k: v.copy() for k, v in state.items()}
    FASTDEPLOY_MODELS[form](s, **attrs)
    return s


def assert_unchanged(tensors, before):
    """Every tensor holds exactly its old dtype and bytes (a refused call)."""
    after = to_numpy(tensors)
    for name, arr in before.items():
        assert after[name].dtype == arr.dtype and after[name].tobytes() == arr.tobytes(), name


def sim_args(**kw):
    """The simulator's command-line defaults, with `kw` set (for tests)."""
    import argparse

    from fastdeploy_mtp.harness import simulate_cli

    p = argparse.ArgumentParser()
    simulate_cli.add_arguments(p)
    a = p.parse_args([])
    for k, v in kw.items():
        setattr(a, k, v)
    return a


def skipped_mask_requests(s):
    """Which requests of a mask state update_attn_mask_offsets skips (the
    contract: is_block_step, or neither length positive)."""
    bsz = s["seq_lens_this_time"].shape[0]
    block = s["is_block_step"].reshape(-1)[:bsz]
    E, S = s["seq_lens_encoder"].reshape(-1)[:bsz], s["seq_lens_decoder"].reshape(-1)[:bsz]
    return block | ((E <= 0) & (S <= 0))


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


def compile_cpu_harness(source: str, out_dir) -> "Path":
    """tests/<source> (a C++ harness over the Paddle-free headers) built with
    the CPU op's own flags and the undefined-behaviour sanitizer; its path."""
    import shutil
    import subprocess
    from pathlib import Path

    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.fail("no C++ compiler: the op library itself needs one to build")
    exe = Path(out_dir) / Path(source).stem
    flags = _build.compile_flags(cuda=False)["cxx"]
    subprocess.run([compiler, *flags, *_build.UNDEFINED_BEHAVIOUR_FLAGS,
                    str(Path(__file__).with_name(source)), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    return exe


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
