"""Stand-ins of FastDeploy's compiled ``fastdeploy_ops`` for running its real
proposer on a CPU (``real_fastdeploy``).

FastDeploy's ``fastdeploy/model_executor/ops/gpu/__init__.py`` imports the
compiled module ``fastdeploy.model_executor.ops.gpu.fastdeploy_ops`` and copies
its members (``fastdeploy/import_ops.py``: ``<name>`` and ``static_op_<name>``
become one function that calls the first in dynamic mode and unwraps a
one-element list). ``build_module`` makes that module: every op any FastDeploy
module imports from ``ops.gpu`` exists (a call to one not modelled here is one
line naming it), and the ops the proposer and its runner call are numpy
models of FastDeploy's kernels, each following the kernel file named in its
docstring (paths under ``custom_ops/gpu_ops``; line numbers at the commit
named). Which version of a kernel a tree holds is read from the tree itself
(the kernel's source text), never from a commit name.

``draft_model_preprocess`` and ``update_attn_mask_offsets`` carry FastDeploy's
registered parameter names (``static_op_<name>``, read from the tree's
``PD_BUILD_STATIC_OP``), so that our plugin's detection reads them as it reads
FastDeploy's; their bodies are this project's models of FastDeploy's kernels
(``fastdeploy_mtp.reference_fastdeploy`` and ``fastdeploy_mtp.reference``).
"""

from __future__ import annotations

import inspect
import pathlib
import re
import types
from typing import Dict, List

import numpy as np

MODULE = "fastdeploy.model_executor.ops.gpu.fastdeploy_ops"
DRAFT = "custom_ops/gpu_ops/speculate_decoding/draft_model"


class NotModelled(RuntimeError):
    """FastDeploy called a compiled op the harness has no model of."""


def _np(t) -> np.ndarray:
    return t.numpy()


def _put(t, arr) -> None:
    from ..buffers import write

    write(t, np.asarray(arr, dtype=_np(t).dtype).reshape(t.shape))


def _tensor(arr, dtype=None):
    import paddle

    return paddle.to_tensor(np.asarray(arr, dtype=dtype), place=paddle.CPUPlace())


# -- which ops FastDeploy imports, and their registrations --------------------

def imported_op_names(src: pathlib.Path) -> set:
    """Every name a module of the tree imports from ops.gpu."""
    names = set()
    pat = re.compile(r"from fastdeploy\.model_executor\.ops\.gpu import\s*(\([^)]*\)|[^\n]*)")
    for path in (src / "fastdeploy").rglob("*.py"):
        for m in pat.finditer(path.read_text(errors="ignore")):
            body = m.group(1).strip("()")
            for item in body.split(","):
                item = item.split("#")[0].strip()
                if item:
                    names.add(item.split(" as ")[0].strip())
    return {n for n in names if n.isidentifier()}


def registration(src: pathlib.Path, rel: str, op: str, outputs: bool = False):
    """(inputs, attribute names[, outputs]) of ``PD_BUILD_STATIC_OP(op)`` in
    file `rel`."""
    text = (src / rel).read_text()
    at = text.index(f"PD_BUILD_STATIC_OP({op})")
    block = text[at:text.index(";", at)]
    inputs = re.findall(r'"(\w+)"', re.search(r"\.Inputs\(\{(.*?)\}\)", block, re.S).group(1))
    attrs_m = re.search(r"\.Attrs\(\{(.*?)\}\)", block, re.S)
    attrs = [a.split(":")[0].strip() for a in re.findall(r'"([^"]+)"', attrs_m.group(1))] \
        if attrs_m else []
    if outputs:
        outs_m = re.search(r"\.Outputs\(\{(.*?)\}\)", block, re.S)
        return inputs, attrs, re.findall(r'"(\w+)"', outs_m.group(1)) if outs_m else []
    return inputs, attrs


def _named(name: str, params: List[str], fn):
    """Paddle's generated function of a registered op: its parameters are the
    registered inputs then attributes (what ``inspect.signature`` reads)."""
    def static_op(*args):
        return fn(*args)

    static_op.__name__ = f"static_op_{name}"
    static_op.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params])
    return static_op


# -- the kernels the draft's step calls ---------------------------------------
# Each returns what FastDeploy's ops module hands its caller: an op without a
# static_op_ twin is the C++ function itself (a list of outputs).

