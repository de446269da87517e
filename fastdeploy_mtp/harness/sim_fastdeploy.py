"""The simulator's replay of FastDeploy's own runner (``simulate --runner fastdeploy``).

Our ops driven the way FastDeploy's MTP proposer drives them on its default
path, in our words from reading it (paths in FastDeploy's tree, at the
commits named). ``ENABLE_V1_KVCACHE_SCHEDULER`` defaults to 1
(fastdeploy/envs.py:82 at 9018ccf74, :96 at e87ce4b8c and 7a6c28781, :108 at
c29e86fc9; fastdeploy/engine/args_utils.py:556-563 at 9018ccf74 turns it off
only on platforms other than CUDA, XPU, MACA, Iluvatar and Intel HPU), and
with it the GPU worker inserts every request through ``insert_tasks_v1``
(fastdeploy/worker/gpu_worker.py:201-204 at 9018ccf74, :213-216 at
7a6c28781, :221-224 at c29e86fc9), so that insert is the one replayed;
``insert_prefill_inputs`` (the other path) is not.

The insert (fastdeploy/spec_decode/mtp.py ``insert_tasks_v1``, 9018ccf74:517-598
for the rollback and recompute forms, c29e86fc9:463-559 for the shadow form)
gets each request as positions [start, end) to prefill: a new prompt of n
tokens [0, n) on a mixed or prefill node, and on a decode node the prefill
node's first token alone, [n, n + 1) (``handed_over_span``). For that span of
``length`` tokens it writes ``input_ids[:length-1]`` (the base model's row
shifted by one: nothing on a decode node), ``pre_ids`` = -1, ``stop_flags``
and ``batch_drop`` false, ``seq_lens_encoder = seq_lens_this_time = length``,
``seq_lens_decoder = start``, ``step_idx`` = the tokens generated so far (0,
or 1 on a decode node), ``attn_mask_offsets_full[:length]`` = the span's mask
offsets and the cursor ``attn_mask_offsets_decoder`` = the offset of the
span's last token + 1: ``offsets[n-1] + 1`` for a prompt, and on a decode
node the first generated token's, which attends causally, so ``n + 1``.
A decode node then sets ``seq_lens_encoder = 0``, ``mask_rollback = 1`` and
(recompute form) ``recompute_token_num = 0``. It never writes
``draft_tokens``, ``is_block_step`` or ``decode_states``, a new prompt
leaves ``mask_rollback`` as it was, and a finished slot is never released: it
keeps what the ops left in it until the next insert.

- ``--form recompute`` (FastDeploy's 22-tensor op): ``recompute_token_num``
  starts at ``k - 1`` in every slot (mtp.py:498-500 at 9018ccf74).
- ``--form rollback`` (our 21-tensor op): the recompute form's runner without
  ``recompute_token_num``.
- ``--form pr5245`` (FastDeploy ba915e03e's 20-tensor op): ba915e03e's
  runner, the rollback form's without ``mask_rollback`` in its preprocess call
  (its insert is mtp.py:468-547 there, the decode node's ``mask_rollback = 1``
  at :523; its calls :685-709 and :797-808).
- ``--form pr6403``: the pr5738 form's runner (2178f2829 changed the mask op
  only).
- ``--form xpu`` (FastDeploy's XPU op at c29e86fc9): that commit's runner on
  its XPU path: the insert keeps the cursor (mtp.py:516-521), a decode node's
  ``seq_lens_this_time`` is ``length + 1`` (:528), and the preprocess is
  called with 22 tensors, ``batch_drop`` and ``is_block_step`` swapped as
  above (:766-793).
- ``--form shadow`` (the 17-tensor op and the 8-tensor
  ``update_attn_mask_offsets`` of 7a6c28781 and c29e86fc9): the same insert,
  but its GPU runner writes no cursor (c29e86fc9:518, XPU only), a decode
  node's ``seq_lens_this_time`` is ``length + 1`` (c29e86fc9:528; the
  preprocess sets it again before anything reads it), and its
  ``mask_rollback`` (still written, c29e86fc9:531) is read by no op of that
  form; each slot's
  ``max_dec_len`` is the run's, and the prefill node passes
  ``is_splitwise_prefill``.

The ops get the buffers in the order FastDeploy's proposer passes them
(``preprocess_call``). In the rollback and recompute forms that order puts the
runner's ``batch_drop`` in the preprocess's ``is_block_step`` and its
``is_block_step`` in the preprocess's ``batch_drop`` (at ba915e03e and
9018ccf74 alike): a draft parked by a block step is marked in the runner's
``batch_drop``, which the next insert clears, and the mask op, which gets the
runner's ``is_block_step`` in its own place (mtp.py:871-882 against
cpp_extensions.cc:1071-1081 at 9018ccf74; the shadow form's 8 tensors at
7a6c28781:892-903 against :1141-1149), never sees it. The preprocess gets
``num_model_step = k`` on every node (mtp.py:780 at 9018ccf74).

The base model is the simulator's (``sim_models.ScriptedBase``) in every
form: on a decode node its first verification checks the first token and the
prefill node's draft token, as the shadow versions' runner has its base model
do (fastdeploy/worker/gpu_model_runner.py:885-891 at c29e86fc9). The runner of
9018ccf74 hands its base model the first token alone (gpu_model_runner.py:701
and 712, no draft tokens), which then accepts exactly one token.

Chunked prefill and prefix-cache starts (``--chunk N``, ``--prefix-cache P``,
on a mixed or prefill node; a decode node's insert stays the first token
alone). FastDeploy's scheduler hands a prompt not yet all computed as a
PREFILL task of [num_computed_tokens, num_computed_tokens + new tokens)
(resource_manager_v1.py 9018ccf74:215-219), each step, the running requests
before the waiting ones (:548-551, 648-672, 674), the new tokens bounded by
the step's budget (:360-361) and moved to the end of an image span they would
cut (:403-417): ``chunk_end``, ``prefill_spans``. A prefix-cache hit starts
the first task at the cached token count (``prefix_cache_start``). Every task
goes through the same ``insert_tasks_v1`` (gpu_model_runner.py 9018ccf74:827),
so a chunk [start, end) gets the rules above: ``seq_lens_decoder = start``,
``seq_lens_encoder = end - start``, ``step_idx`` 0 on a chunk before the last
(mtp.py:554-556: end short of prompt and output), the chunk's mask offsets
and the cursor ``offsets[end-1] + 1`` (:559-566), and ``input_ids`` the base
row from column 1 (:536-538), which the base runner fills with the chunk's
tokens (gpu_model_runner.py:701-703): tokens start + 1 .. end - 1.

The base model runs a chunk as any prefill: its verify samples a token at the
chunk's last position, ``accept_num`` 1, ``step_idx`` + 1
(speculate_verify.cu 9018ccf74:267-297), its update moves
``seq_lens_decoder`` to end (speculate_update.cu:67-70), and only the output
is dropped while ``seq_lens_decoder`` is short of the prompt
(speculate_save_output.cc:106); ``sim_models.ScriptedBase`` does the same.
The proposer runs in the same step, and its preprocess, seeing
``seq_lens_encoder > 0`` and the base model not stopped, puts
``accept_tokens[0]``, that dropped sample, at ``input_ids[end - start - 1]``
(draft_model_preprocess.cu 9018ccf74:204-213; process_splitwise_prefill on a
prefill node, :99-107; the shadow form's kernel alike, c29e86fc9:107-113,
which names chunked prefill among its cases). The draft's K/V at a chunk's
last position is thus computed on the base model's guess at the next prompt
token, not on that token, and nothing computes it again: the next chunk starts
at end. (The insert of the other path, ``update_task_chunk_prefill``,
mtp.py:1103-1124, writes the next chunk's first token there; it is not the
path replayed.) The oracle, given the prompt (``DraftRunner.admit``), holds
each prompt position to the request's own token, so every later query that
attends such a position disagrees, unless the sample is the prompt's token
(the scripted base samples at random). A prefill node's runner stops a
request once ``seq_lens_decoder`` reaches its prompt
(speculate_schedule_cache.cu 9018ccf74:51-59 under
``PREFILL_NODE_ONE_STEP_STOP_V1``, set for a prefill node with the v1
scheduler, worker_process.py:1005-1006), so it hands the request over after
its last chunk, with the draft K/V of every chunk's last position.

It also counts every index FastDeploy's own kernels would write outside a row
or a tensor on the states of the loop (a numpy model of their writes): the
preprocess's ``pre_ids`` window and first-token column, and the draft
update's ``pre_ids[i, step_idx]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, List

import numpy as np

from .. import forms
from ..plugin.patches.chunk_next_token import chunk_next_token, write_next_tokens
from ..signature import FORMS
from ..buffers import SLOT_FIELDS, read, write
from ..slots import Request


@dataclass
class OutsideWrites:
    """Indices FastDeploy's kernels would write outside a row or tensor."""

    preprocess: int = 0   # pre_ids window or input_ids column of draft_model_preprocess
    draft_update: int = 0  # pre_ids[i, step_idx] of draft_model_update
    first: str = ""
    # Each of draft_model_update's: (row, column, token), the column outside
    # the row (replay_twin puts it where the kernel's row pointer lands).
    update_cells: List[tuple] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.preprocess + self.draft_update

    def note(self, msg: str) -> None:
        if not self.first:
            self.first = msg


