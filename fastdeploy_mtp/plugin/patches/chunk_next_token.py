"""A prefill chunk's last draft input: the prompt's next token, not the base
model's dropped sample.

What it replaces: ``MTPProposer.insert_tasks_v1`` (``fastdeploy/spec_decode/
mtp.py``) and the method that runs the proposer's ``draft_model_preprocess``
(``MTPProposer._prepare_inputs`` up to 2178f2829, ``_prepare_inputs_cuda``
at e87ce4b8c to c29e86fc9, ``MTPProposerCUDA._prepare_inputs`` in
``mtp_cuda.py`` at dad5a432a). Each is wrapped, not rewritten: FastDeploy's
method runs as it is, and the wrapper adds one write after it.

Why: FastDeploy's scheduler hands a long prompt to the proposer as several
PREFILL tasks, one chunk [start, end) each (``resource_manager_v1.py``
9018ccf74 lines 215-217, 360-361). The insert gives the draft the chunk's
tokens shifted by one, ``input_ids[:length-1] = target input_ids[1:length]``
(``mtp.py`` 9018ccf74 lines 536-538; the same line at ba915e03e 487,
2178f2829 470, 7a6c28781 484, c29e86fc9 487, dad5a432a 475): the draft's
input at the chunk's last position, ``length - 1``, would be the prompt's
token ``end``, which the insert does not write. The preprocess of the same
step then puts the base model's sample there (``draft_model_preprocess.cu``
9018ccf74 lines 204-213; the shadow kernel alike), a sample the runner drops
(``speculate_save_output.cc`` line 106) because the prompt goes on. The
draft's K/V at that position is computed on that guess, and the next chunk
starts past it, so nothing computes it again. No op can tell a chunk from a
prompt's end (``step_idx`` is 0 for both, ``mtp.py`` 9018ccf74 lines
554-556) nor knows the prompt's next token.

How: the insert's wrapper notes, for each PREFILL task whose chunk ends
before the request's tokens do (``prefill_end_index < len(prompt_token_ids +
output_token_ids)``, off a decode node), the slot, the column ``length - 1``
and the token ``(prompt_token_ids + output_token_ids)[prefill_end_index]``.
The preprocess method's wrapper, after FastDeploy's method ran, writes each
noted token into ``model_inputs["input_ids"][slot, column]`` and forgets
them. The base model's tokens are never touched.

What FastDeploy would have to change for it to go: write the prompt's next
token at ``input_ids[idx, length - 1]`` in the insert of a chunk that is not
the last, and have the preprocess place the base model's token only at a
prompt's last chunk (a flag the insert sets, since ``step_idx`` does not tell).

The digests (``patches.code_digest``) of the methods it was read at are
listed below with their commits; any other code is left alone, with a
WARNING line.
"""

from __future__ import annotations

import logging
from typing import Dict, Optional, Tuple

from ..log import first_line, say
from .patch import Patch

# Where the proposer notes the tokens its next preprocess must write:
# {slot: (column, token)}.
PENDING = "_fastdeploy_mtp_chunk_next_token"


def chunk_next_token(start: int, end: int, tokens) -> Optional[Tuple[int, int]]:
    """(The column of the draft's last input of the chunk [start, end), the
    request's token there) where the chunk ends before the request's
    `tokens` (prompt, then output) do; None for the chunk that reaches their
    end, whose last input is the base model's sample, as FastDeploy's
    preprocess writes it."""
    if end - start >= 1 and end < len(tokens):
        return end - start - 1, int(tokens[end])
    return None


def chunk_next_tokens(requests, slot_of, decode_node: bool) -> Dict[int, Tuple[int, int]]:
    """{slot: (column, token)} for the PREFILL tasks among `requests` whose
    chunk ends before the request's tokens do: the column of the chunk's last
    draft input and the request's token there. `slot_of(request)` gives a
    request's slot as FastDeploy's insert computes it. A decode node's insert
    runs no prefill (it sets ``seq_lens_encoder`` to 0): nothing."""
    if decode_node:
        return {}
    out = {}
    for request in requests:
        task_type = getattr(getattr(request, "task_type", None), "value", None)
        if task_type != _prefill_value():
            continue
        tokens = list(request.prompt_token_ids) + list(request.output_token_ids or [])
        noted = chunk_next_token(int(request.prefill_start_index),
                                 int(request.prefill_end_index), tokens)
        if noted is not None:
            out[int(slot_of(request))] = noted
    return out


