"""A small real decoder in Paddle, to put a model that consumes the mask offsets
in the simulator's loop (``simulate --draft-model tiny``).

Two layers, d_model 64, 4 heads, learned positions indexed by the KV position,
weights drawn from a seed. Real matmuls and softmax, float32, on the CPU.

``forward_cached`` is what a runner's draft forward does: it takes the step's
flat tokens, each request's first KV position (``seq_lens_decoder``) and the op's
``attn_mask_offsets`` ``[2T]``, writes each token's K/V at its KV position in
the request's slot of a per-slot, per-layer cache, and lets query token t attend
exactly the keys ``[offsets[2t], offsets[2t+1])`` of its slot, the contract a
flash-mask attention kernel reads. Nothing is cleared: K/V left beyond a
rollback stays in the cache, as in a real runner, so attending through a wrong
mask reads it. ``forward_full`` is the cache-free recomputation the oracle
compares against: one sequence, every position's key range given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

import numpy as np

NEG = -1e9  # added to masked scores: exp() of it is exactly 0 in float32


def _cpu(arr: np.ndarray):
    """A Paddle tensor on the CPU, whatever Paddle's default device is: the
    model always runs there (a CUDA Paddle's own kernels need not run on
    every GPU, and the model is small)."""
    import paddle

    return paddle.to_tensor(arr, place=paddle.CPUPlace())


@dataclass(frozen=True)
class TinyConfig:
    vocab: int = 1000
    d_model: int = 64
    heads: int = 4
    layers: int = 2
    seed: int = 0

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads


def _attend(q, k, v, starts: np.ndarray, ends: np.ndarray):
    """q [n, H, hd]; k, v [M, H, hd]; query r attends keys [starts[r], ends[r]).

    A query with no key gets uniform weights over the masked ones (finite, and
    never what a correct mask gives), so a wrong mask cannot produce NaN.
    """
    import paddle

    M = k.shape[0]
    keys = np.arange(M)[None, :]
    allowed = (keys >= starts[:, None]) & (keys < ends[:, None])
    bias = _cpu(np.where(allowed, 0.0, NEG).astype(np.float32))  # [n, M]
    qh = q.transpose([1, 0, 2])                       # [H, n, hd]
    kh = k.transpose([1, 2, 0])                       # [H, hd, M]
    scores = paddle.matmul(qh, kh) * (1.0 / np.sqrt(q.shape[2])) + bias
    weights = paddle.nn.functional.softmax(scores, axis=-1)
    out = paddle.matmul(weights, v.transpose([1, 0, 2]))  # [H, n, hd]
    return out.transpose([1, 0, 2])


def _weights(cfg: TinyConfig, max_model_len: int):
    """Embeddings, blocks, final norm and head, drawn from cfg.seed."""
    rng = np.random.default_rng(cfg.seed)
    d, V = cfg.d_model, cfg.vocab

    def weight(*shape, scale=None):
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        return _cpu(rng.normal(0.0, scale, shape).astype(np.float32))

    def norm():
        return 1.0 + weight(d, scale=0.1), weight(d, scale=0.1)

    embed = weight(V, d, scale=1.0)
    pos = weight(max_model_len, d, scale=0.5)  # every KV position of the cache
    blocks = [dict(ln1=norm(), qkv=weight(d, 3 * d), out=weight(d, d), ln2=norm(),
                   up=weight(d, 4 * d), down=weight(4 * d, d)) for _ in range(cfg.layers)]
    return embed, pos, blocks, norm(), weight(d, V)


def _norm(x, wb):
    import paddle

    return paddle.nn.functional.layer_norm(x, x.shape[-1:], weight=wb[0], bias=wb[1])


class TinyDecoder:
    """The model and its KV cache of `max_num_seqs` slots x `max_model_len` positions."""

    def __init__(self, config: TinyConfig, max_num_seqs: int, max_model_len: int):
        self.cfg = config
        self.N, self.L = max_num_seqs, max_model_len
        self.embed, self.pos, self.blocks, self.ln_f, self.head = _weights(config, max_model_len)
        H, hd = config.heads, config.head_dim
        # Flat [slots * positions, H, hd] per layer: row slot * L + position.
        zeros = np.zeros((self.N * self.L, H, hd), np.float32)
        self.k_cache = [_cpu(zeros) for _ in range(config.layers)]
        self.v_cache = [_cpu(zeros) for _ in range(config.layers)]

    # -- the layers ------------------------------------------------------------

    def _embed(self, tokens: np.ndarray, positions: np.ndarray):
        import paddle

        return (paddle.gather(self.embed, _cpu(tokens.astype(np.int64)))
                + paddle.gather(self.pos, _cpu(positions.astype(np.int64))))

    def _qkv(self, block, x):
        import paddle

        H, hd = self.cfg.heads, self.cfg.head_dim
        qkv = paddle.matmul(_norm(x, block["ln1"]), block["qkv"]).reshape([-1, 3, H, hd])
        return qkv[:, 0], qkv[:, 1], qkv[:, 2]

    def _finish_block(self, block, x, attn):
        import paddle

        x = x + paddle.matmul(attn.reshape([attn.shape[0], -1]), block["out"])
        h = paddle.nn.functional.gelu(paddle.matmul(_norm(x, block["ln2"]), block["up"]))
        return x + paddle.matmul(h, block["down"])

    def _logits(self, x):
        import paddle

        return paddle.matmul(_norm(x, self.ln_f), self.head)

    # -- the two forwards ------------------------------------------------------

    def forward_cached(self, tokens: np.ndarray, requests: Sequence[tuple],
                       offsets: np.ndarray) -> np.ndarray:
        """One draft substep over the packed batch.

        `tokens` [T] the step's flat tokens; `requests`: (slot, q, n, kv_start)
        for each request fed this substep (its tokens are tokens[q:q+n], at KV
        positions kv_start..kv_start+n-1); `offsets` [2T] the op's output.
        Returns the logits [T, vocab] (rows of tokens no request owns are 0).
        """
        import paddle

        T = tokens.shape[0]
        rows = np.concatenate([np.arange(q, q + n) for _, q, n, _ in requests]) \
            if requests else np.zeros(0, np.int64)
        positions = np.concatenate([np.arange(s, s + n) for _, _, n, s in requests]) \
            if requests else np.zeros(0, np.int64)
        if positions.size and positions.max() >= self.L:
            raise ValueError(f"TinyDecoder: KV position {positions.max()} past the cache's "
                             f"{self.L} positions")
        cache_rows = np.concatenate([np.full(n, slot * self.L) for slot, _, n, _ in requests]) \
            + positions if requests else np.zeros(0, np.int64)
        logits = np.zeros((T, self.cfg.vocab), np.float32)
        if rows.size == 0:
            return logits
        starts_all, ends_all = offsets[0::2], offsets[1::2]
        x = self._embed(tokens[rows], positions)
        index = _cpu(cache_rows.astype(np.int64))
        for layer, block in enumerate(self.blocks):
            q, k, v = self._qkv(block, x)
            paddle.scatter_(self.k_cache[layer], index, k, overwrite=True)
            paddle.scatter_(self.v_cache[layer], index, v, overwrite=True)
            parts: List = []
            at = 0
            for slot, q0, n, _ in requests:
                starts = starts_all[q0:q0 + n].astype(np.int64)
                ends = np.minimum(ends_all[q0:q0 + n].astype(np.int64), self.L)
                width = max(int(ends.max()), 1)
                base = slot * self.L
                parts.append(_attend(q[at:at + n], self.k_cache[layer][base:base + width],
                                     self.v_cache[layer][base:base + width], starts, ends))
                at += n
            x = self._finish_block(block, x, paddle.concat(parts, axis=0))
        logits[rows] = self._logits(x).numpy()
        return logits

    def forward_full(self, tokens: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Cache-free: positions 0..M-1 of one sequence, position p attending
        keys [0, ends[p]). Returns the logits [M, vocab]."""
        M = tokens.shape[0]
        x = self._embed(tokens, np.arange(M))
        starts = np.zeros(M, np.int64)
        for block in self.blocks:
            q, k, v = self._qkv(block, x)
            x = self._finish_block(block, x, _attend(q, k, v, starts, ends.astype(np.int64)))
        return self._logits(x).numpy()

    def export_slot(self, slot: int, n: int) -> list:
        """Copies of positions 0..n-1 of `slot`, K and V of every layer: what a
        prefill node transfers to a decode node."""
        a, b = slot * self.L, slot * self.L + n
        return [(k[a:b].clone(), v[a:b].clone()) for k, v in zip(self.k_cache, self.v_cache)]

    def import_slot(self, slot: int, kv: list) -> None:
        """Write transferred K/V (``export_slot``) at positions 0.. of `slot`."""
        import paddle

        n = kv[0][0].shape[0]
        index = _cpu(np.arange(n, dtype=np.int64) + slot * self.L)
        for layer, (k, v) in enumerate(kv):
            paddle.scatter_(self.k_cache[layer], index, k, overwrite=True)
            paddle.scatter_(self.v_cache[layer], index, v, overwrite=True)
