"""FastDeploy's own ``draft_model_preprocess`` kernels, in numpy.

Three versions of one kernel,
``custom_ops/gpu_ops/speculate_decoding/draft_model/draft_model_preprocess.cu``:

- PR #5738 as merged, FastDeploy commit 9018ccf74 (the release branch's
  dcb0ccede carries the same file, byte for byte), the ``pr5738`` and
  ``pr6403`` forms' (:func:`draft_model_preprocess_pr5738`). It takes the 22
  tensors of the recompute form's table and the same four attributes, but not
  the recompute form's rules: a running decode rolls back
  ``recompute_token_num`` tokens unclamped, and a draft that stopped while the
  base model went on re-syncs from ``base_model_seq_lens_this_time`` and
  leaves ``mask_rollback`` and ``recompute_token_num`` alone
  (``docs/contract.md``, "The forms", sets them side by side).
- The kernel as PR #5245 left it, FastDeploy commit ba915e03e, the ``pr5245``
  form's (:func:`draft_model_preprocess_pr5245`): 20 tensors, the same
  kernel but that a running decode rolls back ``num_model_step - 1`` and
  there is no ``mask_rollback`` or ``recompute_token_num`` (``git diff
  ba915e03e 9018ccf74`` of that file changes only those lines and the
  parameter lists).
- FastDeploy's XPU op at develop, commit c29e86fc9, the ``xpu`` form's
  (:func:`draft_model_preprocess_xpu`): the 22-tensor registration with
  ba915e03e's rules (its kernel's CPU form,
  ``custom_ops/xpu_ops/src/plugin/src/wrapper/mtp_wrapper/draft_model_preprocess.cpp``
  lines 77-196), ``mask_rollback`` and ``recompute_token_num`` never read or
  written, and every request of the batch run (a loop over them, no block of
  512).

Each form's op computes what its model does on every state the kernel
handles without leaving a row or wrapping, at up to 512 requests (any number
for the XPU op); it refuses what would leave a row or wrap, and it runs every
request of a larger batch. This is a model of what the kernel does, not of
what it should do: it refuses nothing the kernel runs but the accesses
outside a row (below). Its integer arithmetic is emulated where it can wrap
(32-bit ``int`` sums and differences, the 64-bit ``step_idx`` ones, the
``pre_ids`` position narrowed from 64 to 32 bits). The GPU kernels launch one
block of 512 threads, one a request, so requests from 512 on are left as they
are and do not count towards ``not_need_stop``.

The kernel never checks a column against its row's width. An access outside
its request's row (a ``pre_ids`` position below 0 or past the row, a prompt
longer than ``input_ids``' row, more accepted tokens than ``draft_tokens`` or
``accept_tokens`` hold) raises :class:`OutOfRowAccess` unless
``out_of_row="flat"``: then it lands where the kernel's pointer arithmetic puts
it, in a neighbouring request's row of the same buffer, requests taken in
order. On the GPU all requests run at once, so where another request touches
the same cells the outcome there is a race, and this order is one of its
outcomes. An access outside the whole buffer always raises.

Each takes the state as a dict keyed by its table's input names, runs one
request at a time on per-request vectors as 1-D views, and changes nothing
when it raises. Line numbers below are 9018ccf74's.
"""

from __future__ import annotations

from typing import Dict

import numpy as np

from .signature import FORMS

# Each version's table (the pr5738 form's registers as the recompute form's).
SIGNATURES = {v: FORMS[v]["draft_model_preprocess"] for v in ("pr5245", "pr5738", "xpu")}
# Threads of the one block the kernel is launched with, one a request.
BLOCK_SIZE = 512
_MATRICES = ("draft_tokens", "input_ids", "pre_ids", "accept_tokens", "base_model_draft_tokens")


class OutOfRowAccess(IndexError):
    """The kernel would read or write outside a request's row."""


def wrap32(x: int) -> int:
    """x as a 32-bit two's-complement int keeps it (the GPU's wrap)."""
    return (int(x) + 2**31) % 2**32 - 2**31


def wrap64(x: int) -> int:
    return (int(x) + 2**63) % 2**64 - 2**63


