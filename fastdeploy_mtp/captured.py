"""The draft's ops as a runner that captures CUDA graphs calls them.

A production runner captures its decode step once and replays the graph every
engine step: the kernels then run on whatever its fixed buffers hold at replay
time, with no host in between. Where the simulator calls the ops eagerly
(``simulate.EagerDraft``), ``CapturedDraft`` captures draft_model_preprocess
(asynchronous, ``not_need_stop`` on the GPU) and one update_attn_mask_offsets
call on their first use, and from then on only replays them, between host
writes to the same buffers. The closed loop (``simulate --device gpu
--graphs``) then shows that replayed steps keep the mask offsets right, step
after step, exactly as eager calls do.
"""

from __future__ import annotations

import numpy as np

from .buffers import make_base_buffers, read, write
from .proposer import MTPProposer, ProposerConfig, Request
from .slots import is_int


class CapturedDraft:
    """Preprocess and the mask call, each captured once and then replayed.

    The mask call is captured with ``max_tokens`` tokens (a captured graph has
    fixed shapes, so a runner pads its token count to the size it captured):
    the op writes zeros past the batch's tokens, and ``mask_offsets`` returns
    the first 2 x tokens entries, as an eager call of that many tokens would.
    Every replay is followed by the form's ``raise_pending_errors``: a refused batch
    leaves its error on the device, and it is raised here, at once.
    """

    def __init__(self, proposer: MTPProposer, max_tokens: int):
        import paddle

        if not is_int(max_tokens) or max_tokens < 1:
            raise ValueError(f"CapturedDraft: max_tokens must be a positive int, "
                             f"got {max_tokens!r}")
        if not proposer.place.is_gpu_place():
            raise ValueError("CapturedDraft: the proposer's buffers must be on the GPU")
        place = proposer.place
        self.proposer = proposer
        self.max_tokens = max_tokens
        self.flag = paddle.to_tensor(np.zeros(1, bool), place=place)
        self.ids = paddle.to_tensor(np.zeros(max_tokens, np.int64), place=place)
        self.cu = paddle.to_tensor(np.zeros(proposer.config.max_num_seqs + 1, np.int32),
                                   place=place)
        self._preprocess = self._mask = self._out = None
        self.replays = 0
        _warm_up(place)

    @staticmethod
    def _capture(call):
        from paddle.device.cuda import graphs

        graph = graphs.CUDAGraph()
        graph.capture_begin()
        try:
            result = call()
        finally:
            graph.capture_end()
        return graph, result

    def prepare_inputs(self) -> bool:
        """The preprocess replayed; returns not_need_stop (read back from the GPU)."""
        p = self.proposer
        if self._preprocess is None:  # captured, not run: the replay below runs it
            self._preprocess, _ = self._capture(
                lambda: p.form_ops.draft_model_preprocess(**p.preprocess_arguments(self.flag)))
        with p.preprocess_effects():
            self._preprocess.replay()
            p.form_ops.raise_pending_errors(self.flag)
        self.replays += 1
        return bool(read(self.flag)[0])

    def mask_offsets(self, ids: np.ndarray, cu: np.ndarray) -> np.ndarray:
        """The mask call replayed on cu_seqlens_q `cu` (only the length of `ids`
        matters to the op, and it is the captured one); the offsets, as numpy."""
        tokens = int(cu[-1])
        if tokens > self.max_tokens:
            raise ValueError(f"CapturedDraft: {tokens} tokens in a substep, but the mask call "
                             f"was captured for at most {self.max_tokens}")
        write(self.cu, cu.astype(np.int32))
        if self._mask is None:
            self._mask, self._out = self._capture(
                lambda: self.proposer.update_attn_mask_offsets(self.ids, self.cu))
        self._mask.replay()
        self.proposer.form_ops.raise_pending_errors(self.cu)
        self.replays += 1
        return read(self._out)[:2 * tokens]

    def release(self) -> None:
        """Free the graphs (their memory pools)."""
        for graph in (self._preprocess, self._mask):
            if graph is not None:
                graph.reset()
        self._preprocess = self._mask = self._out = None


def _warm_up(place) -> None:
    """One eager call of each op on `place`'s current stream, on a throwaway
    one-slot proposer holding a two-token prompt: the stream's error record
    and grid scratch are allocated outside any capture (inside one, a batch
    past one cluster would run as one block)."""
    import paddle

    spare = MTPProposer(ProposerConfig(num_model_steps=1, max_model_len=8, max_num_seqs=1),
                        make_base_buffers(1, 1, place), place, form="rollback")
    spare.insert([Request(slot=0, prompt=[1, 2])])
    spare.update_attn_mask_offsets(paddle.to_tensor(np.zeros(2, np.int64), place=place))
    spare.prepare_inputs()