def _prefill_value():
    from fastdeploy.engine.request import RequestType

    return RequestType.PREFILL.value


def write_next_tokens(input_ids, pending: Dict[int, Tuple[int, int]]) -> None:
    """input_ids[slot, column] = token for each noted chunk."""
    for slot, (column, token) in pending.items():
        input_ids[slot, column] = token


def _wrap_insert(original):
    def insert_tasks_v1(self, req_dicts, *args, **kwargs):
        result = original(self, req_dicts, *args, **kwargs)
        try:
            batch = self.model_inputs
            index = getattr(batch, "get_index_by_batch_id", None)

            def slot_of(request):
                return index(request.idx) if index is not None else request.idx

            role = self.fd_config.scheduler_config.splitwise_role
            pending = getattr(self, PENDING, {})
            pending.update(chunk_next_tokens(req_dicts, slot_of, role == "decode"))
            setattr(self, PENDING, pending)
        except Exception as e:  # FastDeploy's insert stands as it ran
            say(logging.WARNING, f"patch chunk-next-token could not note an insert "
                                 f"({type(e).__name__}: {first_line(str(e), 100)})")
        return result

    return insert_tasks_v1


def _wrap_preprocess(original):
    def prepare(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        pending = getattr(self, PENDING, None)
        if pending:
            try:
                write_next_tokens(self.model_inputs["input_ids"], pending)
            except Exception as e:  # the draft keeps what FastDeploy's preprocess wrote
                say(logging.WARNING, f"patch chunk-next-token could not write a chunk's next "
                                     f"token ({type(e).__name__}: {first_line(str(e), 100)})")
            pending.clear()
        return result

    return prepare


_FORMS = ("pr5245", "pr5738", "pr6403", "shadow")
MTP = "fastdeploy.spec_decode.mtp"
# What writes the noted tokens: without it a note does nothing.
WRITER = "chunk-next-token (preprocess)"

PATCHES = (
    Patch("chunk-next-token (insert)", MTP, "MTPProposer", "insert_tasks_v1",
          {"691f7e0405bd1208": "ba915e03e",
           "166e4e2b092b1526": "9018ccf74, dcb0ccede",
           "7b7073ec9c1794df": "2178f2829",
           "46524b861d29829f": "e87ce4b8c",
           "e3c3258e7cde8641": "7a6c28781",
           "4fc17938c9b5e203": "c29e86fc9",
           "60c3934eba5bc6f9": "dad5a432a"},
          _wrap_insert, _FORMS, needs=WRITER),
    Patch("chunk-next-token (preprocess)", MTP, "MTPProposer", "_prepare_inputs",
          {"319a0a1adbb2a383": "ba915e03e",
           "6c56ea6daaced338": "9f4977eb7 to e1a9b282e",
           "d230518a6b50bebc": "9018ccf74, dcb0ccede, 2178f2829"},
          _wrap_preprocess, ("pr5245", "pr5738", "pr6403")),
    Patch("chunk-next-token (preprocess)", MTP, "MTPProposer", "_prepare_inputs_cuda",
          {"e8a8efb4bd9694b9": "e87ce4b8c, 7a6c28781",
           "a66fcc35a868fc71": "c29e86fc9"},
          _wrap_preprocess, ("shadow",)),
    Patch("chunk-next-token (preprocess)", "fastdeploy.spec_decode.mtp_cuda", "MTPProposerCUDA",
          "_prepare_inputs", {"39b904ce875ecdb9": "dad5a432a"},
          _wrap_preprocess, ("shadow",)),
)