class _Rows:
    """A [N, C] buffer addressed as the kernel does: row start = row * C in
    32-bit int, then the column added to the pointer."""

    def __init__(self, name: str, a: np.ndarray, flat: bool):
        self.name, self.cols, self.flat = name, a.shape[1], flat
        self.data = a.reshape(-1)  # the work copies are contiguous: a view

    def _at(self, row: int, col: int) -> int:
        if 0 <= col < self.cols:
            return row * self.cols + col
        where = f"{self.name}: request {row}: column {col} outside its row [0, {self.cols})"
        if not self.flat:
            raise OutOfRowAccess(where)
        at = wrap32(row * self.cols) + col
        if not 0 <= at < self.data.size:
            raise OutOfRowAccess(f"{where}, and outside the buffer ({self.data.size} elements)")
        return at

    def get(self, row: int, col: int) -> int:
        return int(self.data[self._at(row, col)])

    def set(self, row: int, col: int, value: int) -> None:
        self.data[self._at(row, col)] = value


def draft_model_preprocess_pr5738(state: Dict[str, np.ndarray], num_model_step: int,
                                  truncate_first_token: bool, splitwise_prefill: bool,
                                  kvcache_scheduler_v1: bool, *, out_of_row: str = "raise") -> None:
    """Run FastDeploy 9018ccf74's draft_model_preprocess on ``state`` (the 22
    inputs by name; per-request vectors [N] or [N, 1]) in place, with its
    attributes. ``out_of_row``: "raise" (OutOfRowAccess, nothing changed) or
    "flat" (the neighbouring row's cells, as the kernel's pointers fall)."""
    _run("pr5738", state, num_model_step, truncate_first_token, splitwise_prefill,
         kvcache_scheduler_v1, out_of_row)


def draft_model_preprocess_pr5245(state: Dict[str, np.ndarray], num_model_step: int,
                                  truncate_first_token: bool, splitwise_prefill: bool,
                                  kvcache_scheduler_v1: bool, *, out_of_row: str = "raise") -> None:
    """Run FastDeploy ba915e03e's draft_model_preprocess (20 inputs) on
    ``state`` in place; as :func:`draft_model_preprocess_pr5738` otherwise."""
    _run("pr5245", state, num_model_step, truncate_first_token, splitwise_prefill,
         kvcache_scheduler_v1, out_of_row)


def draft_model_preprocess_xpu(state: Dict[str, np.ndarray], num_model_step: int,
                               truncate_first_token: bool, splitwise_prefill: bool,
                               kvcache_scheduler_v1: bool, *, out_of_row: str = "raise") -> None:
    """Run FastDeploy c29e86fc9's XPU draft_model_preprocess (22 inputs) on
    ``state`` in place; as :func:`draft_model_preprocess_pr5738` otherwise."""
    _run("xpu", state, num_model_step, truncate_first_token, splitwise_prefill,
         kvcache_scheduler_v1, out_of_row)


def _run(version, state, num_model_step, truncate_first_token, splitwise_prefill,
         kvcache_scheduler_v1, out_of_row) -> None:
    sig = SIGNATURES[version]
    names = sig.input_names
    if out_of_row not in ("raise", "flat"):
        raise ValueError(f"out_of_row must be 'raise' or 'flat', got {out_of_row!r}")
    missing = [n for n in names if n not in state]
    if missing:
        raise ValueError(f"draft_model_preprocess: state lacks {', '.join(missing)}")
    for t in sig.inputs:
        if state[t.name].dtype != t.dtype:
            raise ValueError(f"draft_model_preprocess: {t.name} is {state[t.name].dtype}, "
                             f"not {np.dtype(t.dtype)}")
    if not -(2**31) <= int(num_model_step) < 2**31:
        raise ValueError(f"num_model_step {num_model_step} is not a 32-bit int attribute")
    bsz = state["seq_lens_this_time"].shape[0]
    # Threads past the batch do nothing; requests past 512 have none (the XPU
    # op loops over every request).
    rows = bsz if version == "xpu" else min(bsz, BLOCK_SIZE)
    for name in names:
        if name != "not_need_stop" and state[name].shape[0] < rows:
            raise ValueError(f"draft_model_preprocess: {name} has {state[name].shape[0]} rows, "
                             f"the kernel reads {rows}")

    # Work on copies and write back at the end: nothing changes when an access
    # raises. Only the written tensors go back, so a read-only input that is
    # the same array as a written one (FastDeploy's own test passes
    # seq_lens_this_time as base_model_seq_lens_this_time) does not undo it.
    w = {n: np.array(state[n], copy=True, order="C") for n in names}
    flat = out_of_row == "flat"
    m = {n: _Rows(n, w[n], flat) for n in _MATRICES}
    v = {n: w[n].reshape(w[n].shape[0]) for n in names
         if n not in _MATRICES and n != "not_need_stop"}
    run = _splitwise_request if splitwise_prefill else _normal_request
    running = 0
    for i in range(rows):
        running += run(i, v, m, int(num_model_step), bool(truncate_first_token),
                       bool(kvcache_scheduler_v1), version)
    w["not_need_stop"].reshape(-1)[0] = running > 0  # the block's sum of running requests
    for n in sig.written:
        np.copyto(state[n], w[n])


