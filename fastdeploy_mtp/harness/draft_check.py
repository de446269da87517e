"""The real draft model in the simulator's loop, and its oracle.

One ``DraftRunner`` a node: a ``TinyDecoder`` with its KV cache, and what the
draft really holds at each position of each slot (the token last written
there). Each draft substep it runs the cached forward on the op's mask offsets
and, for every request it fed, recomputes the same model *without a cache*
over the tokens held at positions ``0..p``, each position attending its true
keys: the end its prompt's mask offsets give at a prompt position (an image
span attends itself whole), causal (``p + 1``) at every later one. Every query
token is compared: logits within ``TOLERANCE`` and the same argmax, or it is a
disagreement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from .tiny_model import TinyConfig, TinyDecoder

TOLERANCE = 1e-4  # float32 logits of the cached and the cache-free forward


def true_ends(prompt_offsets: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The end (exclusive) of the keys each draft position truly attends: its
    prompt's mask offset + 1 at a prompt position (an image span attends itself
    whole), p + 1 (causal) at every later one (docs/contract.md, "The
    invariant"). The simulator's offset check and the oracle both use it."""
    positions = np.asarray(positions, np.int64)
    ends = positions + 1
    in_prompt = positions < prompt_offsets.shape[0]
    ends[in_prompt] = prompt_offsets[positions[in_prompt]] + 1
    return ends


@dataclass
class ModelTally:
    tokens: int = 0            # query tokens compared
    disagreements: int = 0
    max_diff: float = 0.0
    step_disagreements: List[int] = field(default_factory=list)
    first: Optional[str] = None


class DraftRunner:
    def __init__(self, max_num_seqs: int, max_model_len: int, vocab: int, seed: int = 0):
        self.model = TinyDecoder(TinyConfig(vocab=vocab, seed=seed), max_num_seqs, max_model_len)
        self.held = np.full((max_num_seqs, max_model_len), -1, np.int64)
        self.prompt_offsets: Dict[int, np.ndarray] = {}  # slot -> its prompt's mask offsets
        # slot -> the draft's true input at the prompt's positions 0..n-2 (the
        # prompt shifted by one), where a runner's inserts may leave another
        # token there (admit's `prompt`).
        self.prompt_inputs: Dict[int, np.ndarray] = {}

    def admit(self, slot: int, mask_offsets: np.ndarray, prompt=None) -> None:
        """A new request in `slot`: its prompt's true mask, as the workload
        submitted it (not as a runner inserted it: a request prefilled again
        keeps it, its later positions causal). The cache and the held tokens
        keep whatever was there (a real runner does not clear them).

        With `prompt` (its tokens as submitted) the cache-free recomputation
        also takes the draft's input at each prompt position p < n - 1 from
        the prompt (token p + 1) instead of from what the draft holds there:
        a position computed on another token is then a disagreement (a
        chunked prefill's last position, sim_fastdeploy)."""
        self.prompt_offsets[slot] = np.asarray(mask_offsets, np.int64)
        if prompt is None:
            self.prompt_inputs.pop(slot, None)
        else:
            self.prompt_inputs[slot] = np.asarray(prompt, np.int64)[1:]

    def cached_prefix(self, slot: int, start: int) -> None:
        """The draft K/V of the prompt's positions 0..start-1 as a prefix-cache
        hit leaves them: computed on the request's true inputs (admit's
        `prompt`) and mask (sim_fastdeploy.prefix_cache_start says why that is
        an assumption). Not a forward the runner makes: nothing is checked."""
        tokens = self.prompt_inputs[slot][:start]
        ends = true_ends(self.prompt_offsets[slot], np.arange(start))
        offsets = np.zeros(2 * start, np.int32)
        offsets[1::2] = ends
        self.model.forward_cached(tokens, [(slot, 0, start, 0)], offsets)
        self.held[slot, :start] = tokens

    def export_prompt(self, slot: int, n: int) -> tuple:
        """What a prefill node hands over with a request: the draft K/V of
        positions 0..n-1 (and, for the oracle's bookkeeping, the tokens they
        were computed from)."""
        return self.model.export_slot(slot, n), self.held[slot, :n].copy()

    def import_prompt(self, slot: int, handed: tuple) -> None:
        kv, held = handed
        self.model.import_slot(slot, kv)
        self.held[slot, :held.shape[0]] = held

    def substep(self, ids: np.ndarray, fed: List[tuple], offsets: np.ndarray, tally: ModelTally,
                where: str, unchecked=frozenset()) -> Dict[int, int]:
        """The cached forward over `fed` = [(slot, q, n, kv_start)], checked against
        the cache-free one, but for the slots in `unchecked` (whose outputs the
        runner drops, and whose K/V it computes again before anything attends
        it). Returns each fed slot's greedy next token."""
        logits = self.model.forward_cached(ids, fed, offsets)
        greedy = {}
        for slot, q, n, start in fed:
            self.held[slot, start:start + n] = ids[q:q + n]
            if slot in unchecked:
                greedy[slot] = int(logits[q + n - 1].argmax())
                continue
            M = start + n
            ends = true_ends(self.prompt_offsets[slot], np.arange(M))
            unwritten = np.nonzero(self.held[slot, :M] < 0)[0]
            if unwritten.size:
                # The draft attends a position it never computed (a runner's
                # preset placed it past its KV): every token is wrong, and
                # there is no token to recompute that position from.
                tally.tokens += n
                tally.disagreements += n
                if tally.first is None:
                    tally.first = (f"{where}: slot {slot}: positions {start}..{M - 1} attend "
                                   f"position {int(unwritten[0])}, which the draft never "
                                   f"computed")
                greedy[slot] = int(logits[q + n - 1].argmax())
                continue
            inputs = self.held[slot, :M].copy()
            truth = self.prompt_inputs.get(slot)
            wrong = np.zeros(0, np.int64)
            if truth is not None:
                m = min(M, truth.shape[0])
                wrong = np.nonzero(inputs[:m] != truth[:m])[0]
                inputs[:m] = truth[:m]
            full = self.model.forward_full(inputs, ends)
            got, want = logits[q:q + n], full[start:M]
            diff = np.abs(got - want).max(axis=1)
            bad = (diff > TOLERANCE) | (got.argmax(axis=1) != want.argmax(axis=1))
            tally.tokens += n
            tally.max_diff = max(tally.max_diff, float(diff.max()))
            if bad.any():
                tally.disagreements += int(bad.sum())
                if tally.first is None:
                    j = int(np.nonzero(bad)[0][0])
                    tally.first = (f"{where}: slot {slot} position {start + j}: cached logits "
                                   f"differ from the cache-free recomputation by "
                                   f"{diff[j]:.3g} (mask end {int(offsets[2 * (q + j) + 1])}, "
                                   f"true end {int(ends[start + j])})")
                    if wrong.size:
                        w = int(wrong[0])
                        tally.first += (f"; the draft computed position {w} on token "
                                        f"{int(self.held[slot, w])}, the request's is "
                                        f"{int(truth[w])}")
            greedy[slot] = int(got[-1].argmax())
        return greedy
