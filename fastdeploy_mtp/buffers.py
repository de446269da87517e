"""The draft and base-model buffers, and moving whole buffers to and from numpy.

Buffers are read and written whole (one copy out, one copy in per buffer), so
a batch of inserts costs a number of tensor writes that grows with the number
of buffers, not with requests x buffers, and no Paddle compute kernel runs on
the device (``write`` is a plain host-to-device copy).
"""

from __future__ import annotations

from typing import Dict

import numpy as np

# The base model's buffers the proposer reads, keyed as FastDeploy-style runners key them.
BASE_KEYS = ("accept_tokens", "accept_num", "seq_lens_this_time", "seq_lens_encoder",
             "seq_lens_decoder", "step_idx", "stop_flags", "is_block_step", "draft_tokens")

# The draft buffers one slot's insert writes (everything but the host flag).
SLOT_FIELDS = ("draft_tokens", "input_ids", "stop_flags", "seq_lens_this_time",
               "seq_lens_encoder", "seq_lens_decoder", "step_idx", "is_block_step",
               "batch_drop", "pre_ids", "mask_rollback", "attn_mask_offsets_full",
               "attn_mask_offsets_decoder", "decode_states")


def read(t) -> np.ndarray:
    """A numpy copy of tensor `t` (from wherever it lives)."""
    return t.numpy()


def write(t, arr: np.ndarray) -> None:
    """Copy `arr` into tensor `t` where it lives (the tensor keeps its identity).

    Not ``Tensor.set_value``: that copies to Paddle's current default place,
    which on a CUDA build moves a CPU tensor to the GPU.
    """
    import paddle

    place = t.place
    target = paddle.CUDAPlace(place.gpu_device_id()) if place.is_gpu_place() else paddle.CPUPlace()
    t.value().get_tensor().set(np.ascontiguousarray(arr), target)


def tensors(arrays: Dict[str, np.ndarray], place=None, flag_on_gpu: bool = False
            ) -> Dict[str, object]:
    """Each array as a tensor on `place` (default the CPU), but
    ``not_need_stop`` on the host unless `flag_on_gpu`: the host flag makes
    draft_model_preprocess synchronous, a flag on the GPU asynchronous."""
    import paddle

    place = place if place is not None else paddle.CPUPlace()
    return {k: paddle.to_tensor(v, place=paddle.CPUPlace()
                                if k == "not_need_stop" and not flag_on_gpu else place)
            for k, v in arrays.items()}


def draft_buffers(max_num_seqs: int, max_model_len: int, draft_width: int, place=None):
    """The draft state of `max_num_seqs` empty (stopped) slots.

    `draft_width` + 1 columns of draft tokens and decode states; prompts,
    pre_ids and mask offsets get `max_model_len` columns. ``not_need_stop``
    lives on the CPU: the op then returns once the flag is on the host.
    """
    N, L, D = max_num_seqs, max_model_len, draft_width + 1
    i64, i32 = np.int64, np.int32
    arrays = {
        "draft_tokens": np.full((N, D), -1, i64),
        "input_ids": np.zeros((N, L), i64),
        "stop_flags": np.ones(N, bool),
        "seq_lens_this_time": np.zeros(N, i32),
        "seq_lens_encoder": np.zeros(N, i32),
        "seq_lens_decoder": np.zeros(N, i32),
        "step_idx": np.zeros(N, i64),
        "is_block_step": np.zeros(N, bool),
        "batch_drop": np.zeros(N, bool),
        "pre_ids": np.full((N, L), -1, i64),
        "mask_rollback": np.zeros(N, i32),
        "attn_mask_offsets_full": np.zeros((N, L), i32),
        "attn_mask_offsets_decoder": np.zeros(N, i32),
        "decode_states": np.zeros((N, D), i32),
        "not_need_stop": np.zeros(1, bool),
    }
    return tensors(arrays, place)


def make_base_buffers(max_num_seqs: int, num_model_steps: int, place=None) -> Dict[str, object]:
    """Empty base-model buffers shaped as a FastDeploy-style runner holds them
    (all slots stopped); for tests, the simulator and examples."""
    N, W = max_num_seqs, num_model_steps + 1
    return tensors({
        "accept_tokens": np.zeros((N, W), np.int64),
        "accept_num": np.zeros(N, np.int32),
        "seq_lens_this_time": np.zeros(N, np.int32),
        "seq_lens_encoder": np.zeros(N, np.int32),
        "seq_lens_decoder": np.zeros(N, np.int32),
        "step_idx": np.zeros(N, np.int64),
        "stop_flags": np.ones(N, bool),
        "is_block_step": np.zeros(N, bool),
        "draft_tokens": np.full((N, W), -1, np.int64),
    }, place)


def base_buffer_problems(base: Dict[str, object], max_num_seqs: int,
                         num_model_steps: int) -> list:
    """What is wrong with a runner's base buffers (empty if nothing)."""
    missing = [k for k in BASE_KEYS if k not in base]
    if missing:
        return [f"the base buffers lack {missing}"]
    problems = []
    by_rows: Dict[int, list] = {}
    for k in BASE_KEYS:
        if base[k].shape[0] != max_num_seqs:
            by_rows.setdefault(base[k].shape[0], []).append(k)
    for rows, names in by_rows.items():
        which = ("the base buffers have" if len(names) == len(BASE_KEYS) else
                 f"base buffer {names[0]} has" if len(names) == 1 else
                 f"base buffers {names[0]} and {len(names) - 1} more have")
        problems.append(f"max_num_seqs is {max_num_seqs} but {which} {rows} rows")
    k1 = num_model_steps + 1
    for key in ("accept_tokens", "draft_tokens"):
        if len(base[key].shape) != 2 or base[key].shape[1] < k1:
            problems.append(f"base buffer {key} must be [N, >= num_model_steps + 1 = {k1}], "
                            f"got {list(base[key].shape)}")
    return problems