def _pack(ids, drafts, n, enc):
    """Each request's tokens packed in order (from draft_tokens for a decode
    where `drafts` is given, else from input_ids), the row of each packed
    token and cu_seqlens (the running sums of n)."""
    out, rows = [], []
    cu = np.zeros(n.shape[0] + 1, np.int32)
    for b in range(n.shape[0]):
        m = int(n[b])
        src = drafts[b] if drafts is not None and enc[b] <= 0 else ids[b]
        out.extend(src[:m].tolist())
        rows.extend([b] * m)
        cu[b + 1] = cu[b] + m
    return [_tensor(np.array(out, np.int64).reshape(-1)), _tensor(np.array(rows, np.int32)),
            _tensor(cu), _tensor(cu.copy())]


def speculate_get_padding_offset(*args):
    """speculate_decoding/speculate_get_padding_offset.cu (9018ccf74 lines
    21-65; ba915e03e passes token_num as a tensor before seq_len, lines
    432-440 of its registration): each request's tokens packed in order, from
    input_ids where seq_lens_encoder > 0, else from draft_tokens; cu_seqlens_q
    and cu_seqlens_k the running sums of seq_len; batch_id_per_token the row
    of each packed token."""
    if len(args) == 6 and hasattr(args[5], "numpy"):
        input_ids, draft_tokens, _, _, seq_len, seq_lens_encoder = args  # ba915e03e
    else:
        input_ids, draft_tokens, _, seq_len, seq_lens_encoder = args[:5]
    enc = _np(seq_lens_encoder).reshape(-1)
    return _pack(_np(input_ids), _np(draft_tokens), _np(seq_len).reshape(-1), enc)


def get_padding_offset(input_ids, seq_len, draft_tokens=None, seq_lens_encoder=None,
                       token_num=None):
    """get_padding_offset.cu (2178f2829 lines 22-79): as
    speculate_get_padding_offset, a decode's tokens from draft_tokens only
    where draft_tokens is given (speculative decoding)."""
    n = _np(seq_len).reshape(-1)
    drafts = _np(draft_tokens) if draft_tokens is not None else None
    enc = _np(seq_lens_encoder).reshape(-1) if seq_lens_encoder is not None \
        else np.zeros_like(n)
    return _pack(_np(input_ids), drafts, n, enc)


def speculate_pre_process(cpu_token_num, input_ids, seq_len, draft_tokens, seq_lens_encoder,
                          seq_lens_decoder):
    """speculate_decoding/speculate_preprocess.cu (7a6c28781 lines 26-231):
    the packing of get_padding_offset (a decode's tokens from draft_tokens),
    then each request's output count (speculate_get_seq_lens_output's rule),
    cu_seqlens_q_output its running sums, batch_id_per_token_output the row
    of each output token (a buffer of bsz * draft width, the rest unset:
    zeros here) and real_output_token_num their total."""
    n = _np(seq_len).reshape(-1)
    enc = _np(seq_lens_encoder).reshape(-1)
    drafts = _np(draft_tokens)
    ids, rows, cu_q, cu_k = _pack(_np(input_ids), drafts, n, enc)
    out_n = np.where(n == 0, 0, np.where((n == 1) | (enc != 0), 1, n)).astype(np.int32)
    cu_out = np.zeros(n.shape[0] + 1, np.int32)
    cu_out[1:] = np.cumsum(out_n)
    rows_out = np.zeros(n.shape[0] * drafts.shape[1], np.int32)
    at = 0
    for b in range(n.shape[0]):
        rows_out[at:at + out_n[b]] = b
        at += int(out_n[b])
    return [ids, rows, cu_q, cu_k, _tensor(cu_out), _tensor(rows_out),
            _tensor(np.array([at], np.int32))]


def speculate_get_seq_lens_output(seq_lens_this_time, seq_lens_encoder, seq_lens_decoder):
    """speculate_decoding/speculate_get_seq_lens_output.cu (9018ccf74 lines
    21-37): 0 for a request not fed, 1 for one token or a prefill, else every
    token fed (a decode verifies each)."""
    n, enc = _np(seq_lens_this_time).reshape(-1), _np(seq_lens_encoder).reshape(-1)
    out = np.where(n == 0, 0, np.where((n == 1) | (enc != 0), 1, n)).astype(np.int32)
    return [_tensor(out)]


