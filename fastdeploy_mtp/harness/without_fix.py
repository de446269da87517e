"""The simulator's replay of the behaviour the mask_rollback fix removes
(``simulate --without-fix``): a proposer whose decode node presets
``mask_rollback = 1`` and around whose every preprocess run (eager or
replayed) the op's update of ``mask_rollback`` is undone, as the op without
the fix never touched it. A harness-only name: the proposer users build has
no such switch."""

from __future__ import annotations

import contextlib

from ..buffers import read, write
from ..proposer import MTPProposer


class ProposerWithoutFix(MTPProposer):
    """MTPProposer as the ops behaved before the mask_rollback fix."""

    def decode_mask_rollback(self) -> int:
        return 1

    @contextlib.contextmanager
    def preprocess_effects(self):
        before = read(self.state["mask_rollback"])
        yield
        write(self.state["mask_rollback"], before)