def handed_over_span(role: str, n: int):
    """The positions [start, end) FastDeploy's scheduler hands the insert of a
    request with an n-token prompt: the whole prompt on a mixed or prefill
    node; on a decode node the first token alone, as a one-token prefill of
    position n (resource_manager_v1.py at 9018ccf74: the decode node counts
    the prompt as computed, 1094, asks for one token more once the first
    token arrives, 1126-1133, and schedules the difference as a prefill,
    216-217 and 360)."""
    return (n, n + 1) if role == "decode" else (0, n)


# The simulator's cache block, in tokens. FastDeploy's is cache_config.block_size
# (64 by default: fastdeploy/config.py:1273 at 9018ccf74); the simulator's
# prompts are a few dozen tokens, so its prefix-cache hits use blocks of 4.
PREFIX_BLOCK = 4


def prefix_cache_start(rng, offsets: np.ndarray, prob: float, block: int = PREFIX_BLOCK) -> int:
    """Where the prefill of a prompt with these mask offsets starts after a
    prefix-cache lookup (``--prefix-cache P``): with probability `prob` a hit
    of a whole number of blocks, 1 .. n // block of them uniformly, else 0.
    The hit is whole blocks, each block's key the hash of its own tokens and
    the blocks before it (prefix_cache_manager.py 9018ccf74:797-802); the
    scheduler counts its tokens computed (resource_manager_v1.py
    9018ccf74:946-948), less one block where the hit is the whole prompt, so
    that a token is left to prefill (:944-945). A hit that would end inside
    an image span ends at the span's start instead, as FastDeploy's match
    does with ``disable_chunked_mm_input`` (prefix_cache_manager.py:1524-1545
    and 1375-1432); the simulator applies it after the whole-prompt rule too,
    so that the cached positions never attend a position past the hit.
    Draws from `rng` only where `prob` > 0.

    The draft's K/V at the hit's positions: MTP's insert gives the draft the
    request's block table (mtp.py 9018ccf74:542-547) over the draft's own
    cache, so a reused block holds what the draft of the request that filled
    it wrote there. Its positions before the last see the same tokens and
    target hidden states as this request's; the last one's draft input is
    the token after the hit in that earlier request, which the block's key
    does not cover. Which request that was is the workload's, not the
    code's: the replay takes the cached K/V as right (computed on this
    request's tokens and mask), as for a repeated prompt."""
    n = offsets.shape[0]
    if prob <= 0 or rng.random() >= prob or n < block:
        return 0
    matched = block * int(rng.integers(1, n // block + 1))
    if matched == n:
        matched -= block
    if 0 < matched and offsets[matched - 1] >= matched:  # inside a span: back to its start
        matched = int(np.nonzero(offsets == offsets[matched - 1])[0][0])
    return matched


def image_span_end(offsets: np.ndarray, p: int) -> int:
    """The end (exclusive) of the image span holding prompt position p, or 0
    where p is a text token. A span [a, b) gives each of its tokens the
    offset b - 1 (``simulate.new_prompt``): p is in one when its offset lies
    past it, or when the token before it ends its span at p."""
    if offsets[p] > p or (p > 0 and offsets[p - 1] == p):
        return int(offsets[p]) + 1
    return 0


def chunk_end(offsets: np.ndarray, start: int, n: int, chunk: int) -> int:
    """The end of the prefill chunk FastDeploy's scheduler hands from `start`
    with `chunk` tokens of budget (``--chunk``): start + chunk, at most n
    (resource_manager_v1.py 9018ccf74:360-361), and where the first token left
    out lies inside an image span, that span's end: a chunk never cuts an
    image (:403-417; the simulator's prompts have no image-end marker, which
    FastDeploy leaves to the next chunk, :408-413). FastDeploy's budget is
    the batch's, shared by its requests (:546 and 666); here each request
    gets `chunk`."""
    end = min(n, start + chunk)
    if end < n:
        end = max(end, image_span_end(offsets, end))
    return end


def prefill_spans(n: int, start: int, chunk: int, offsets: np.ndarray):
    """The spans [s, e) in which FastDeploy prefills an n-token prompt from
    `start` (0, or a prefix-cache hit), each chunk_end's; one span [start, n)
    without --chunk (`chunk` 0)."""
    spans = []
    while start < n:
        end = chunk_end(offsets, start, n, chunk) if chunk else n
        spans.append((start, end))
        start = end
    return spans


def mask_offsets_through_first_token(r: Request) -> np.ndarray:
    """The request's mask offsets as FastDeploy's insert indexes them, one
    entry per position: the prompt's, then the first generated token's. That
    token attends causally, so its entry is its own position n.

    FastDeploy's tree only reads the list (mtp.py 9018ccf74:559-566); its
    builder is a multimodal processor outside it. The one in FastDeploy's
    history (mm_data_process.py:548-586 at 80ea56781, a side branch) numbers
    the prompt's positions and raises an image span's to its end, for the
    prompt only: a decode node's index n lies past its list. A later runner
    takes the positions themselves for a request without the list
    (gpu_model_runner.py a09792e08:866-867), as this does for the token
    past the prompt."""
    n = len(r.prompt)
    prompt = np.asarray(r.mask_offsets if r.mask_offsets is not None else np.arange(n), np.int32)
    return np.append(prompt, np.int32(n))


# The forms replayed with FastDeploy c29e86fc9's runner: the shadow form (its
# GPU path) and the xpu form (its XPU path, which keeps the cursor,
# mtp.py:516-521, and calls the 22-tensor op, :766-793).
RUNNER_C29E86FC9 = ("shadow", "xpu")


def insert(proposer, requests: Iterable[Request], recompute=None, form: str = "rollback",
           spans=None, pending=None) -> None:
    """FastDeploy's insert_tasks_v1 of `form`'s version, written into the
    proposer's buffers (and, in the recompute form, into `recompute`: its
    recompute_token_num). Buffers it does not name keep what they hold.
    `spans` ({slot: (start, end)}, mixed and prefill nodes) hands a request's
    prompt as that chunk (prefill_spans) instead of whole. `pending` (the
    plugin's patch of the insert, ``plugin.patches.chunk_next_token``): the
    dict the patch notes a chunk's next token in, for prepare_inputs."""
    cfg = proposer.config
    decode = cfg.role == "decode"
    a = {n: read(proposer.state[n]) for n in SLOT_FIELDS}
    for r in requests:
        i, prompt = int(r.slot), np.asarray(r.prompt, np.int64)
        n = prompt.shape[0]
        start, end = handed_over_span(cfg.role, n)
        if spans is not None and i in spans:
            if decode:
                raise ValueError("a decode node's insert is the first token alone")
            start, end = spans[i]
        length = end - start
        # The base model's input row holds the span's tokens; the draft gets
        # them shifted by one (nothing on a decode node: the span is one token).
        tokens = np.append(prompt, int(r.first_token)) if decode else prompt
        offsets = mask_offsets_through_first_token(r)
        a["input_ids"][i, : length - 1] = tokens[start + 1:end]
        a["pre_ids"][i] = -1
        a["stop_flags"][i] = False
        a["batch_drop"][i] = False
        a["seq_lens_encoder"][i] = length
        a["seq_lens_decoder"][i] = start
        a["seq_lens_this_time"][i] = length
        # The tokens generated so far, once the span reaches the last of them.
        generated = tokens.shape[0] - n
        a["step_idx"][i] = generated if end >= tokens.shape[0] else 0
        a["attn_mask_offsets_full"][i, :length] = offsets[start:end]
        if pending is not None and not decode:
            noted = chunk_next_token(start, end, tokens)
            if noted is not None:
                pending[i] = noted
        if form != "shadow":  # the shadow versions' GPU runner keeps no cursor
            a["attn_mask_offsets_decoder"][i] = int(offsets[end - 1]) + 1
        if decode:
            a["seq_lens_encoder"][i] = 0
            if form in RUNNER_C29E86FC9:  # its base model verifies the first token and the draft
                a["seq_lens_this_time"][i] = length + 1
            # Written in every version; the shadow form's ops never read it.
            a["mask_rollback"][i] = 1
            if recompute is not None:
                counts = read(recompute)
                counts[i] = 0
                write(recompute, counts)
    for name in SLOT_FIELDS:
        write(proposer.state[name], a[name])


# The two buffers FastDeploy's proposer passes swapped in the rollback and
# recompute forms' call (preprocess_call): the op's name -> the runner's buffer.
SWAPPED_BY_FASTDEPLOY = {"is_block_step": "batch_drop", "batch_drop": "is_block_step"}


def preprocess_call(proposer, recompute=None, max_dec_len=None, form=None):
    """draft_model_preprocess as FastDeploy's proposer calls it: (form, its
    tensors by the op's input names, its attributes by name).

    FastDeploy passes the tensors by position (mtp.py ``_prepare_inputs``:
    ba915e03e:685-709, 9018ccf74:757-785), and puts its ``batch_drop`` where
    the op declares ``is_block_step`` and its ``is_block_step`` where the op
    declares ``batch_drop`` (ba915e03e:694-695 against cpp_extensions.cc:879-880
    and draft_model_preprocess.cu:441-442; 9018ccf74:766-767 against
    cpp_extensions.cc:887-888 and draft_model_preprocess.cu:459-460): the op
    parks a draft in the runner's batch_drop, which every insert clears, and
    drops one into the runner's is_block_step, which the mask op reads.
    The pr5738 and recompute forms are 9018ccf74's call (`form` says which
    rules run; the recompute form's by default where `recompute` is given),
    the rollback form the same without ``recompute_token_num``. The shadow form's call has neither
    buffer and matches the op's order (e87ce4b8c:720-740, 7a6c28781:723-743,
    c29e86fc9:728-748 against cpp_extensions.cc:968-986 there)."""
    s, b = proposer.state, proposer.base
    cfg = proposer.config
    k = cfg.num_model_steps
    if max_dec_len is not None:
        form, swapped = "shadow", {}
        attrs = (k, cfg.role == "prefill")
    else:
        form = form or ("rollback" if recompute is None else "recompute")
        swapped = SWAPPED_BY_FASTDEPLOY
        # speculative_method in ("eagle", "mtp") and ENABLE_V1_KVCACHE_SCHEDULER:
        # the harness's node sets both as FastDeploy's MTP runner does.
        attrs = (k, bool(cfg.truncate_first_token), cfg.role == "prefill",
                 bool(cfg.kvcache_scheduler_v1))
    own = {"recompute_token_num": recompute, "max_dec_len": max_dec_len}

    def buffer(name):
        """The runner's buffer FastDeploy passes where the op declares `name`."""
        if name in own:
            return own[name]
        for prefix in ("base_model_", "target_model_"):
            if name.startswith(prefix):
                return b[name[len(prefix):]]
        if name in ("accept_tokens", "accept_num"):  # the base model's
            return b[name]
        return s[swapped.get(name, name)]

    sig = FORMS[form]["draft_model_preprocess"]
    return (form, {n: buffer(n) for n in sig.input_names}, dict(zip(sig.attr_names, attrs)))


def count_preprocess_writes(form: str, inputs: dict, attrs: dict, tally: OutsideWrites,
                            where: str) -> None:
    """What FastDeploy's draft_model_preprocess would write outside a row on
    the tensors it is about to get (``preprocess_call``; before our op runs).
    The shadow form's places its first token at E - 1, and runs every request
    but a skipped one, on a prefill node too."""
    def rows(name):
        t = inputs[name]
        return read(t).reshape(t.shape[0], -1)

    shadow = form == "shadow"
    prefix = "target_model_" if shadow else "base_model_"
    E_all, ids, pre = rows("seq_lens_encoder"), rows("input_ids"), rows("pre_ids")
    stop, acc_num = rows(prefix + "stop_flags"), rows("accept_num")
    base_step = rows(prefix + "step_idx")
    prefill_node = attrs["is_splitwise_prefill" if shadow else "splitwise_prefill"]
    L, P = ids.shape[1], pre.shape[1]
    truncate = shadow or attrs["truncate_first_token"]
    k = attrs["num_model_step"]
    if shadow:
        limit = rows("max_dec_len")
    else:
        dropped = rows("batch_drop")  # what FastDeploy passes there: its is_block_step
    for i in range(E_all.shape[0]):
        E = int(E_all[i, 0])
        if shadow:
            runs = not (stop[i, 0] or (
                not prefill_node and int(base_step[i, 0]) + k >= int(limit[i, 0])))
        else:
            # A block step's drop needs the base stopped too, which already stops it.
            runs = prefill_node or not (stop[i, 0] or dropped[i, 0])
        if not runs:
            continue
        if E > 0:
            col = E - 1 if truncate else E
            if not 0 <= col < L:
                tally.preprocess += 1
                tally.note(f"{where}: slot {i}: input_ids column {col} of {L}")
        elif shadow or not prefill_node:
            acc, step = int(acc_num[i, 0]), int(base_step[i, 0])
            cols = step - acc + np.arange(acc)
            bad = int(((cols < 0) | (cols >= P)).sum())
            if bad:
                tally.preprocess += bad
                tally.note(f"{where}: slot {i}: pre_ids columns {cols.tolist()} of {P}")


def recompute_counts(proposer):
    """The recompute form's recompute_token_num as FastDeploy allocates it:
    k - 1 in every slot."""
    import paddle

    n, k = proposer.config.max_num_seqs, proposer.config.num_model_steps
    return paddle.to_tensor(np.full(n, k - 1, np.int32), place=proposer.place)


def max_dec_lens(proposer, max_dec_len: int):
    """The shadow form's max_dec_len as FastDeploy's runner holds it: each
    slot's request's limit (here the run's, for every slot)."""
    import paddle

    return paddle.to_tensor(np.full(proposer.config.max_num_seqs, max_dec_len, np.int64),
                            place=proposer.place)


def prepare_inputs(proposer, tally: OutsideWrites, where: str, recompute=None,
                   max_dec_len=None, form=None, pending=None) -> bool:
    """draft_model_preprocess as FastDeploy's proposer calls it
    (``preprocess_call``), after counting what FastDeploy's kernel would
    write outside a row on this state; returns not_need_stop. With
    `recompute` (recompute_counts) the recompute form's op, with `max_dec_len`
    (max_dec_lens) the shadow form's; `form` names a 22-tensor form's rules.
    `pending` (the plugin's patch, noted by insert): each chunk's next token
    is written at its last draft input after the op, and forgotten."""
    form, inputs, attrs = preprocess_call(proposer, recompute, max_dec_len, form)
    count_preprocess_writes(form, inputs, attrs, tally, where)
    forms.load(form).draft_model_preprocess(*inputs.values(), *attrs.values())
    if pending:
        ids = read(proposer.state["input_ids"])
        write_next_tokens(ids, pending)
        write(proposer.state["input_ids"], ids)
        pending.clear()
    return bool(proposer.state["not_need_stop"].numpy()[0])


def mask_offsets(proposer, form: str, ids_remove_padding, cu_seqlens_q):
    """`form`'s update_attn_mask_offsets as FastDeploy's proposer calls it:
    each tensor its runner's buffer of that name, the ten-tensor op
    (mtp.py:871-882 at 9018ccf74) or the shadow form's eight, without the
    cursor and the rollback (7a6c28781:892-903)."""
    given = {"ids_remove_padding": ids_remove_padding, "cu_seqlens_q": cu_seqlens_q}
    names = FORMS[form]["update_attn_mask_offsets"].input_names
    return forms.load(form).update_attn_mask_offsets(
        *(given[n] if n in given else proposer.state[n] for n in names))


# FastDeploy's draft_model_update for each form's runner
# (sim_models._fastdeploy_update): the end-token rules of ba915e03e to
# 2178f2829 for their forms, for their corrected forms (the plugin replaces
# the preprocess and mask ops, not the draft update), and for the rollback and
# recompute forms (which run with 9018ccf74's runner); 7a6c28781's for the
# shadow form. The xpu form keeps the simulator's own update (the XPU kernel
# is not modelled here).
DRAFT_UPDATE_KERNEL = {**{f: "ends" for f in ("pr5245", "pr5738", "pr6403", "corrected_pr5245",
                                              "corrected_pr5738", "corrected_pr6403",
                                              "rollback", "recompute")},
                       "shadow": "shadow"}


def draft_update_kernel(form: str):
    """The draft_model_update rules FastDeploy's runner of `form` applies,
    or None where the simulator's own apply."""
    return DRAFT_UPDATE_KERNEL.get(form)