def speculate_get_output_padding_offset(output_cum_offsets_tmp, out_token_num, seq_lens_output,
                                        max_seq_len):
    """speculate_decoding/speculate_get_output_padding_offset.cu (9018ccf74
    lines 20-37): each output token's padding offset (the cumulative padding
    before its request) and each request's."""
    tmp, out_n = _np(output_cum_offsets_tmp).reshape(-1), _np(seq_lens_output).reshape(-1)
    total = int(np.asarray(_np(out_token_num)).reshape(-1)[0])
    pad = np.zeros(total, np.int32)
    cum = np.zeros_like(tmp)
    for b in range(tmp.shape[0]):
        c = 0 if b == 0 else int(tmp[b - 1])
        for i in range(int(out_n[b])):
            pad[b * max_seq_len - c + i] = c
        cum[b] = c
    return [_tensor(pad), _tensor(cum)]


def rebuild_padding(tmp_out, cu_seqlens_q, seq_len_this_time, seq_lens_decoder, seq_lens_encoder,
                    *rest):
    """rebuild_padding.cu, the speculative path: one row per output token; a
    prefilling request's is its last token's, a decoding request's are its
    tokens in order; a request not fed (or with neither length) keeps zeros.
    Up to 9018ccf74 (lines 48-90 there) the output tokens are found through
    output_padding_offset and max_input_length; from 2178f2829 (lines 46-80
    there) through batch_id_per_token_output and cu_seqlens_q_output."""
    x = _np(tmp_out)
    cu = _np(cu_seqlens_q).reshape(-1)
    n, dec, enc = (_np(a).reshape(-1) for a in (seq_len_this_time, seq_lens_decoder,
                                               seq_lens_encoder))
    if len(rest) >= 2 and hasattr(rest[1], "numpy") and _np(rest[1]).shape[0] == n.shape[0] + 1:
        rows = _np(rest[0]).reshape(-1)  # batch_id_per_token_output
        cu_out = _np(rest[1]).reshape(-1)  # cu_seqlens_q_output
        out = np.zeros((rows.shape[0], x.shape[1]), x.dtype)
        for o in range(rows.shape[0]):
            b = int(rows[o])
            if n[b] == 0 or (dec[b] == 0 and enc[b] == 0):
                continue
            seq_id = int(enc[b]) - 1 if enc[b] > 0 else o - int(cu_out[b])
            out[o] = x[int(cu[b]) + seq_id]
        return _tensor(out)
    output_padding_offset, max_input_length = rest[0], rest[2]
    pad = _np(output_padding_offset).reshape(-1)
    out = np.zeros((pad.shape[0], x.shape[1]), x.dtype)
    for o in range(pad.shape[0]):
        ori = o + int(pad[o])
        b = ori // max_input_length
        if n[b] == 0 or (dec[b] == 0 and enc[b] == 0):
            continue
        seq_id = int(enc[b]) - 1 if enc[b] > 0 else 0
        token = ori - (b * max_input_length - int(cu[b])) + seq_id
        out[o] = x[token]
    return _tensor(out)


def eagle_gather_hidden_states(input, cu_seqlens_q, seq_lens_this_time, seq_lens_decoder,
                               seq_lens_encoder, batch_id_per_token_output, cu_seqlens_q_output,
                               real_output_token_num):
    """speculate_decoding/draft_model/eagle_gather_hidden_states.cu (dad5a432a
    lines 28-160): for each request fed (seq_lens_this_time > 0), in order,
    the row of its last token; [bsz, dim] zeros otherwise; and their count."""
    x = _np(input)
    n = _np(seq_lens_this_time).reshape(-1)
    out = np.zeros((n.shape[0], x.shape[1]), x.dtype)
    at, k = 0, 0
    for b in range(n.shape[0]):
        if n[b] > 0:
            at += int(n[b])
            out[k] = x[at - 1]
            k += 1
    return [_tensor(out), _tensor(np.array([k], np.int32))]


def make_eagle_get_hidden_states(src: pathlib.Path):
    """eagle_get_hidden_states as the tree registers it: one output up to
    7a6c28781, two at dad5a432a (the second unused by the proposer,
    mtp_cuda.py line 81 there)."""
    _, _, outputs = registration(src, f"{DRAFT}/eagle_get_hidden_states.cu",
                                 "eagle_get_hidden_states", outputs=True)

    def eagle(*args):
        out = eagle_get_hidden_states(*args)
        if len(outputs) > 1:
            return [out] + [_tensor(np.zeros(1, np.int32)) for _ in outputs[1:]]
        return out

    eagle.__doc__ = eagle_get_hidden_states.__doc__
    return eagle


