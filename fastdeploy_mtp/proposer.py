"""MTPProposer: the draft model's state for a FastDeploy-style runner.

The proposer owns the draft buffers of ``max_num_seqs`` slots, inserts
requests as the spec's "Inserting requests" says for its role, and invokes the
ops with the base model's buffers, which the runner holds in a dict keyed as
FastDeploy-style runners key them (``accept_tokens``, ``accept_num``,
``seq_lens_this_time``, ``seq_lens_encoder``, ``seq_lens_decoder``,
``step_idx``, ``stop_flags``, ``is_block_step``, ``draft_tokens``).

Buffers are read and written whole (one copy out, one copy in per buffer), so
inserting a batch costs a number of tensor writes that grows with the number
of buffers, not with requests x buffers, and no Paddle compute kernel runs on
the device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np

from . import ops
from .signature import DRAFT_MODEL_PREPROCESS

ROLES = ("mixed", "prefill", "decode")
BASE_KEYS = ("accept_tokens", "accept_num", "seq_lens_this_time", "seq_lens_encoder",
             "seq_lens_decoder", "step_idx", "stop_flags", "is_block_step", "draft_tokens")
_BASE_PREFIX = "base_model_"


class ProposerError(ValueError):
    """A bad configuration or a request that does not fit; nothing was changed."""


@dataclass(frozen=True)
class ProposerConfig:
    num_model_steps: int
    max_model_len: int
    max_num_seqs: int
    max_draft_tokens: Optional[int] = None  # default: num_model_steps
    role: str = "mixed"
    kvcache_scheduler_v1: bool = True
    truncate_first_token: bool = True

    def __post_init__(self):
        def need(cond, msg):
            if not cond:
                raise ProposerError(f"ProposerConfig: {msg}")

        need(isinstance(self.num_model_steps, int) and self.num_model_steps >= 1,
             f"num_model_steps must be an int >= 1, got {self.num_model_steps!r}")
        need(isinstance(self.max_num_seqs, int) and self.max_num_seqs >= 1,
             f"max_num_seqs must be an int >= 1, got {self.max_num_seqs!r}")
        need(isinstance(self.max_model_len, int) and self.max_model_len >= 2,
             f"max_model_len must be an int >= 2, got {self.max_model_len!r}")
        need(self.role in ROLES, f"role must be one of {ROLES}, got {self.role!r}")
        need(self.draft_width >= self.num_model_steps,
             f"max_draft_tokens ({self.max_draft_tokens}) must be >= num_model_steps "
             f"({self.num_model_steps}): the base model may accept k+1 tokens")

    @property
    def draft_width(self) -> int:
        return self.num_model_steps if self.max_draft_tokens is None else self.max_draft_tokens

    @property
    def substeps(self) -> int:
        """Draft substeps per engine step: one on a prefill node."""
        return 1 if self.role == "prefill" else self.num_model_steps


@dataclass
class Request:
    """A request to insert into `slot`.

    ``prompt``: the n prompt token ids. ``mask_offsets``: the prompt's
    attention-mask offsets (n values; text, the default: 0..n-1). On a decode
    node also ``first_token`` and ``draft_token``, handed over by the prefill
    node.
    """

    slot: int
    prompt: Sequence[int]
    mask_offsets: Optional[Sequence[int]] = None
    first_token: Optional[int] = None
    draft_token: Optional[int] = None


def _read(t) -> np.ndarray:
    return t.numpy()


def _write(t, arr: np.ndarray) -> None:
    """Copy `arr` into tensor `t` where it lives (the tensor keeps its identity).

    Not ``Tensor.set_value``: that copies to Paddle's current default place,
    which on a CUDA build moves a CPU tensor to the GPU.
    """
    import paddle

    place = t.place
    target = paddle.CUDAPlace(place.gpu_device_id()) if place.is_gpu_place() else paddle.CPUPlace()
    t.value().get_tensor().set(np.ascontiguousarray(arr), target)


class MTPProposer:
    """Owns the draft state of `config.max_num_seqs` slots on `place`.

    ``base`` is the runner's dict of base-model buffers (see BASE_KEYS), each
    with ``max_num_seqs`` rows, on the same place.
    """

    def __init__(self, config: ProposerConfig, base: Dict[str, object], place=None):
        import paddle

        self.config = config
        self.place = place if place is not None else paddle.CPUPlace()
        missing = [k for k in BASE_KEYS if k not in base]
        if missing:
            raise ProposerError(f"MTPProposer: the base buffers lack {missing}")
        self.base = base
        N, L, D = config.max_num_seqs, config.max_model_len, config.draft_width + 1
        for key in BASE_KEYS:
            rows = base[key].shape[0]
            if rows != N:
                raise ProposerError(
                    f"MTPProposer: base buffer {key} has {rows} rows, max_num_seqs is {N}")
        k1 = config.num_model_steps + 1
        for key in ("accept_tokens", "draft_tokens"):
            if len(base[key].shape) != 2 or base[key].shape[1] < k1:
                raise ProposerError(f"MTPProposer: base buffer {key} must be [N, >= "
                                    f"num_model_steps + 1 = {k1}], got {list(base[key].shape)}")

        def zeros(shape, dtype, fill=0):
            return paddle.to_tensor(np.full(shape, fill, dtype), place=self.place)

        i64, i32 = np.int64, np.int32
        self.state = {
            "draft_tokens": zeros((N, D), i64, -1),
            "input_ids": zeros((N, L), i64),
            "stop_flags": zeros((N,), bool, True),
            "seq_lens_this_time": zeros((N,), i32),
            "seq_lens_encoder": zeros((N,), i32),
            "seq_lens_decoder": zeros((N,), i32),
            "step_idx": zeros((N,), i64),
            # The host flag: the op returns once it is there.
            "not_need_stop": paddle.to_tensor(np.zeros(1, bool), place=paddle.CPUPlace()),
            "is_block_step": zeros((N,), bool),
            "batch_drop": zeros((N,), bool),
            "pre_ids": zeros((N, L), i64, -1),
            "mask_rollback": zeros((N,), i32),
            "attn_mask_offsets_full": zeros((N, L), i32),
            "attn_mask_offsets_decoder": zeros((N,), i32),
            "decode_states": zeros((N, D), i32),
        }
        self._preprocess_args = self._bind_preprocess_inputs()

    # -- the op's inputs, by registered name ---------------------------------

    def _bind_preprocess_inputs(self) -> Dict[str, object]:
        """Map each registered input name of draft_model_preprocess to a buffer.

        The registration is compared with the signature table first, so a
        library or wrapper whose names drifted fails here, loudly, instead of
        silently swapping two arguments at the first step.
        """
        from .registration import differences, read_registered

        ops.load_library()
        registered = read_registered(DRAFT_MODEL_PREPROCESS.name)
        drift = differences(DRAFT_MODEL_PREPROCESS, registered)
        if drift:
            raise ProposerError("MTPProposer: draft_model_preprocess does not match the "
                                "signature table: " + "; ".join(drift))
        bound = {}
        for name in registered.inputs:
            if name in self.state:
                bound[name] = self.state[name]
            elif name.startswith(_BASE_PREFIX) and name[len(_BASE_PREFIX):] in self.base:
                bound[name] = self.base[name[len(_BASE_PREFIX):]]
            elif name in self.base:
                bound[name] = self.base[name]
            else:
                raise ProposerError(f"MTPProposer: no buffer for the op's input {name!r}")
        return bound

    # -- inserting requests --------------------------------------------------

    def _check_requests(self, requests: Sequence[Request]) -> None:
        cfg = self.config
        seen = set()
        for r in requests:
            where = f"MTPProposer.insert: slot {r.slot}"
            if not isinstance(r.slot, (int, np.integer)) or not 0 <= r.slot < cfg.max_num_seqs:
                raise ProposerError(f"{where}: slot outside [0, {cfg.max_num_seqs})")
            if r.slot in seen:
                raise ProposerError(f"{where}: inserted twice in one batch")
            seen.add(r.slot)
            n = len(r.prompt)
            # Room for the first token (and, on a decode node, the k-1 draft positions).
            limit = cfg.max_model_len - (1 if cfg.role != "decode" else cfg.num_model_steps)
            if not 1 <= n <= limit:
                raise ProposerError(f"{where}: prompt of {n} tokens, must be 1..{limit} "
                                    f"(max_model_len {cfg.max_model_len})")
            if r.mask_offsets is not None and len(r.mask_offsets) != n:
                raise ProposerError(f"{where}: {len(r.mask_offsets)} mask offsets for a "
                                    f"prompt of {n} tokens")
            handed = r.first_token is not None and r.draft_token is not None
            if cfg.role == "decode" and not handed:
                raise ProposerError(f"{where}: a decode node needs the first_token and "
                                    f"draft_token handed over by the prefill node")
            if cfg.role != "decode" and (r.first_token is not None or r.draft_token is not None):
                raise ProposerError(f"{where}: first_token/draft_token are for a decode node; "
                                    f"this proposer's role is {cfg.role}")

    def decode_mask_rollback(self) -> int:
        """The preset for a handed-over request: the first preprocess adds k-1
        it did not advance, and one position really must be rolled back."""
        return 1 - (self.config.num_model_steps - 1)

    def insert(self, requests: Iterable[Request]) -> None:
        """Insert a batch of requests; all or nothing (ProposerError)."""
        requests = list(requests)
        self._check_requests(requests)
        if not requests:
            return
        cfg, k = self.config, self.config.num_model_steps
        names = ("draft_tokens", "input_ids", "stop_flags", "seq_lens_this_time",
                 "seq_lens_encoder", "seq_lens_decoder", "step_idx", "is_block_step",
                 "batch_drop", "pre_ids", "mask_rollback", "attn_mask_offsets_full",
                 "attn_mask_offsets_decoder", "decode_states")
        a = {n: _read(self.state[n]) for n in names}
        for r in requests:
            i, n = r.slot, len(r.prompt)
            offsets = np.asarray(r.mask_offsets if r.mask_offsets is not None else np.arange(n),
                                 dtype=np.int32)
            for name in ("draft_tokens", "pre_ids"):
                a[name][i] = -1
            a["input_ids"][i] = 0
            a["attn_mask_offsets_full"][i] = 0
            a["attn_mask_offsets_full"][i, :n] = offsets
            a["decode_states"][i] = 0
            a["stop_flags"][i] = False
            a["is_block_step"][i] = False
            a["batch_drop"][i] = False
            if cfg.role == "decode":
                # The state a mixed node holds after its k-substep prefill step.
                a["seq_lens_encoder"][i] = 0
                a["seq_lens_decoder"][i] = n + (k - 1)
                a["step_idx"][i] = 1 + (k - 1)
                a["seq_lens_this_time"][i] = 1
                a["draft_tokens"][i, 0] = r.draft_token
                a["pre_ids"][i, 0] = r.first_token
                # The base model's offsets of prompt + first token, plus one.
                a["attn_mask_offsets_decoder"][i] = offsets[n - 1] + 2
                a["mask_rollback"][i] = self.decode_mask_rollback()
            else:
                # The draft reads the prompt shifted by one; the first token follows.
                a["input_ids"][i, : n - 1] = np.asarray(r.prompt[1:], dtype=np.int64)
                a["seq_lens_encoder"][i] = n
                a["seq_lens_decoder"][i] = 0
                a["step_idx"][i] = 0
                a["seq_lens_this_time"][i] = n
                a["attn_mask_offsets_decoder"][i] = offsets[n - 1] + 1
                a["mask_rollback"][i] = 0
        for name in names:
            _write(self.state[name], a[name])

    def release(self, slots: Iterable[int]) -> None:
        """Forget finished or preempted slots: stopped, empty, no pending rollback."""
        slots = sorted(set(int(s) for s in slots))
        for s in slots:
            if not 0 <= s < self.config.max_num_seqs:
                raise ProposerError(f"MTPProposer.release: slot {s} outside "
                                    f"[0, {self.config.max_num_seqs})")
        if not slots:
            return
        updates = {"stop_flags": True, "seq_lens_this_time": 0, "seq_lens_encoder": 0,
                   "seq_lens_decoder": 0, "mask_rollback": 0, "is_block_step": False}
        for name, value in updates.items():
            arr = _read(self.state[name])
            arr[slots] = value
            _write(self.state[name], arr)

    # -- the ops -------------------------------------------------------------

    def prepare_inputs(self) -> bool:
        """draft_model_preprocess for this engine step; returns not_need_stop.

        A prefill node runs it with splitwise_prefill and num_model_step 1.
        """
        cfg = self.config
        prefill_node = cfg.role == "prefill"
        ops.draft_model_preprocess(
            **self._preprocess_args,
            num_model_step=1 if prefill_node else cfg.num_model_steps,
            truncate_first_token=cfg.truncate_first_token,
            splitwise_prefill=prefill_node,
            kvcache_scheduler_v1=cfg.kvcache_scheduler_v1,
        )
        return bool(self.state["not_need_stop"].numpy()[0])

    def cu_seqlens_q(self):
        """Prefix sums of the draft's seq_lens_this_time, as the op wants them."""
        import paddle

        n = _read(self.state["seq_lens_this_time"])
        cu = np.zeros(n.shape[0] + 1, np.int32)
        cu[1:] = np.cumsum(n)
        return paddle.to_tensor(cu, place=self.place)

    def update_attn_mask_offsets(self, ids_remove_padding, cu_seqlens_q=None):
        """update_attn_mask_offsets for one draft substep; returns the offsets."""
        s = self.state
        return ops.update_attn_mask_offsets(
            ids_remove_padding=ids_remove_padding,
            seq_lens_this_time=s["seq_lens_this_time"],
            seq_lens_encoder=s["seq_lens_encoder"],
            seq_lens_decoder=s["seq_lens_decoder"],
            cu_seqlens_q=cu_seqlens_q if cu_seqlens_q is not None else self.cu_seqlens_q(),
            attn_mask_offsets_full=s["attn_mask_offsets_full"],
            attn_mask_offsets_decoder=s["attn_mask_offsets_decoder"],
            is_block_step=s["is_block_step"],
            decode_states=s["decode_states"],
            mask_rollback=s["mask_rollback"],
        )


def make_base_buffers(max_num_seqs: int, num_model_steps: int, place=None) -> Dict[str, object]:
    """Empty base-model buffers shaped as a FastDeploy-style runner holds them
    (all slots stopped); for tests, the simulator and examples."""
    import paddle

    place = place if place is not None else paddle.CPUPlace()
    N, W = max_num_seqs, num_model_steps + 1
    arrays = {
        "accept_tokens": np.zeros((N, W), np.int64),
        "accept_num": np.zeros(N, np.int32),
        "seq_lens_this_time": np.zeros(N, np.int32),
        "seq_lens_encoder": np.zeros(N, np.int32),
        "seq_lens_decoder": np.zeros(N, np.int32),
        "step_idx": np.zeros(N, np.int64),
        "stop_flags": np.ones(N, bool),
        "is_block_step": np.zeros(N, bool),
        "draft_tokens": np.full((N, W), -1, np.int64),
    }
    return {k: paddle.to_tensor(v, place=place) for k, v in arrays.items()}


__all__: List[str] = ["MTPProposer", "ProposerConfig", "ProposerError", "Request",
                      "make_base_buffers", "BASE_KEYS", "ROLES"]
