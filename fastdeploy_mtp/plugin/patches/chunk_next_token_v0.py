"""A prefill chunk's last draft input on FastDeploy's v0 scheduler's path:
the prompt's next token, as FastDeploy's own insert wrote it, not the base
model's dropped sample the preprocess puts over it.

What it replaces: ``MTPProposer.insert_prefill_inputs`` and
``MTPProposer.update_task_chunk_prefill`` (``fastdeploy/spec_decode/
mtp.py``), which the GPU runner calls with ``ENABLE_V1_KVCACHE_SCHEDULER=0``
up to 2178f2829 (``gpu_model_runner.py`` 9018ccf74 lines 1046 and 2118;
97eee7567 retired that scheduler). Each is wrapped, not rewritten:
FastDeploy's method runs as it is, and the wrapper notes one cell for the
preprocess method's wrapper (``chunk_next_token``) to write back after
FastDeploy's preprocess ran.

Why: the v0 engine splits a prompt into chunks (``prefill_chunk_info``,
``common_engine.py`` 9018ccf74 lines 552-603). The first reaches the
proposer's ``insert_prefill_inputs``, which gives the draft the whole prompt
shifted by one (``mtp.py`` 9018ccf74 lines 654-657) and the first chunk's
length as ``seq_lens_encoder`` (lines 663-665); each later one reaches
``update_task_chunk_prefill``, which gives it the chunk shifted by one, the
next chunk's first token included (lines 1116-1120), and the chunk's length
as ``seq_lens_encoder`` (line 1128). Both write the right token at the
chunk's last draft input, column ``size - 1``. The preprocess of the step
that computes the chunk then puts the base model's sample there
(``draft_model_preprocess.cu`` 9018ccf74 lines 204-213), a sample the runner
drops because the prompt goes on. The draft's K/V at that position is
computed on it and never again. No op can tell a chunk from a prompt's end
(``step_idx`` is 0 for both).

How: after FastDeploy's method ran, its wrapper notes the cell it wrote for
a chunk that is not the prompt's last: the slot (as the method computes it),
the column ``size - 1`` and ``prompt_token_ids[start + size]``, the token
FastDeploy wrote there. The insert's chunk is the first
(``prefill_chunk_info[0]``, start 0), with chunked prefill on, off a decode
node, where more chunks follow; ``update_task_chunk_prefill``'s is
``prefill_chunk_info[chunk_idx]``, start the sum of the ones before it, a
chunk but the last (FastDeploy's own test, line 1117; its runner goes to
the decode after the last chunk of the list, ``gpu_model_runner.py`` line
2078). An insert forgets what was noted for its slots before. The
preprocess method's wrapper writes the noted tokens after FastDeploy's
preprocess ran. The base model's tokens are never touched.

What FastDeploy would have to change for it to go: have the preprocess place
the base model's token only at a prompt's last chunk (a flag these two
methods set), since its own inserts already write the right one.

Text prompts alone take this path: a multimodal chunk reaches the proposer
as a dict (``common_engine.py`` 9018ccf74 lines 664-679), which these
methods cannot take.
"""

from __future__ import annotations

import logging
from typing import Dict, Optional, Tuple

from ..log import first_line, say
from .chunk_next_token import PENDING, WRITER, chunk_next_token
from .patch import Patch


def first_chunk(request) -> Optional[Tuple[int, int]]:
    """(column, token) of the first chunk's last draft input where more
    chunks follow it; None where it is the list's only one, or the request
    has no chunks (``prefill_chunk_info`` unset) or is a decode node's."""
    info = getattr(request, "disaggregate_info", None)
    if info is not None and info.get("role") == "decode":
        return None
    chunks = getattr(request, "prefill_chunk_info", None)
    if not chunks or len(chunks) < 2:
        return None
    return chunk_next_token(0, int(chunks[0]), list(request.prompt_token_ids))


def later_chunk(task) -> Optional[Tuple[int, int]]:
    """(column, token) of the last draft input of the chunk
    ``update_task_chunk_prefill`` set up (``prefill_chunk_info[chunk_idx]``)
    where it is a chunk but the prompt's last; None otherwise."""
    chunks = [int(c) for c in task.prefill_chunk_info]
    i = int(task.chunk_idx)
    if i >= len(chunks) - 1:
        return None
    start = sum(chunks[:i])
    return chunks[i] - 1, int(task.prompt_token_ids[start + chunks[i]])


def _note(proposer, slot: int, noted: Optional[Tuple[int, int]]) -> None:
    if noted is None:
        return
    pending: Dict[int, Tuple[int, int]] = getattr(proposer, PENDING, {})
    pending[int(slot)] = noted
    setattr(proposer, PENDING, pending)


def _wrap_insert(original):
    def insert_prefill_inputs(self, req_dicts, *args, **kwargs):
        result = original(self, req_dicts, *args, **kwargs)
        try:
            pending = getattr(self, PENDING, None)
            for request in req_dicts:
                if pending:  # a note of the slot's earlier request is not this one's
                    pending.pop(int(request.idx), None)
                if self.cache_config.enable_chunked_prefill:
                    _note(self, request.idx, first_chunk(request))
        except Exception as e:  # FastDeploy's insert stands as it ran
            say(logging.WARNING, f"patch chunk-next-token-v0 could not note an insert "
                                 f"({type(e).__name__}: {first_line(str(e), 100)})")
        return result

    return insert_prefill_inputs


def _wrap_chunk(original):
    def update_task_chunk_prefill(self, task, *args, **kwargs):
        result = original(self, task, *args, **kwargs)
        try:
            index = getattr(self.model_inputs, "get_index_by_batch_id", None)
            slot = index(task.idx) if index is not None else task.idx
            _note(self, slot, later_chunk(task))
        except Exception as e:  # FastDeploy's update stands as it ran
            say(logging.WARNING, f"patch chunk-next-token-v0 could not note a chunk "
                                 f"({type(e).__name__}: {first_line(str(e), 100)})")
        return result

    return update_task_chunk_prefill


# The forms of the versions whose runner calls these methods (up to
# 2178f2829); their preprocess method is patched by chunk_next_token.
_FORMS = ("pr5245", "pr5738", "pr6403")
MTP = "fastdeploy.spec_decode.mtp"

PATCHES = (
    Patch("chunk-next-token-v0 (insert)", MTP, "MTPProposer", "insert_prefill_inputs",
          {"986051de3a7af1b4": "ba915e03e, 9018ccf74, dcb0ccede",
           "0ee27fadb8af87dd": "2178f2829"},
          _wrap_insert, _FORMS, needs=WRITER),
    Patch("chunk-next-token-v0 (chunk)", MTP, "MTPProposer", "update_task_chunk_prefill",
          {"a1889bb5b83e52bb": "ba915e03e, 9018ccf74, dcb0ccede",
           "37bc50d77e85c582": "2178f2829"},
          _wrap_chunk, _FORMS, needs=WRITER),
)