def eagle_get_hidden_states(*args):
    """speculate_decoding/draft_model/eagle_get_hidden_states.cu gathers the
    base model's hidden states for the draft; the draft model of the harness
    takes none (its input is the token and the position), so this returns its
    input unchanged, the shape of the buffer the proposer copies it into."""
    return args[0]


def eagle_get_self_hidden_states(hidden_states, *args):
    """speculate_decoding/draft_model/eagle_get_self_hidden_states.cu: as
    eagle_get_hidden_states, nothing the harness's draft model reads (one
    zero row of the harness's buffer type, which ``copy_`` takes whole)."""
    import paddle

    return paddle.zeros([1, 1], dtype="float32")


def set_stop(not_need_stop, flag):
    """set_stop.cu (2178f2829 lines 27-30): not_need_stop[0] = flag."""
    a = _np(not_need_stop)
    a.reshape(-1)[0] = bool(flag)
    _put(not_need_stop, a)


def custom_numpy_to_tensor(numpy_array, tensor):
    """cpp_extensions.cc (dad5a432a lines 53-65): the array's bytes copied
    into the tensor, which is returned."""
    arr = np.ascontiguousarray(numpy_array)
    dtype = _np(tensor).dtype
    _put(tensor, np.frombuffer(arr.tobytes(), dtype=dtype)[:int(np.prod(tensor.shape))])
    return tensor


def mtp_save_first_token(*args):
    """speculate_decoding/draft_model/mtp_save_first_token.cc sends the first
    token to the engine's output queue; no buffer of the proposer changes."""
    return None


def _is_end(tok, end_ids) -> bool:
    return int(tok) in set(int(e) for e in end_ids.reshape(-1))


def _put_pre(pre: np.ndarray, b: int, at: int, tok) -> None:
    """``pre_ids_now[at] = tok`` with ``pre_ids_now`` row b's pointer, as the
    kernel writes it: a column outside the row lands in the row before (or,
    before the tensor, nowhere the harness can hold)."""
    flat = b * pre.shape[1] + int(at)
    if 0 <= flat < pre.size:
        pre.reshape(-1)[flat] = tok


