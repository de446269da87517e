"""FastDeploy's own MTP proposer and its model runner's inserts, run on a
CPU from a FastDeploy source tree (``FASTDEPLOY_SRC``), judged by the tiny
draft model and its cache-free oracle.

What runs is FastDeploy's code, unmodified: ``MTPProposer``'s
``insert_tasks_v1``, ``_init_model_inputs``, ``_prepare_inputs``,
``_propose_cuda``, ``_post_process``, ``_update_status`` and ``run``
(``fastdeploy/spec_decode/mtp.py``), and ``GPUModelRunner.insert_tasks_v1``
and ``_init_share_inputs`` (``fastdeploy/worker/gpu_model_runner.py``); with
``kv_scheduler="v0"`` the v0 scheduler's path instead of the inserts
(``GPUModelRunner.insert_prefill_inputs`` and ``_update_chunked_prefill``,
``MTPProposer.insert_prefill_inputs`` and ``update_task_chunk_prefill``), with
``draft_model_preprocess`` and ``update_attn_mask_offsets`` from our plugin,
loaded through FastDeploy's own plugin loader (``FD_PLUGINS=fastdeploy_mtp``,
on importing ``fastdeploy.model_executor.models``), or with ``kernels=
"fastdeploy"`` FastDeploy's own two kernels (this project's models of them).

What stands in for what is not bookkeeping:

- the compiled ops: ``real_fastdeploy_ops`` (numpy models of the kernels,
  each citing its file);
- the objects' constructors (model loading, the attention backend, the
  sampler, CUDA graphs, the KV cache): the proposer and the runner are made
  without ``__init__``, with the attributes those would set; the draft model
  (``self.model``) is the tiny attention model reading FastDeploy's
  ``forward_meta`` and the ``attn_mask_offsets`` FastDeploy computed; the
  sampler is greedy over its logits; the platform says CUDA;
- the base model: ``Base`` below, writing the buffers FastDeploy's verify and
  update kernels write.

Two shims keep FastDeploy's code running on CPU Paddle and NumPy 2, both
around the types, never in FastDeploy's text: Paddle 3.3.1 on the CPU
refuses the empty-slice assignment ``insert_tasks_v1`` makes for a one-token
prefill (``mtp.py`` lines 536 and 539 at 9018ccf74), which the shim makes
the no-op it is on the GPU; and NumPy 2 keeps a host integer's numpy type
where FastDeploy's code needs a Python int.

Usage: ``python -m fastdeploy_mtp.harness.real_fastdeploy --src TREE`` (or
``FASTDEPLOY_SRC=TREE``), a tree from ``git archive COMMIT`` of FastDeploy.
Its Python dependencies go in a directory of their own, never into the
system's site-packages (Paddle and NumPy stay the system's):
``pip install --target /tmp/fd_deps --no-deps`` the ``DEPS_PACKAGES`` below
(``FASTDEPLOY_DEPS`` names another directory). The plugin runs in whatever
mode ``FASTDEPLOY_MTP_MODE`` says; the result reports it.

Judged (``Result``): every draft query's logits against the cache-free
recomputation (``draft_check.DraftRunner``), and three invariants that need
no oracle, counted per token: ``mask`` (a decode token's mask end,
``attn_mask_offsets[2t+1]``, is its KV position + 1), ``tokens`` (the token
fed at draft KV position p is the base model's token at p + 1, where the
base model has produced it) and ``unwritten`` (no query attends a KV
position the draft has not written for its request).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import os
import pathlib
import subprocess
import sys
import types
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

DEPS_ENV = "FASTDEPLOY_DEPS"  # a directory of FastDeploy's Python dependencies
DEFAULT_DEPS = "/tmp/fd_deps"
EOS = 2
VOCAB = 1000
# FastDeploy's pure-Python dependencies its proposer's imports need, beyond
# Paddle and NumPy (module names, as imported).
NEEDED_MODULES = ("paddleformers", "transformers", "tokenizers", "huggingface_hub",
                  "aistudio_sdk", "opentelemetry.sdk", "opentelemetry.semconv",
                  "opentelemetry.exporter", "opentelemetry.instrumentation", "zmq", "fastapi",
                  "starlette", "uvicorn", "openai", "redis", "prometheus_client", "psutil",
                  "pynvml", "msgspec", "ruamel", "tqdm", "ml_dtypes", "aiohttp", "colorlog",
                  "sentencepiece", "decord", "moviepy", "imageio", "partial_json_parser",
                  "setproctitle", "einops", "crcmod", "msgpack", "tabulate")
# What `pip install --target DIR --no-deps` needed on Python 3.11 with Paddle
# 3.3.1 and NumPy 2.4 for the five commits run (pins where the newest breaks:
# transformers 5 and huggingface_hub 1 want httpx2, tokenizers must be < 0.23
# for transformers 4.57, and the opentelemetry packages must share a release;
# the opentelemetry namespace packages go in one tree, so install them into
# a scratch directory and copy it over).
DEPS_PACKAGES = (
    "aistudio_sdk paddleformers ruamel.yaml pyzmq aiozmq openai tqdm uvicorn fastapi starlette "
    "annotated_doc redis tabulate prometheus-client crcmod msgpack partial_json_parser msgspec "
    "einops setproctitle psutil colorlog 'transformers<5' 'huggingface_hub<1.0' "
    "'tokenizers>=0.22,<0.23' filelock ml_dtypes aiohttp multidict yarl propcache "
    "aiohappyeyeballs aiosignal frozenlist pynvml nvidia-ml-py importlib_metadata lazy_importer "
    "asgiref fastsafetensors sentencepiece decord moviepy proglog imageio imageio_ffmpeg "
    "omegaconf opentelemetry-api==1.38.0 opentelemetry-sdk==1.38.0 "
    "opentelemetry-semantic-conventions==0.59b0 opentelemetry-exporter-otlp-proto-http==1.38.0 "
    "opentelemetry-exporter-otlp-proto-common==1.38.0 opentelemetry-proto==1.38.0 "
    "opentelemetry-instrumentation==0.59b0 opentelemetry-instrumentation-fastapi==0.59b0 "
    "opentelemetry-instrumentation-asgi==0.59b0 opentelemetry-instrumentation-logging==0.59b0 "
    "opentelemetry-util-http==0.59b0")


class HarnessError(RuntimeError):
    """A one-line reason the harness cannot run."""


@dataclass
class Result:
    commit: str
    role: str
    k: int
    mode: str
    kernels: str
    forms: Dict[str, str]
    tokens: int = 0
    disagreements: int = 0
    violations: Dict[str, int] = field(default_factory=lambda: {"mask": 0, "tokens": 0,
                                                                 "unwritten": 0})
    first: Dict[str, str] = field(default_factory=dict)
    trace: List[bytes] = field(default_factory=list)
    steps: int = 0
    requests: int = 0
    # With against_replay: the replay's step beside FastDeploy's on the same
    # buffers (replay_twin): steps, substeps, mismatches, the first.
    replay: Dict[str, object] = field(default_factory=dict)
    kv_scheduler: str = "v1"

    @property
    def total_violations(self) -> int:
        return sum(self.violations.values())

    def digest(self) -> str:
        h = hashlib.sha256()
        for b in self.trace:
            h.update(b)
        return h.hexdigest()[:16]

    def line(self) -> str:
        v = self.violations
        sched = "" if self.kv_scheduler == "v1" else f" kv-scheduler={self.kv_scheduler}"
        return (f"{self.commit} {self.role}{sched} k={self.k} mode={self.mode} "
                f"kernels={self.kernels}: "
                f"{self.tokens} draft tokens checked, {self.disagreements} disagreements, "
                f"{self.total_violations} violations (mask {v['mask']}, tokens {v['tokens']}, "
                f"unwritten {v['unwritten']}); {self.requests} requests, {self.steps} steps; "
                f"trace {self.digest()}")


# -- finding and importing FastDeploy -----------------------------------------

def check_tree(src) -> pathlib.Path:
    if not src:
        raise HarnessError("FASTDEPLOY_SRC is not set: name a FastDeploy source tree")
    p = pathlib.Path(src)
    if not (p / "fastdeploy" / "spec_decode" / "mtp.py").is_file() or \
            not (p / "custom_ops" / "gpu_ops").is_dir():
        raise HarnessError(f"{src} is not a FastDeploy source tree (no fastdeploy/spec_decode/"
                           f"mtp.py and custom_ops/gpu_ops)")
    return p


def tree_commit(src: pathlib.Path) -> str:
    """The tree's commit: git's, else the archive's name, else the hash of mtp.py."""
    try:
        out = subprocess.run(["git", "-C", str(src), "rev-parse", "--short=9", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except OSError:
        pass
    name = src.name
    if len(name) >= 7 and all(c in "0123456789abcdef" for c in name):
        return name
    return "mtp.py:" + hashlib.sha256((src / "fastdeploy/spec_decode/mtp.py").read_bytes()
                                      ).hexdigest()[:9]


def check_v0(tree: pathlib.Path, role: str, image_prob: float, prefix_cache: float,
             against_replay: bool) -> None:
    """The v0 scheduler's runs the harness makes: a mixed node, text prompts,
    no prefix cache, at a tree whose runner still calls the proposer's v0
    chunk path (up to 2178f2829; 97eee7567 retired the v0 scheduler)."""
    if role != "mixed" or image_prob > 0 or prefix_cache > 0 or against_replay:
        raise HarnessError("the v0 scheduler's runs are a mixed node's, on text prompts, "
                           "without prefix cache or the replay: --role mixed --image-prob 0 "
                           "--prefix-cache 0")
    runner = tree / "fastdeploy" / "worker" / "gpu_model_runner.py"
    if not runner.is_file() or "update_task_chunk_prefill(" not in runner.read_text():
        raise HarnessError(f"FastDeploy's runner at {tree} has no v0 scheduler's chunk path "
                           f"(its proposer's update_task_chunk_prefill is never called)")


def missing_deps(deps: Optional[str]) -> List[str]:
    import importlib.util

    extra = [deps] if deps and os.path.isdir(deps) else []
    saved = list(sys.path)
    sys.path[:0] = extra
    try:
        lacking = []
        for m in NEEDED_MODULES:
            try:
                if importlib.util.find_spec(m) is None:
                    lacking.append(m)
            except ImportError:
                lacking.append(m)
        return lacking
    finally:
        sys.path[:] = saved


@contextlib.contextmanager
def _env(**values):
    old = {k: os.environ.get(k) for k in values}
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _empty_slice_shim():
    """Paddle 3.3.1 on the CPU raises on assigning an empty slice; on the GPU
    FastDeploy's assignment writes nothing. Skip exactly those."""
    import paddle

    original = paddle.Tensor.__setitem__

    def setitem(self, index, value):
        try:
            return original(self, index, value)
        except (ValueError, RuntimeError) as e:
            try:
                empty = np.empty(self.shape, dtype=np.int8)[_np_index(index)].size == 0
            except Exception:
                empty = False
            if empty:
                return None
            raise e

    original_pin = paddle.Tensor.pin_memory
    paddle.Tensor.__setitem__ = setitem
    # CPU Paddle has no pinned memory; host memory is what a pinned tensor is.
    paddle.Tensor.pin_memory = lambda self, *a, **kw: self
    try:
        yield
    finally:
        paddle.Tensor.__setitem__ = original
        paddle.Tensor.pin_memory = original_pin


def _np_index(index):
    if isinstance(index, tuple):
        return tuple(_np_index(i) for i in index)
    if hasattr(index, "numpy"):
        return index.numpy()
    return index


def _bool_attribute_workaround(mtp, models) -> None:
    """ba915e03e's proposer passes ``envs.ENABLE_V1_KVCACHE_SCHEDULER``, an
    int, as draft_model_preprocess's bool attribute kvcache_scheduler_v1
    (mtp.py line 709 there); a plugin op that refuses the int gets it again
    as a bool, and the result says so (``forms["workaround"]``)."""
    op = mtp.draft_model_preprocess

    def preprocess(*args):
        try:
            return op(*args)
        except TypeError as e:
            if "must be bool" not in str(e) or not isinstance(args[-1], int):
                raise
            models["workaround"] = "kvcache_scheduler_v1 int passed again as bool"
            return op(*args[:-1], bool(args[-1]))

    mtp.draft_model_preprocess = preprocess


def import_fastdeploy(src: pathlib.Path, deps: Optional[str], kernels: str, drift: bool = False,
                      workaround: bool = True, v1: str = "1"):
    """Import FastDeploy's proposer and runner from `src` in this process,
    with the stand-in ops; load our plugin through FastDeploy's loader unless
    `kernels` is "fastdeploy". Returns (mtp module, runner module, models)."""
    from . import real_fastdeploy_ops as ops

    lacking = missing_deps(deps)
    if lacking:
        raise HarnessError(f"FastDeploy's Python dependencies missing: {', '.join(lacking)} "
                           f"(pip install --target {deps or DEFAULT_DEPS} --no-deps ...; "
                           f"see real_fastdeploy.NEEDED_MODULES)")
    for name in [m for m in sys.modules if m == "fastdeploy" or m.startswith("fastdeploy.")]:
        del sys.modules[name]
    here = str(pathlib.Path(__file__).resolve().parents[2])
    sys.path[:0] = [p for p in (str(src), deps, here) if p]
    mod, models = ops.build_module(src, drift)
    sys.modules[ops.MODULE] = mod
    # FD_PLUGINS names the plugins to load. Unset, ba915e03e loads every
    # plugin of the group (fastdeploy/plugins/utils.py lines 42-50 there) and
    # later commits none (lines 42-46 at 9018ccf74); an empty name loads none
    # at every commit.
    plugins = "fastdeploy_mtp" if kernels == "ours" else ""
    with _env(FD_PLUGINS=plugins, ENABLE_V1_KVCACHE_SCHEDULER=v1):
        importlib.import_module("fastdeploy.model_executor.models")
        mtp = importlib.import_module("fastdeploy.spec_decode.mtp")
        if (src / "fastdeploy" / "spec_decode" / "mtp_cuda.py").is_file():
            # dad5a432a: the CUDA proposer is MTPProposerCUDA, which imports
            # the ops (mtp.py lines 718-727 there).
            mtp = importlib.import_module("fastdeploy.spec_decode.mtp_cuda")
        runner = importlib.import_module("fastdeploy.worker.gpu_model_runner")
    # Whose draft_model_preprocess the proposer calls: the plugin's stand-in
    # (fastdeploy_mtp.plugin) or FastDeploy's op (the harness's model of it).
    models["preprocess_module"] = getattr(mtp.draft_model_preprocess, "__module__", "?")
    if kernels == "ours" and workaround:
        _bool_attribute_workaround(mtp, models)
    # Imported on the CPU platform (import-time probes of a GPU would fail);
    # from here on FastDeploy's code takes its CUDA paths.
    plat = importlib.import_module("fastdeploy.platforms").current_platform
    for attr, value in (("is_cuda", True), ("is_xpu", False), ("is_cpu", False),
                        ("is_maca", False), ("is_iluvatar", False), ("is_dcu", False),
                        ("is_gcu", False), ("is_intel_hpu", False)):
        setattr(plat, attr, (lambda v=value: v))
    return mtp, runner, models


# -- configuration the constructors would have set ----------------------------

class _Cfg(types.SimpleNamespace):
    """A config object of FastDeploy's, holding only what the code run reads;
    an attribute it lacks is one line naming it."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise HarnessError(f"FastDeploy read config attribute {name!r}, which the harness "
                           f"does not set")

    def __deepcopy__(self, memo):
        return self


def make_config(role: str, k: int, batch: int, max_model_len: int, mm: bool = True):
    model = _Cfg(max_model_len=max_model_len, enable_mm=mm, pad_token_id=0, vocab_size=VOCAB,
                 head_dim=16, hidden_size=64, rope_theta=10000.0, partial_rotary_factor=1.0,
                 model_type="ernie", max_stop_seqs_num=5, stop_seqs_max_len=8, top_p=0.7,
                 temperature=0.95, penalty_score=1.0, frequency_score=0.0, presence_score=0.0,
                 min_length=1, eos_tokens_lens=1, enable_logprob=False, num_hidden_layers=1,
                 enable_entropy=False, think_end_id=-1, line_break_id=-1, ori_vocab_size=VOCAB,
                 runner_type="generate", architectures=["ErnieMTP"],
                 think_truncate_prompt_ids=[-1], reasoning_allowed_token_ids=[-1],
                 mm_max_tokens_per_item=None)
    spec = _Cfg(method="mtp", num_speculative_tokens=k, num_model_steps=k, max_ngram_size=5,
                min_ngram_size=2, mtp_strategy="default", model_type="mtp", quantization="")
    cache = _Cfg(block_size=64, enc_dec_block_num=2, total_block_num=64, kv_cache_ratio=0.75,
                 enable_prefix_caching=False, enable_chunked_prefill=True)
    sched = _Cfg(splitwise_role=role, max_num_seqs=batch, max_num_batched_tokens=max_model_len * 2,
                 max_extra_num_batched_tokens=16, enable_overlap_schedule=False)
    parallel = _Cfg(enable_expert_parallel=False, tensor_parallel_rank=0, tensor_parallel_size=1,
                    use_ep=False, data_parallel_rank=0, data_parallel_size=1, tp_group=None,
                    ep_group=None)
    graph = _Cfg(draft_model_use_cudagraph=False, use_cudagraph=False,
                 cudagraph_capture_sizes=[], sot_warmup_sizes=[], cudagraph_only_prefill=False)
    fd = _Cfg(model_config=model, speculative_config=spec, cache_config=cache,
              scheduler_config=sched, parallel_config=parallel, graph_opt_config=graph,
              routing_replay_config=_Cfg(enable_routing_replay=False),
              early_stop_config=_Cfg(enable_early_stop=False), quant_config=None,
              load_config=_Cfg(), enable_mm_runtime=mm)
    # The chunk budget of a multimodal batch (config.py get_max_chunk_tokens);
    # the harness's prompts fit in one.
    fd.get_max_chunk_tokens = lambda *a, **kw: sched.max_num_batched_tokens
    return fd


class _HostCount:
    """The pinned one-element host buffer 7a6c28781's proposer copies the
    output count into and reads with ``int()`` (mtp.py lines 134, 915 and 964
    there). NumPy 2 refuses ``int()`` of a one-element 1-D array, which
    Paddle's ``Tensor.__int__`` makes of it; this buffer reads its element."""

    def __init__(self):
        self.value = 0

    def copy_(self, src, blocking=True):
        self.value = int(np.asarray(src.numpy()).reshape(-1)[0])
        return self

    def __int__(self):
        return self.value

    __index__ = __int__


class _NullBackend:
    def init_attention_metadata(self, forward_meta):
        return None


class _Sampler:
    """Greedy over the draft's logits (FastDeploy's MTPSampler draws from
    them; the harness's draft is judged on its argmax), each token the end
    token instead with probability `eos_prob` (as the simulator's
    --draft-eos-prob), so that the proposer's end-token rules run."""

    def __init__(self, rng=None, eos_prob: float = 0.0):
        self.rng, self.eos_prob = rng, eos_prob

    def __call__(self, logits, sampling_metadata, max_model_len, share_inputs, *a, **kw):
        import paddle

        toks = logits.numpy().argmax(axis=1).astype(np.int64)
        if self.eos_prob > 0:
            toks[self.rng.random(toks.shape[0]) < self.eos_prob] = EOS
        ids = paddle.to_tensor(toks.reshape(-1, 1), place=paddle.CPUPlace())
        return ids, types.SimpleNamespace(sampled_token_ids=ids, logprobs_tensors=None)

    def apply_logits_processor(self, *a, **kw):
        return None


@dataclass
class Request:
    """The fields of FastDeploy's Request its inserts read."""

    request_id: str
    idx: int
    task_type: object
    prompt_token_ids: List[int]
    output_token_ids: List[int]
    prefill_start_index: int
    prefill_end_index: int
    block_tables: List[int]
    multimodal_inputs: dict
    eos_token_ids: List[int] = field(default_factory=lambda: [EOS])
    guided_json: object = None
    guided_regex: object = None
    structural_tag: object = None
    guided_grammar: object = None
    sampling_params: object = None
    pooling_params: object = None
    max_tokens: int = 0
    # What a decode node gets from the prefill node: the first token and the
    # draft tokens (read by the runner's insert from 7a6c28781 on,
    # gpu_model_runner.py lines 871-877 there).
    draft_token_ids: Optional[List[int]] = None
    # The v0 scheduler's: the PD role (None on a mixed node), the chunk sizes
    # the engine splits the prompt into (common_engine.py 9018ccf74 lines
    # 552-603) and the runner's cursor over them.
    disaggregate_info: Optional[dict] = None
    prefill_chunk_info: Optional[List[int]] = None
    chunk_idx: int = 0

    def get(self, name, default=None):
        value = getattr(self, name, None)
        return default if value is None else value

    def set(self, name, value):
        setattr(self, name, value)


# -- the judge: the tiny draft model in FastDeploy's forward ------------------

class DraftModel:
    """The proposer's ``self.model``: the tiny decoder, fed what FastDeploy's
    proposer fed its model (``forward_meta``), judged per query token."""

    def __init__(self, judge: "Judge"):
        self.judge = judge

    def __call__(self, ids_remove_padding=None, previous_hidden_states=None, forward_meta=None,
                 **kw):
        return self.judge.forward(ids_remove_padding, forward_meta)

    def compute_logits(self, hidden_states, *a, **kw):
        return hidden_states


class Judge:
    def __init__(self, batch: int, max_model_len: int, result: Result, node: str):
        from .draft_check import DraftRunner, ModelTally

        self.runner = DraftRunner(batch, max_model_len, VOCAB, seed=0)
        self.tally = ModelTally()
        self.result = result
        self.node = node
        self.written = np.zeros((batch, max_model_len), bool)
        self.requests: Dict[int, dict] = {}
        self.where = ""
        self.twin = None  # replay_twin.Twin, with against_replay

    def admit(self, slot: int, req: dict) -> None:
        self.runner.admit(slot, np.asarray(req["offsets"], np.int64), req["prompt"])
        self.written[slot] = False
        self.requests[slot] = req

    def _violate(self, kind: str, n: int, msg: str) -> None:
        self.result.violations[kind] += n
        self.result.first.setdefault(kind, f"{self.node} {self.where}: {msg}")

    def forward(self, ids_t, meta):
        import paddle

        ids = ids_t.numpy().reshape(-1)
        n_all = meta.seq_lens_this_time.numpy().reshape(-1)
        enc = meta.seq_lens_encoder.numpy().reshape(-1)
        dec = meta.seq_lens_decoder.numpy().reshape(-1)
        cu = meta.cu_seqlens_q.numpy().reshape(-1)
        fed = [(b, int(cu[b]), int(n_all[b]), int(dec[b])) for b in range(n_all.shape[0])
               if n_all[b] > 0]
        if meta.attn_mask_offsets is not None:
            offsets = meta.attn_mask_offsets.numpy().reshape(-1)[:2 * ids.shape[0]]
        else:
            # A text model's proposer passes no mask offsets (mtp.py 9018ccf74
            # line 713): its attention is causal, each token attending [0, p].
            offsets = np.zeros(2 * ids.shape[0], np.int32)
            for b, q, n, start in fed:
                offsets[2 * q + 1:2 * (q + n):2] = start + np.arange(n) + 1
        # A decode substep of a request whose prompt is not all prefilled yet
        # (after a chunk that is not its last) runs on the draft's own samples
        # at positions the next chunk prefills again: FastDeploy's base model
        # verifies no draft of a prefill, so its outputs are dropped, and the
        # next chunk writes those positions' K/V again before anything attends
        # them. Nothing of it is judged (the simulator's judge does the same).
        ahead = {b for b, _, _, _ in fed
                 if enc[b] == 0 and b in self.requests
                 and self.requests[b].get("done", 0) < len(self.requests[b]["prompt"])}
        if self.twin is not None:
            self.twin.substep(ids, cu, offsets)
        self.result.trace.append(b"F" + ids.astype(np.int64).tobytes()
                                 + offsets.astype(np.int32).tobytes()
                                 + np.array(fed, np.int64).tobytes())
        for b, q, n, start in fed:
            pos = start + np.arange(n)
            self.written[b, pos] = True
            if b in ahead:
                continue
            req = self.requests.get(b)
            seq = req["prompt"] + req["generated"] if req else []
            for j in range(n):
                p = int(pos[j])
                if p + 1 < len(seq) and int(ids[q + j]) != int(seq[p + 1]):
                    self._violate("tokens", 1, f"slot {b}: draft position {p} fed token "
                                  f"{int(ids[q + j])}, the base model's token at {p + 1} is "
                                  f"{int(seq[p + 1])}")
                lo, hi = int(offsets[2 * (q + j)]), int(offsets[2 * (q + j) + 1])
                if enc[b] == 0 and hi != p + 1:
                    self._violate("mask", 1, f"slot {b}: decode token at KV position {p} has "
                                  f"mask end {hi}")
                hi_c = min(max(hi, 0), self.written.shape[1])
                if hi_c > max(lo, 0) and not self.written[b, max(lo, 0):hi_c].all():
                    miss = max(lo, 0) + int(np.nonzero(~self.written[b, max(lo, 0):hi_c])[0][0])
                    self._violate("unwritten", 1, f"slot {b}: query at KV position {p} attends "
                                  f"position {miss}, never written for its request")
        logits_holder = {}

        def capture(tokens, requests, offs, _orig=self.runner.model.forward_cached):
            out = _orig(tokens, requests, offs)
            logits_holder["x"] = out
            return out

        self.runner.model.forward_cached = capture
        try:
            before = self.tally.disagreements
            self.runner.substep(ids, fed, offsets, self.tally, f"{self.node} {self.where}",
                                unchecked=ahead)
        finally:
            del self.runner.model.forward_cached
        if self.tally.disagreements > before and "oracle" not in self.result.first:
            self.result.first["oracle"] = self.tally.first or ""
        return paddle.to_tensor(logits_holder["x"], place=paddle.CPUPlace())


# -- the base model ----------------------------------------------------------

class Base:
    """The base model's verify and update on the runner's buffers, as
    FastDeploy's kernels write them (9018ccf74):

    - a prefill (seq_lens_encoder > 0): speculate_verify samples one token at
      the last position: accept_num 1, step_idx + 1, stopped at an end token
      or max_dec_len (speculate_decoding/speculate_verify.cu lines 267-297);
    - a decode of n tokens (the last token and n - 1 drafts): the first a - 1
      drafts accepted and a token of its own, a drawn in 1..n here; step_idx
      + a; stopped at an end token or max_dec_len (lines 120-260);
    - speculate_update then adds the accepted tokens (or the prefill) to
      seq_lens_decoder, zeroes seq_lens_encoder and writes the last accepted
      token to draft_tokens[0] (speculate_update.cu lines 37-80);
    - on a prefill node, speculate_schedule_cache stops a request whose
      seq_lens_decoder reached its prompt (speculate_schedule_cache.cu lines
      51-59, PREFILL_NODE_ONE_STEP_STOP_V1, worker_process.py lines
      1005-1006).
    The tokens it samples are random; a chunk before a prompt's last is
    computed, its sample not output (speculate_save_output.cc line 106)."""

    def __init__(self, share, rng, max_dec_len, eos_prob, finish_prob):
        self.s, self.rng = share, rng
        self.max_dec_len, self.eos_prob, self.finish_prob = max_dec_len, eos_prob, finish_prob

    def _a(self, name):
        return self.s[name].numpy()

    def _sample(self):
        return EOS if self.rng.random() < self.eos_prob else int(self.rng.integers(3, VOCAB))

    def step(self, live: Dict[int, dict]) -> None:
        from ..buffers import write

        names = ("seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "step_idx",
                 "stop_flags", "accept_tokens", "accept_num", "draft_tokens", "max_dec_len")
        a = {n: self._a(n) for n in names}
        n_all = a["seq_lens_this_time"].reshape(-1)
        enc, dec = a["seq_lens_encoder"].reshape(-1), a["seq_lens_decoder"].reshape(-1)
        step, stop = a["step_idx"].reshape(-1), a["stop_flags"].reshape(-1)
        acc, num, drafts = a["accept_tokens"], a["accept_num"].reshape(-1), a["draft_tokens"]
        for b, req in live.items():
            if stop[b] or n_all[b] == 0:
                continue
            if enc[b] > 0:
                tok = self._sample()
                acc[b, :] = 0
                acc[b, 0] = tok
                num[b] = 1
                step[b] += 1
                dec[b] += enc[b]
                enc[b] = 0
                taken = [tok]
                if dec[b] < len(req["prompt"]):
                    taken = []  # a chunk before the last: not output
            else:
                n = int(n_all[b])
                take = int(self.rng.integers(1, n + 1))
                taken = [int(t) for t in drafts[b, 1:take]] + [self._sample()]
                for i, t in enumerate(taken):
                    if t == EOS:
                        taken = taken[:i + 1]
                        break
                acc[b, :] = 0
                acc[b, :len(taken)] = taken
                num[b] = len(taken)
                step[b] += len(taken)
                dec[b] += len(taken)
            if taken:
                drafts[b, 0] = taken[-1]
                req["generated"].extend(taken)
                if (EOS in taken or step[b] >= self.max_dec_len
                        or self.rng.random() < self.finish_prob):
                    stop[b] = True
        for n in names:
            write(self.s[n], a[n])

    def schedule_cache_prefill_node(self, live: Dict[int, dict]) -> List[int]:
        """The prefill node's stop after the prompt; returns the slots stopped."""
        from ..buffers import write

        names = ("seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "stop_flags",
                 "accept_num")
        a = {n: self._a(n) for n in names}
        done = []
        for b, req in live.items():
            if not a["stop_flags"].reshape(-1)[b] and \
                    a["seq_lens_decoder"].reshape(-1)[b] >= len(req["prompt"]):
                for n in ("seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder",
                          "accept_num"):
                    a[n].reshape(-1)[b] = 0
                a["stop_flags"].reshape(-1)[b] = True
                done.append(b)
        for n in names:
            write(self.s[n], a[n])
        return done


# -- one node: FastDeploy's runner and proposer, the base model, the judge -----

def _bare(cls):
    return object.__new__(cls)


class Node:
    def __init__(self, fd, role: str, k: int, batch: int, max_model_len: int, result: Result,
                 rng, args):
        self.fd, self.role, self.k, self.batch = fd, role, k, batch
        self.mtp, self.runner_mod = fd["mtp"], fd["runner"]
        # The v0 scheduler's runner serves a text model alone (a multimodal
        # chunk reaches its proposer as a dict: common_engine.py 9018ccf74
        # lines 664-679, mtp.py 664-665).
        self.v0 = args.kv_scheduler == "v0"
        mm = not self.v0
        cfg = make_config(role, k, batch, max_model_len, mm)
        self.judge = Judge(batch, max_model_len, result, role)
        self.result = result
        noop = (lambda *a, **kw: None)
        # Rotary tables and logits processors feed neither the bookkeeping nor
        # the harness's draft model.
        batch_mod = None
        if hasattr(self.runner_mod, "InputBatch"):
            batch_mod = importlib.import_module("fastdeploy.worker.input_batch")
        for module in (self.runner_mod, self.mtp, batch_mod):
            if module is None:
                continue
            if hasattr(module, "get_rope"):
                module.get_rope = noop
            if hasattr(module, "build_logits_processors"):
                module.build_logits_processors = (lambda *a, **kw: [])
        r = _bare(self.runner_mod.GPUModelRunner)
        for name in ("model_config", "cache_config", "scheduler_config", "speculative_config",
                     "parallel_config", "graph_opt_config"):
            setattr(r, name, getattr(cfg, name))
        r.fd_config = cfg
        r.enable_mm, r.speculative_method, r.speculative_decoding = mm, "mtp", True
        # The v0 runner's chunked requests between steps (its __init__).
        r.restore_chunked_prefill_request = {}
        r.is_pooling_model, r.enable_logprob, r.enable_entropy = False, False, False
        r.sampler = _Sampler()
        r.prompt_logprobs_reqs, r.in_progress_prompt_logprobs = {}, {}
        r.forward_batch_reqs_list = [None] * batch
        r.routing_replay_manager, r.encoder_cache = None, None
        r.deterministic_logger = None
        r.enable_cache_manager_v1 = False
        # dad5a432a's runner: its launch-size cache, reset by a decode node's
        # insert (gpu_model_runner.py __init__ there).
        r._cached_launch_token_num, r.exist_prefill_flag = -1, False
        try:
            r.spec_method = importlib.import_module("fastdeploy.spec_decode.types").SpecMethod.MTP
        except (ImportError, AttributeError):
            r.spec_method = "mtp"
        # The vision encoder's features and 3-D rotary positions.
        r._process_mm_features = noop
        r._apply_mm_inputs = noop
        r.prepare_rope3d = (lambda ids, max_tokens, offsets: [0.0] * (len(offsets) - 1))
        r.enable_pd_reorder = False
        if batch_mod is not None:
            # From 2178f2829 the runner's buffers are an InputBatch
            # (gpu_model_runner.py lines 201-202 there).
            r.share_inputs = self.runner_mod.InputBatch(cfg)
            r.share_inputs.init_share_inputs()
            r.seq_lens_this_time_buffer = r.share_inputs["seq_lens_this_time_buffer"]
        else:
            r._init_share_inputs(batch)
        r.share_inputs["caches"] = []  # the KV cache is the judge's model's
        if "rope_emb" in r.share_inputs and r.share_inputs["rope_emb"] is None:
            import paddle

            r.share_inputs["rope_emb"] = paddle.zeros([batch, 1], dtype="float32")
        import paddle

        for key in ("decoder_batch_ids", "decoder_tile_ids_per_batch", "decoder_num_blocks_cpu",
                    "decoder_num_blocks_device", "decoder_chunk_size_device",
                    "max_len_tensor_cpu", "encoder_batch_ids", "encoder_tile_ids_per_batch",
                    "encoder_num_blocks_x_cpu", "kv_batch_ids", "kv_tile_ids_per_batch",
                    "kv_num_blocks_x_cpu"):
            if key in r.share_inputs and r.share_inputs[key] is None:
                # The attention backend's buffers (its _initialize_attn_backend
                # allocates them); the judge's model reads none.
                r.share_inputs[key] = paddle.zeros([1], dtype="int32")
        # What _init_speculative_proposer does before making the proposer
        # (gpu_model_runner.py line 354 at 9018ccf74).
        r.share_inputs["seq_lens_this_time"] = r.seq_lens_this_time_buffer
        self.runner = r
        p = _bare(getattr(self.mtp, "MTPProposerCUDA", None) or self.mtp.MTPProposer)
        p.fd_config = cfg
        for name in ("parallel_config", "model_config", "speculative_config", "cache_config",
                     "graph_opt_config", "scheduler_config"):
            setattr(p, name, getattr(cfg, name))
        p.quant_config = None
        p.max_num_seqs, p.max_model_len = batch, max_model_len
        p.speculative_method, p.max_draft_token_num, p.num_model_steps = "mtp", k, k
        p.max_ngram_size, p.min_ngram_size, p.enable_mm = 5, 2, mm
        p.num_main_model_layers, p.local_rank, p.device_id = 1, 0, 0
        p.forward_meta = None
        p.target_model_inputs = r.share_inputs
        p.mtp_strategy, p.hybrid_mode, p.enable_logprob = "default", False, False
        p.role = role
        p.sampler = _Sampler(np.random.default_rng(args.seed + 1), args.draft_eos_prob)
        p.model = DraftModel(self.judge)
        p.attn_backends = [_NullBackend()]
        p.draft_model_use_cudagraph, p.cudagraph_capture_sizes, p.sot_warmup_sizes = False, [], []
        # What __init__ picks on CUDA: _propose_cuda from 9018ccf74 (ba915e03e
        # has _propose only), _prepare_inputs_cuda at 7a6c28781 (mtp.py lines
        # 121-123 there).
        if hasattr(type(p), "_propose_cuda"):
            p._propose = p._propose_cuda
        if hasattr(type(p), "_prepare_inputs_cuda"):
            p._prepare_inputs = p._prepare_inputs_cuda
        p.use_attn_mask_offset = mm  # dad5a432a: enable_mm (mtp.py line 76 there)
        # 7a6c28781's host copy of the output count and its CUDA event
        # (mtp.py lines 134-135 there).
        import paddle

        p._real_output_token_num_host = _HostCount()
        p.output_token_num_event = types.SimpleNamespace(record=lambda *a: None,
                                                         synchronize=lambda *a: None)
        p.enable_draft_logprob, p.cache_kvs_map = False, {}
        p.pd_disaggregation_mode = "per_query"
        if not hasattr(type(p), "_init_model_inputs"):
            # From 2178f2829 the proposer's buffers are a ProposerInputBatch
            # (mtp.py lines 123-124 there).
            p.model_inputs = batch_mod.ProposerInputBatch(cfg, p.target_model_inputs)
            p.model_inputs.init_share_inputs()
        else:
            p._init_model_inputs()
        p.model_inputs["caches"] = []
        # The draft's hidden states are the tiny model's logits (float32),
        # and the draft reads no base-model hidden state: one float32 row.
        p.model_inputs["target_hidden_states"] = paddle.zeros([1, 1], dtype="float32")
        r.proposer = p
        self.proposer = p
        self.base = Base(r.share_inputs, rng, args.max_dec_len, args.eos_prob, args.finish_prob)
        self.live: Dict[int, dict] = {}
        self.rng, self.args = rng, args
        self.count = 0

    # -- the scheduler's tasks --

    def free(self) -> List[int]:
        return [b for b in range(self.batch) if b not in self.live]

    def task(self, b: int, req: dict, start: int, end: int):
        from fastdeploy.engine.request import RequestType

        return Request(request_id=req["id"], idx=b, task_type=RequestType.PREFILL,
                       prompt_token_ids=list(req["prompt"]),
                       output_token_ids=list(req["generated"]) if self.role == "decode" else [],
                       prefill_start_index=start, prefill_end_index=end,
                       block_tables=list(range(b * 4, b * 4 + 4)),
                       multimodal_inputs={"attention_mask_offset": list(req["mask"]),
                                          "position_ids": list(range(len(req["prompt"])))},
                       max_tokens=self.args.max_dec_len,
                       draft_token_ids=([req["generated"][0], req["handover_draft"]]
                                        if self.role == "decode" else None))

    def admit(self, b: int, req: dict, start: int = 0) -> None:
        self.live[b] = req
        self.judge.admit(b, req)
        req["done"] = start
        self.count += 1
        self.result.requests += 1

    def step(self, where: str) -> List[tuple]:
        """One engine step: inserts, the base model, FastDeploy's proposer.
        Returns the requests a prefill node hands over."""
        from .sim_fastdeploy import chunk_end

        self.judge.where = where
        if not self.live:
            return []  # an idle engine runs no step
        if self.v0:
            return self._step_v0()
        tasks = []
        for b, req in sorted(self.live.items()):
            n = len(req["prompt"])
            if self.role == "decode":
                if not req.get("inserted"):
                    tasks.append(self.task(b, req, n, n + 1))
                    req["inserted"] = True
                continue
            if req["done"] < n and not req.get("chunk_pending"):
                start = req["done"]
                end = chunk_end(np.asarray(req["offsets"]), start, n, self.args.chunk) \
                    if self.args.chunk else n
                tasks.append(self.task(b, req, start, end))
                req["done"] = end
        if tasks:
            from fastdeploy.engine import request as fd_request

            if hasattr(fd_request, "BatchRequest"):
                # dad5a432a's runner takes a BatchRequest (request.py 616-700 there).
                batch = fd_request.BatchRequest()
                for t in tasks:
                    batch.add_request(t)
                tasks = batch
            self.runner.insert_tasks_v1(tasks, self.batch)
        self.base.step(self.live)
        import paddle

        hidden = paddle.zeros([1, 1], dtype="float32")  # the draft model reads none
        twin = self.judge.twin
        if twin is not None:
            twin.before(self.proposer.model_inputs, self.runner.share_inputs)
            self.mtp.draft_model_update.listener = twin.sample
        try:
            self.proposer.run(full_hidden_states=hidden)
        finally:
            if twin is not None:
                self.mtp.draft_model_update.listener = None
        if twin is not None:
            twin.after(self.proposer.model_inputs, self.runner.share_inputs, where)
        self._trace()
        handed = []
        if self.role == "prefill":
            for b in self.base.schedule_cache_prefill_node(self.live):
                req = self.live.pop(b)
                first = req["generated"][0]
                draft = int(self.runner.share_inputs["draft_tokens"].numpy()[b, 1])
                kv = self.judge.runner.export_prompt(b, len(req["prompt"]))
                handed.append((req, first, draft, kv))
        stop = self.runner.share_inputs["stop_flags"].numpy().reshape(-1)
        for b in list(self.live):
            if stop[b] and self.live[b]["done"] >= len(self.live[b]["prompt"]):
                del self.live[b]
        return handed

    def _step_v0(self) -> List[tuple]:
        """One engine step of the v0 scheduler (a mixed node): a new request's
        first chunk through the runner's ``insert_prefill_inputs``, the base
        model, the proposer, then the runner's ``_update_chunked_prefill``
        with the step's new requests, which sets up each request's next chunk
        (or its first decode) for the next step and calls the proposer's
        ``update_task_chunk_prefill`` (gpu_model_runner.py 9018ccf74 lines
        2057-2119, called at line 2572 after the proposer's run). Its
        ``step_cuda`` (line 2564) is left out: it hands out and frees KV
        blocks, and where they run out it preempts requests and later
        recovers them, which the harness's fixed tables of four 64-token
        blocks a request never need."""
        new = []
        for b, req in sorted(self.live.items()):
            if "task" in req:
                continue
            n = len(req["prompt"])
            chunk = self.args.chunk or n
            task = self.task(b, req, 0, n)
            task.prefill_chunk_info = [min(chunk, n - s) for s in range(0, n, chunk)]
            req["task"] = task
            new.append(task)
        if new:
            self.runner.insert_prefill_inputs(new, self.batch)
        for req in self.live.values():
            # What the base model computes this step: up to the end of the
            # chunk the runner set up last (chunk_idx is one past it).
            task = req["task"]
            req["done"] = min(sum(task.prefill_chunk_info[:task.chunk_idx]), len(req["prompt"]))
        self.base.step(self.live)
        import paddle

        self.proposer.run(full_hidden_states=paddle.zeros([1, 1], dtype="float32"))
        self._trace()
        self.runner._update_chunked_prefill(new or None)
        stop = self.runner.share_inputs["stop_flags"].numpy().reshape(-1)
        for b in list(self.live):
            if stop[b] and self.live[b]["done"] >= len(self.live[b]["prompt"]):
                del self.live[b]
        return []

    def _trace(self) -> None:
        mi, si = self.proposer.model_inputs, self.runner.share_inputs
        parts = [b"S"]
        for name in ("draft_tokens", "seq_lens_encoder", "seq_lens_decoder", "step_idx",
                     "stop_flags", "pre_ids", "attn_mask_offsets_decoder", "decode_states",
                     "mask_rollback", "input_ids", "not_need_stop"):
            if name in mi and mi[name] is not None:
                parts.append(np.ascontiguousarray(mi[name].numpy()).tobytes())
        buf = getattr(self.proposer, "seq_lens_this_time_buffer", None)
        if buf is None:
            buf = mi["seq_lens_this_time_buffer"]
        parts.append(np.ascontiguousarray(buf.numpy()).tobytes())
        for name in ("draft_tokens", "seq_lens_this_time"):
            parts.append(np.ascontiguousarray(si[name].numpy()).tobytes())
        self.result.trace.append(b"".join(parts))


def _new_request(rng, args, rid: int) -> dict:
    from .simulate import new_prompt

    ns = types.SimpleNamespace(max_prompt=args.max_prompt, image_prob=args.image_prob)
    prompt, offsets = new_prompt(rng, ns)
    prompt = [int(t) for t in prompt]
    offsets = np.asarray(offsets, np.int64)
    from .sim_fastdeploy import mask_offsets_through_first_token
    from ..slots import Request as SimRequest

    mask = mask_offsets_through_first_token(SimRequest(slot=0, prompt=prompt,
                                                       mask_offsets=offsets.tolist()))
    return {"id": f"req-{rid}", "prompt": prompt, "offsets": offsets, "mask": mask.tolist(),
            "generated": []}


def _run_here(src: str, role: str, k: int, steps: int, batch: int, seed: int, chunk: int,
              prefix_cache: float, image_prob: float, kernels: str, deps: Optional[str],
              max_prompt: int = 40, max_dec_len: int = 24, eos_prob: float = 0.05,
              finish_prob: float = 0.05, arrival_prob: float = 0.5, drift: bool = False,
              workaround: bool = True, draft_eos_prob: float = 0.0,
              against_replay: bool = False, kv_scheduler: str = "v1") -> Result:
    tree = check_tree(src)
    if kv_scheduler == "v0":
        check_v0(tree, role, image_prob, prefix_cache, against_replay)
    commit = tree_commit(tree)
    mode = os.environ.get("FASTDEPLOY_MTP_MODE") or "unset"
    if against_replay and kernels == "ours" and mode != "exact":
        raise HarnessError("the replay transcribes FastDeploy's own rules: compare it with "
                           "FASTDEPLOY_MTP_MODE=exact or with FastDeploy's kernels "
                           "(--kernels fastdeploy)")
    if drift and kernels != "fastdeploy":
        raise HarnessError("a planted drift goes into FastDeploy's modelled mask op: "
                           "use kernels='fastdeploy'")
    v1 = "0" if kv_scheduler == "v0" else "1"
    mtp, runner_mod, models = import_fastdeploy(tree, deps, kernels, drift, workaround, v1)
    result = Result(commit=commit, role=role, k=k, mode=mode, kernels=kernels, forms=models,
                    kv_scheduler=kv_scheduler)
    args = types.SimpleNamespace(max_prompt=max_prompt, image_prob=image_prob, chunk=chunk,
                                 prefix_cache=prefix_cache, max_dec_len=max_dec_len,
                                 eos_prob=eos_prob, finish_prob=finish_prob, seed=seed,
                                 draft_eos_prob=draft_eos_prob, kv_scheduler=kv_scheduler)
    rng = np.random.default_rng(seed)
    max_model_len = max_prompt + max_dec_len + 2 * k + 8
    fd = {"mtp": mtp, "runner": runner_mod}
    roles = ("prefill", "decode") if role == "pd" else (role,)
    env = {"ENABLE_V1_KVCACHE_SCHEDULER": v1}
    with _env(**env), _empty_slice_shim():
        nodes = [Node(fd, r, k, batch, max_model_len, result, rng, args) for r in roles]
        if against_replay:
            from .replay_twin import Twin, replay_form

            form = replay_form(models)
            if form is None:
                raise HarnessError(f"the replay has no form of this tree's ops ({models})")
            for node in nodes:
                node.judge.twin = Twin(form, node.role, k, batch, max_model_len, max_dec_len)
        rid = 0
        queue: List[tuple] = []
        for step in range(steps):
            first = nodes[0]
            for b in first.free():
                if rng.random() < arrival_prob:
                    req = _new_request(rng, args, rid)
                    rid += 1
                    start = 0
                    if prefix_cache > 0:
                        from .sim_fastdeploy import prefix_cache_start

                        start = prefix_cache_start(rng, req["offsets"], prefix_cache)
                    first.admit(b, req, start)
                    if start:
                        first.judge.runner.cached_prefix(b, start)
                        first.judge.written[b, :start] = True
            handed = first.step(f"step {step}")
            if len(nodes) > 1:
                queue.extend(handed)
                dec = nodes[1]
                for b in dec.free():
                    if not queue:
                        break
                    req, first_tok, draft, kv = queue.pop(0)
                    req = dict(req, generated=[first_tok], inserted=False)
                    dec.admit(b, req, len(req["prompt"]))
                    dec.judge.runner.import_prompt(b, kv)
                    dec.judge.written[b, :len(req["prompt"])] = True
                    # The decode node's base verifies the first token with the
                    # prefill node's draft token (see Base).
                    req["handover_draft"] = draft
                dec.step(f"step {step}")
            result.steps += 1
    for node in nodes:
        result.tokens += node.judge.tally.tokens
        result.disagreements += node.judge.tally.disagreements
        twin = node.judge.twin
        if twin is not None:
            r = result.replay
            for key in ("steps", "substeps", "mismatches", "outside"):
                r[key] = r.get(key, 0) + getattr(twin, key)
            kinds = r.setdefault("kinds", {})
            for what, n in twin.kinds.items():
                kinds[what] = kinds.get(what, 0) + n
            if twin.first and "first" not in r:
                r["first"] = f"{node.role} {twin.first}"
    return result


# -- the entry points ---------------------------------------------------------

def default_image_prob(kv_scheduler: str) -> float:
    """Half the prompts with images, where the scheduler serves them (v1)."""
    return 0.0 if kv_scheduler == "v0" else 0.5


KERNELS = ("ours", "fastdeploy")
ROLES = ("mixed", "pd")
SCHEDULERS = ("v1", "v0")


def run(src=None, *, role: str = "mixed", k: int = 2, steps: int = 40, batch: int = 4,
        seed: int = 0, chunk: int = 0, prefix_cache: float = 0.0,
        image_prob: Optional[float] = None,
        kernels: str = "ours", deps: Optional[str] = None, drift: bool = False,
        workaround: bool = True, draft_eos_prob: float = 0.0, timeout: float = 900,
        mode: Optional[str] = None, against_replay: bool = False,
        kv_scheduler: str = "v1") -> Result:
    """Run FastDeploy's proposer from the tree `src` (default: $FASTDEPLOY_SRC)
    in a child process (its imports, platform shim and plugin stay there) and
    return what the judge counted. `kernels`: "ours" (the plugin's ops,
    loaded by FastDeploy's loader) or "fastdeploy" (FastDeploy's own kernels,
    modelled); `role`: "mixed" or "pd" (a prefill node handing each request
    with its draft K/V to a decode node); `kv_scheduler`: "v1", or "v0" for
    the v0 scheduler's insert and chunk path (a mixed node, text prompts);
    `image_prob` defaults to 0.5 on v1, 0 on v0. Raises HarnessError with
    one line."""
    import json

    src = src or os.environ.get("FASTDEPLOY_SRC")
    check_tree(src)
    if role not in ROLES or kernels not in KERNELS or kv_scheduler not in SCHEDULERS:
        raise HarnessError(f"role must be one of {ROLES}, kernels one of {KERNELS} and "
                           f"kv_scheduler one of {SCHEDULERS}")
    deps = deps or os.environ.get(DEPS_ENV) or DEFAULT_DEPS
    image_prob = default_image_prob(kv_scheduler) if image_prob is None else image_prob
    cmd = [sys.executable, "-m", "fastdeploy_mtp.harness.real_fastdeploy", "--src", str(src),
           "--role", role, "--k", str(k), "--steps", str(steps), "--batch", str(batch),
           "--seed", str(seed), "--chunk", str(chunk), "--prefix-cache", str(prefix_cache),
           "--image-prob", str(image_prob), "--kernels", kernels, "--deps", deps,
           "--draft-eos-prob", str(draft_eos_prob), "--kv-scheduler", kv_scheduler, "--json"]
    if drift:
        cmd.append("--drift")
    if against_replay:
        cmd.append("--against-replay")
    if not workaround:
        cmd.append("--no-bool-workaround")
    here = str(pathlib.Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    if mode is not None:  # the plugin's FASTDEPLOY_MTP_MODE in the child
        env["FASTDEPLOY_MTP_MODE"] = mode
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    data = json.loads(lines[-1]) if lines else {}
    if "error" in data:
        raise HarnessError(data["error"])
    if out.returncode != 0 or not lines:
        err = [ln for ln in out.stderr.splitlines() if ln.strip()]
        raise HarnessError(err[-1] if err else f"the run exited {out.returncode}")
    trace = [bytes.fromhex(h) for h in data.pop("trace")]
    return Result(trace=trace, **data)


def main(argv=None) -> int:
    import json

    ap = argparse.ArgumentParser(
        prog="python -m fastdeploy_mtp.harness.real_fastdeploy",
        description="Run FastDeploy's own MTP proposer (from a FastDeploy source tree) on the "
                    "CPU with our plugin loaded by FastDeploy's plugin loader, and judge its "
                    "draft with the tiny attention model and the cache-free oracle.")
    ap.add_argument("--src", default=os.environ.get("FASTDEPLOY_SRC"),
                    help="FastDeploy source tree (default: $FASTDEPLOY_SRC)")
    ap.add_argument("--role", choices=ROLES, default="mixed")
    ap.add_argument("--k", type=int, default=2, help="num_model_steps = num_speculative_tokens")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunk", type=int, default=0, help="chunked prefill budget (0: whole)")
    ap.add_argument("--prefix-cache", type=float, default=0.0,
                    help="probability a prompt starts at a prefix-cache hit")
    ap.add_argument("--image-prob", type=float, default=None,
                    help="probability a prompt holds images (default 0.5; 0 with --kv-scheduler "
                         "v0)")
    ap.add_argument("--kernels", choices=KERNELS, default="ours",
                    help="ours: the plugin's ops; fastdeploy: FastDeploy's own (modelled)")
    ap.add_argument("--deps", default=os.environ.get(DEPS_ENV) or DEFAULT_DEPS,
                    help=f"directory of FastDeploy's Python dependencies (${DEPS_ENV})")
    ap.add_argument("--draft-eos-prob", type=float, default=0.0,
                    help="probability a draft token is the end token (default 0: greedy)")
    ap.add_argument("--against-replay", action="store_true",
                    help="run the replay's step (simulate --runner fastdeploy) beside each of "
                         "FastDeploy's on the same buffers and count where they part "
                         "(the exact mode or --kernels fastdeploy)")
    ap.add_argument("--kv-scheduler", choices=SCHEDULERS, default="v1",
                    help="v0: FastDeploy's v0 scheduler's insert and chunk path "
                         "(ENABLE_V1_KVCACHE_SCHEDULER=0; a mixed node, text prompts)")
    ap.add_argument("--drift", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-bool-workaround", dest="workaround", action="store_false",
                    help="pass FastDeploy's int kvcache_scheduler_v1 to the plugin's op as is")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.image_prob is None:
        a.image_prob = default_image_prob(a.kv_scheduler)
    # FastDeploy's loggers write under FD_LOG_DIR ("log" in the working
    # directory by default, fastdeploy/envs.py); keep them out of the tree.
    if not os.environ.get("FD_LOG_DIR"):
        import tempfile

        os.environ["FD_LOG_DIR"] = os.path.join(tempfile.gettempdir(), "fastdeploy_mtp_real_log")
    try:
        res = _run_here(a.src, a.role, a.k, a.steps, a.batch, a.seed, a.chunk, a.prefix_cache,
                        a.image_prob, a.kernels, a.deps, drift=a.drift,
                        workaround=a.workaround, draft_eos_prob=a.draft_eos_prob,
                        against_replay=a.against_replay, kv_scheduler=a.kv_scheduler)
    except HarnessError as e:
        if a.json:
            print(json.dumps({"error": str(e)}))
        else:
            print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # FastDeploy's code failing at this tree on a CPU
        msg = f"FastDeploy's code at {a.src} does not run here: {type(e).__name__}: " \
              f"{str(e).splitlines()[0] if str(e) else ''}"
        if a.json:
            print(json.dumps({"error": msg}))
        else:
            print(f"error: {msg}", file=sys.stderr)
        return 2
    if a.json:
        d = {k: v for k, v in res.__dict__.items() if k != "trace"}
        d["trace"] = [b.hex() for b in res.trace]
        print(json.dumps(d))
    else:
        print(res.line())
        print(f"forms: {res.forms}")
        for kind, msg in res.first.items():
            print(f"first {kind}: {msg}")
        if res.replay:
            r = res.replay
            print(f"against the replay: {r['steps']} steps, {r['substeps']} substeps, "
                  f"{r['mismatches']} mismatches ({r['outside']} writes outside a row)")
            if "first" in r:
                print(f"first mismatch: {r['first']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