def _place_first_token(i, v, m, truncate) -> None:
    """The base model's first token goes in after the prompt (truncated: on
    its last token) and the prompt is fed again: lines 103-111 and 208-217."""
    E = int(v["seq_lens_encoder"][i])
    t = m["accept_tokens"].get(i, 0)
    if truncate:
        m["input_ids"].set(i, E - 1, t)  # E > 0 here: E - 1 cannot wrap
        v["seq_lens_this_time"][i] = E
    else:
        m["input_ids"].set(i, E, t)
        v["seq_lens_this_time"][i] = wrap32(E + 1)


def _stop(i, v) -> None:
    v["stop_flags"][i] = True
    v["seq_lens_this_time"][i] = 0
    v["seq_lens_decoder"][i] = 0
    v["seq_lens_encoder"][i] = 0


def _splitwise_request(i, v, m, k, truncate, v1, version) -> int:
    """The prefill node's kernel, process_splitwise_prefill (lines 62-126):
    only seq_lens_encoder decides. No pre_ids, base_model_draft_tokens, base
    model flags, batch_drop or is_block_step."""
    if v["seq_lens_encoder"][i] > 0:
        v["stop_flags"][i] = False
        _place_first_token(i, v, m, truncate)
        return 1
    _stop(i, v)
    return 0


def _normal_request(i, v, m, k, truncate, v1, version) -> int:
    """draft_model_preprocess_kernel (lines 131-263) for request i."""
    bmdt = m["base_model_draft_tokens"]
    for c in range(1, bmdt.cols):  # lines 180-182: column 0 is kept
        bmdt.set(i, c, -1)
    base_stop = bool(v["base_model_stop_flags"][i])
    base_block = bool(v["base_model_is_block_step"][i])
    if base_stop and base_block:  # lines 187-198
        v["stop_flags"][i] = True
        if v1:
            v["is_block_step"][i] = True  # parked: resumes later
        else:
            v["batch_drop"][i] = True
    if base_stop or v["batch_drop"][i]:  # line 201; lines 251-256
        _stop(i, v)
        return 0
    if v["seq_lens_encoder"][i] > 0:  # prefill, lines 204-217
        v["stop_flags"][i] = False
        m["pre_ids"].set(i, 0, m["accept_tokens"].get(i, 0))
        _place_first_token(i, v, m, truncate)
        return 1
    # Decode (seq_lens_encoder <= 0), lines 218-250.
    if v1 and not base_block and v["is_block_step"][i]:  # lines 219-224
        v["is_block_step"][i] = False
    base_n = int(v["base_model_seq_lens_this_time"][i])
    base_step = int(v["base_model_step_idx"][i])
    if v["stop_flags"][i]:  # re-sync from the base model, lines 225-231
        v["stop_flags"][i] = False
        v["seq_lens_decoder"][i] = wrap32(int(v["base_model_seq_lens_decoder"][i]) - base_n)
        v["step_idx"][i] = wrap64(base_step - base_n)
    elif version in ("pr5245", "xpu"):  # roll back k - 1, in int (ba915e03e lines 226-230)
        back = wrap32(k - 1)
        v["seq_lens_decoder"][i] = wrap32(int(v["seq_lens_decoder"][i]) - back)
        v["step_idx"][i] = wrap64(int(v["step_idx"][i]) - back)
    else:  # roll back the recomputed tokens, unclamped, lines 232-241
        r = int(v["recompute_token_num"][i])
        v["seq_lens_decoder"][i] = wrap32(int(v["seq_lens_decoder"][i]) - r)
        v["step_idx"][i] = wrap64(int(v["step_idx"][i]) - r)
        v["mask_rollback"][i] = wrap32(int(v["mask_rollback"][i]) + r)
        v["recompute_token_num"][i] = wrap32(k - 1)
    a = int(v["accept_num"][i])
    for j in range(a):  # lines 242-248
        t = m["accept_tokens"].get(i, j)
        m["draft_tokens"].set(i, j, t)
        # A 64-bit difference narrowed to a 32-bit int (line 244).
        m["pre_ids"].set(i, wrap32(wrap64(base_step - (a - j))), t)
    v["seq_lens_this_time"][i] = a
    return 1