def make_draft_model_update(src: pathlib.Path):
    """draft_model_update as the tree's kernel
    (speculate_decoding/draft_model/draft_model_update.cu) writes, one of three
    versions told apart by its source text:

    - "ends" (9018ccf74, ba915e03e; lines 44-106 at 9018ccf74): the sampled
      token is found at ``tid * max_seq_len - output_cum_offsets[tid]`` (from
      2178f2829 at ``cu_seqlens_q_output[tid]``, lines 49-50 there); a
      running decode adds its tokens to seq_lens_decoder and step_idx, writes
      its last sampled token to draft_tokens[0], to the base model's
      draft_tokens[substep + 1] and to pre_ids[step_idx] (lines 59-66); a
      prefill moves seq_lens_encoder into seq_lens_decoder (lines 69-79); then
      an end token, or PREFILL_NODE_ONE_STEP_STOP=1, stops the draft, the
      token staying in both draft rows (lines 83-86), and step_idx reaching
      max_dec_len stops it with the end token written (lines 87-92); a
      stopped request writes -1 to both (lines 94-97).
    - "shadow" (7a6c28781, lines 56-85): no end check; a prefill writes the
      base model's column only while step_idx < max_dec_len (lines 66-68); a
      decode at step_idx >= max_dec_len - 1 writes -1 there and nothing else
      (lines 70-72).
    - "compact" (dad5a432a): the shadow rules, only requests fed this substep
      run, and each request's sampled token is the k-th of the packed output,
      k counting the fed requests before it.
    Then seq_lens_this_time is 1 for a running request, else 0 with
    seq_lens_encoder 0; not_need_stop says whether any request is running."""
    text = (src / DRAFT / "draft_model_update.cu").read_text()
    if "next_tokens_start_id += seq_lens_this_time[i] > 0" in text:
        version = "compact"
    elif "If up to max_dec_len -1" in text:
        version = "shadow"
    else:
        version = "ends"
    by_cu = "cu_seqlens_q_output[tid]" in text
    import os

    def draft_model_update(inter_next_tokens, draft_tokens, pre_ids, seq_lens_this_time,
                           seq_lens_encoder, seq_lens_decoder, step_idx, offsets_or_cu,
                           stop_flags, not_need_stop, max_dec_len, end_ids,
                           base_model_draft_tokens, max_seq_len, substep):
        nxt = _np(inter_next_tokens).reshape(-1)
        dt, pre, n_all = _np(draft_tokens), _np(pre_ids), _np(seq_lens_this_time).reshape(-1)
        enc, dec = _np(seq_lens_encoder).reshape(-1), _np(seq_lens_decoder).reshape(-1)
        step, stop = _np(step_idx).reshape(-1), _np(stop_flags).reshape(-1)
        offs, mdl = _np(offsets_or_cu).reshape(-1), _np(max_dec_len).reshape(-1)
        ends, base = _np(end_ids), _np(base_model_draft_tokens)
        one_step = os.environ.get("PREFILL_NODE_ONE_STEP_STOP", "")[:1] == "1"
        stopped = 0
        fed_before = 0
        col = int(substep) + 1
        sampled = {}  # slot -> the token the update took (replay_twin's)
        for b in range(n_all.shape[0]):
            n = int(n_all[b])
            if version == "compact":
                if n <= 0:
                    continue
                start = fed_before
                fed_before += 1
            else:
                start = int(offs[b]) if by_cu else b * int(max_seq_len) - int(offs[b])
            if not stop[b]:
                if version == "ends":
                    if dec[b] > 0 and enc[b] <= 0:
                        dec[b] += n
                        tok = nxt[start + n - 1]
                        dt[b, 0] = tok
                        base[b, col] = tok
                        step[b] += n
                        _put_pre(pre, b, step[b], tok)
                    else:
                        tok = nxt[start]
                        dec[b] = enc[b] + dec[b]
                        enc[b] = 0
                        pre[b, 1] = tok
                        step[b] += 1
                        dt[b, 0] = tok
                        base[b, col] = tok
                    sampled[b] = int(tok)
                    if _is_end(tok, ends) or one_step:
                        stop[b] = True
                        stopped += 1
                    elif step[b] >= mdl[b]:
                        stop[b] = True
                        dt[b, n - 1] = ends.reshape(-1)[0]
                        base[b, col] = ends.reshape(-1)[0]
                        stopped += 1
                else:
                    if enc[b] > 0:
                        tok = nxt[start]
                        sampled[b] = int(tok)
                        dec[b] = enc[b] + dec[b]
                        enc[b] = 0
                        pre[b, 1] = tok
                        step[b] += 1
                        dt[b, 0] = tok
                        if step[b] < mdl[b]:
                            base[b, col] = tok
                    elif dec[b] > 0:
                        if step[b] >= mdl[b] - 1:
                            base[b, col] = -1
                        else:
                            dec[b] += n
                            tok = nxt[start + (0 if version == "compact" else n - 1)]
                            sampled[b] = int(tok)
                            dt[b, 0] = tok
                            base[b, col] = tok
                            step[b] += n
                            _put_pre(pre, b, step[b], tok)
            else:
                dt[b, 0] = -1
                base[b, col] = -1
                stopped += 1
            if not stop[b]:
                n_all[b] = 1
            else:
                n_all[b] = 0
                enc[b] = 0
        rows = n_all.shape[0]  # a row not fed counts as running (the kernel's block sum)
        for t, a in ((draft_tokens, dt), (pre_ids, pre), (seq_lens_this_time, n_all),
                     (seq_lens_encoder, enc), (seq_lens_decoder, dec), (step_idx, step),
                     (stop_flags, stop), (base_model_draft_tokens, base)):
            _put(t, a)
        _put(not_need_stop, np.array([stopped < rows]))
        if draft_model_update.listener is not None:
            draft_model_update.listener(sampled)
        return None

    draft_model_update.version = version
    # replay_twin.Twin.sample, while a node compares its step with the replay.
    draft_model_update.listener = None
    return draft_model_update


def draft_model_postprocess(base_model_draft_tokens, base_model_seq_lens_this_time,
                            base_model_seq_lens_encoder, base_model_stop_flags):
    """speculate_decoding/draft_model/draft_model_postprocess.cu (9018ccf74
    lines 22-41, the same rule at 7a6c28781): a running decode of the base
    model feeds, next step, every token of its draft_tokens row that is not
    -1; a stopped request none."""
    dt = _np(base_model_draft_tokens)
    n = _np(base_model_seq_lens_this_time).reshape(-1)
    enc = _np(base_model_seq_lens_encoder).reshape(-1)
    stop = _np(base_model_stop_flags).reshape(-1)
    for b in range(n.shape[0]):
        if not stop[b] and enc[b] == 0:
            n[b] = int((dt[b] != -1).sum())
        elif stop[b]:
            n[b] = 0
    _put(base_model_seq_lens_this_time, n)
    return None


def mtp_step_paddle(base_model_stop_flags, stop_flags, batch_drop, seq_lens_this_time,
                    seq_lens_encoder, seq_lens_decoder, block_tables, encoder_block_lens,
                    used_list_len, free_list, free_list_len, block_size, max_draft_tokens):
    """speculate_decoding/draft_model/mtp_step_paddle.cu (9018ccf74: the
    kernel at lines 16-156, launched at 158-200; the same file from
    ba915e03e to 2178f2829), the v0 scheduler's draft blocks: a request the
    base model stopped, or one dropped, gives its decode blocks back (lines
    46-69); a running one whose next ``max_draft_tokens + 1`` positions need
    a block not in its table asks for one (lines 73-90); while more ask than
    are free, the request holding the most decode blocks is dropped
    (``stop_flags``, ``batch_drop``, its lengths 0, its blocks freed; lines
    98-138); each asker not dropped gets the free list's last block (lines
    140-155). The kernel orders the askers
    by atomics; here they go by row."""
    base_stop = _np(base_model_stop_flags).reshape(-1)
    stop, drop = _np(stop_flags).reshape(-1), _np(batch_drop).reshape(-1)
    n, dec = _np(seq_lens_this_time).reshape(-1), _np(seq_lens_decoder).reshape(-1)
    tables, enc_lens = _np(block_tables), _np(encoder_block_lens).reshape(-1)
    used, free, free_len = (_np(used_list_len).reshape(-1), _np(free_list).reshape(-1),
                            _np(free_list_len).reshape(-1))
    rows, per_seq = n.shape[0], tables.shape[1]
    for b in range(rows):
        if (base_stop[b] or drop[b]) and used[b] > 0:
            e, u = int(enc_lens[b]), int(used[b])
            free[free_len[0]:free_len[0] + u] = tables[b, e:e + u]
            tables[b, e:e + u] = -1
            free_len[0] += u
            enc_lens[b] = used[b] = 0
    need = []
    for b in range(rows):
        idx = (int(dec[b]) + max_draft_tokens + 1) // block_size
        if not base_stop[b] and not drop[b] and idx < per_seq and tables[b, idx] == -1:
            need.append(b)
    while len(need) > free_len[0]:
        held = np.where(base_stop[:rows], 0, used[:rows])
        victim = int(np.argmax(held))
        if held[victim] == 0:
            raise RuntimeError("mtp_step_paddle: blocks asked for and none to take back "
                               "(the kernel would loop for ever)")
        e, u = int(enc_lens[victim]), int(held[victim])
        free[free_len[0]:free_len[0] + u] = tables[victim, e:e + u]
        tables[victim, e:e + u] = -1
        free_len[0] += u
        stop[victim] = drop[victim] = True
        n[victim] = dec[victim] = used[victim] = 0
    for b in need:
        if not drop[b]:
            used[b] += 1
            free_len[0] -= 1
            tables[b, (int(dec[b]) + max_draft_tokens + 1) // block_size] = free[free_len[0]]
    for t, a in ((stop_flags, stop), (batch_drop, drop), (seq_lens_this_time, n),
                 (seq_lens_decoder, dec), (block_tables, tables),
                 (encoder_block_lens, enc_lens), (used_list_len, used), (free_list, free),
                 (free_list_len, free_len)):
        _put(t, a)
    return None


# -- FastDeploy's two ops our plugin replaces ---------------------------------

def _state(names, tensors):
    return {n: _np(t) for n, t in zip(names, tensors)}


def _write_back(names, tensors, state):
    for n, t in zip(names, tensors):
        _put(t, state[n])


def make_preprocess(inputs: List[str], attrs: List[str]):
    """FastDeploy's draft_model_preprocess at the tree, modelled: 20
    registered tensors -> reference_fastdeploy.draft_model_preprocess_pr5245
    (ba915e03e), 22 -> ..._pr5738 (9018ccf74 to 2178f2829), 17 ->
    reference.draft_model_preprocess_shadow (7a6c28781). Returns None where
    the tree's registration is none of those (the caller says so)."""
    from .. import reference, reference_fastdeploy
    from ..signature import FORMS

    table = {tuple(FORMS[f]["draft_model_preprocess"].input_names): f
             for f in ("pr5245", "pr5738", "shadow")}
    form = table.get(tuple(inputs))
    if form is None:
        return None, None

    def run(*args):
        tensors, values = args[:len(inputs)], args[len(inputs):]
        state = _state(inputs, tensors)
        kw = dict(zip(attrs, values))
        if form == "shadow":
            reference.draft_model_preprocess_shadow(state, **kw)
        else:
            kw["kvcache_scheduler_v1"] = bool(kw["kvcache_scheduler_v1"])
            getattr(reference_fastdeploy, f"draft_model_preprocess_{form}")(state, **kw)
        _write_back(inputs, tensors, state)
        return None

    return run, form


def make_mask(src: pathlib.Path, inputs: List[str], drift: bool = False):
    """FastDeploy's update_attn_mask_offsets at the tree, modelled
    (fastdeploy_mtp.reference): the ten-tensor op with 9018ccf74's
    decode_states rule (update_attn_mask_offsets.cu lines 68-77 there: a
    decode of more than one token rewrites its row) or 2178f2829's (lines
    68-75: every decode does), told apart by the source text; the
    eight-tensor op of 7a6c28781. `drift` plants an error for the judge to
    catch: each decode token's mask end one past what the model gives."""
    from .. import reference

    text = (src / "custom_ops/gpu_ops/update_attn_mask_offsets.cu").read_text()
    if len(inputs) == 8:
        fn, form = reference.update_attn_mask_offsets_shadow, "shadow"
    elif "decode_states_now[i] != 1" in text:
        fn, form = reference.update_attn_mask_offsets_pr6403, "pr6403"
    else:
        fn, form = reference.update_attn_mask_offsets, "pr5738"

    def run(*tensors):
        state = _state(inputs, tensors)
        out = np.asarray(fn(state), np.int32)
        if drift:
            enc = state["seq_lens_encoder"].reshape(-1)
            n = state["seq_lens_this_time"].reshape(-1)
            cu = state["cu_seqlens_q"].reshape(-1)
            for b in range(n.shape[0]):
                if n[b] > 0 and enc[b] == 0:
                    out[2 * (int(cu[b]) + int(n[b]) - 1) + 1] += 1
        _write_back(inputs, tensors, state)
        return [_tensor(np.asarray(out, np.int32))]

    return run, form


def build_module(src: pathlib.Path, drift: bool = False):
    """The stand-in module and what it modelled: {op: version or form}."""
    mod = types.ModuleType(MODULE)
    for name in imported_op_names(src):
        def missing(*a, _n=name, **k):
            raise NotModelled(f"FastDeploy called its compiled op {_n}, which the harness "
                              f"does not model")
        missing.__name__ = name
        setattr(mod, name, missing)
    models: Dict[str, str] = {}
    for fn in (speculate_get_padding_offset, get_padding_offset, speculate_get_seq_lens_output,
               speculate_get_output_padding_offset, rebuild_padding, eagle_get_hidden_states,
               eagle_get_self_hidden_states, mtp_save_first_token, draft_model_postprocess,
               set_stop, custom_numpy_to_tensor, speculate_pre_process,
               eagle_gather_hidden_states, mtp_step_paddle):
        setattr(mod, fn.__name__, fn)
    mod.eagle_get_hidden_states = make_eagle_get_hidden_states(src)
    update = make_draft_model_update(src)
    mod.draft_model_update = update
    models["draft_model_update"] = update.version
    for op, rel, maker in (
            ("draft_model_preprocess", f"{DRAFT}/draft_model_preprocess.cu", None),
            ("update_attn_mask_offsets", "custom_ops/gpu_ops/update_attn_mask_offsets.cu", None)):
        inputs, attrs = registration(src, rel, op)
        if op == "draft_model_preprocess":
            body, form = make_preprocess(inputs, attrs)
        else:
            body, form = make_mask(src, inputs, drift)
        if body is None:
            models[op] = f"none ({len(inputs)} registered tensors)"
            continue
        models[op] = form
        setattr(mod, op, body)  # the C++ extension's function
        setattr(mod, f"static_op_{op}", _named(op, inputs + attrs, body))
    return mod, models
