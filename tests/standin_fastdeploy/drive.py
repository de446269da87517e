"""One process of tests/test_plugin.py: FastDeploy's stand-in (this folder,
its commit STANDIN_FASTDEPLOY_COMMIT) loads its plugins as FastDeploy does,
by importing its models package; this script then reports, as one JSON line
starting with RESULT, what the plugin logged, which of FastDeploy's op
objects any module still holds, and what the stand-in's proposer did when it
called the ops on real tensors, compared with fastdeploy_mtp.reference.

Its argument is a JSON object:
  proposer_first  import the proposer (and a module holding two of the ops
                  under other names) before the plugins are loaded
  break_library   fastdeploy_mtp.forms.load raises, as a failed build does
  register_twice  call the plugin's register() again, and report any change
  run             "recompute", "pr5738" or "shadow": call the proposer with a state of
                  that form and compare with the reference; "fastdeploy":
                  call it and report the stand-in ops' calls
  form            the form whose library the static-graph names should hold
  hostile_op      FastDeploy's draft_model_preprocess is an object whose
                  signature raises when read (a failure register() does not foresee)
  capture_log     collect the fastdeploy_mtp logger's records (else the
                  plugin's line goes wherever the plugin sends it)
"""

import importlib
import json
import logging
import sys
import types

import numpy as np

spec = json.loads(sys.argv[1])
records = []
if spec.get("capture_log", True):
    class Collect(logging.Handler):
        def emit(self, record):
            if record.name.startswith("fastdeploy_mtp"):
                records.append([record.levelname, record.getMessage()])

    logging.getLogger().addHandler(Collect())
    logging.getLogger().setLevel(logging.INFO)

if spec.get("break_library"):
    from fastdeploy_mtp import _build, forms

    def load(form="rollback"):
        raise _build.BuildError("building the op library failed: the compiler is missing")

    forms.load = load

import fastdeploy.model_executor.ops.gpu as fd_ops  # noqa: E402

ORIGINALS = dict(fd_ops.ORIGINALS)
if spec.get("hostile_op"):
    class Hostile:
        @property
        def __signature__(self):
            raise RuntimeError("a signature that cannot be read")

        def __call__(self, *args):
            pass

    fd_ops.draft_model_preprocess = ORIGINALS["draft_model_preprocess"] = Hostile()
if spec.get("proposer_first"):
    importlib.import_module("fastdeploy.spec_decode.mtp")

    holder = types.ModuleType("standin_holder")
    holder.preprocess_by_another_name = fd_ops.draft_model_preprocess
    holder.static_mask_by_another_name = fd_ops.static_op_update_attn_mask_offsets
    sys.modules["standin_holder"] = holder

importlib.import_module("fastdeploy.model_executor.models")  # loads the plugins, as FastDeploy does
from fastdeploy.model_executor.ops.gpu import fastdeploy_ops  # noqa: E402

if fastdeploy_ops.REGISTERED[fastdeploy_ops.COMMIT]:  # with no op, the proposer does not import
    import fastdeploy.spec_decode.mtp as mtp


def holders():
    """Every module:name that holds one of FastDeploy's op objects."""
    ids = {id(v): k for k, v in ORIGINALS.items()}
    found = []
    for mod_name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for name, value in list(namespace.items()):
            if id(value) in ids and ORIGINALS[ids[id(value)]] is value:
                found.append(f"{mod_name}:{name}")
    return sorted(found)


def snapshot():
    return {f"{m}:{n}": id(v) for m, mod in list(sys.modules.items())
            if isinstance(getattr(mod, "__dict__", None), dict)
            for n, v in list(vars(mod).items()) if callable(v)}


result = {"log": records, "fastdeploy_left": holders()}
try:
    import inspect

    result["signature"] = list(inspect.signature(fd_ops.draft_model_preprocess).parameters)
except Exception:  # none, or one that cannot be read
    result["signature"] = None
if fastdeploy_ops.REGISTERED[fastdeploy_ops.COMMIT]:
    result["proposer_uses_ops_module"] = (
        mtp.draft_model_preprocess is fd_ops.draft_model_preprocess
        and mtp.update_attn_mask_offsets is fd_ops.update_attn_mask_offsets)
if spec.get("form"):
    from fastdeploy_mtp import forms

    try:
        library = forms.load(spec["form"]).library
        result["static_names_hold_library"] = (
            getattr(fd_ops, "static_op_draft_model_preprocess", None)
            is library.draft_model_preprocess
            and getattr(fd_ops, "static_op_update_attn_mask_offsets", None)
            is library.update_attn_mask_offsets)
    except Exception as e:  # another form's library is loaded
        result["static_names_hold_library"] = f"{type(e).__name__}: {e}"

if spec.get("register_twice"):
    from fastdeploy_mtp import plugin

    before, logged = snapshot(), len(records)
    plugin.register()
    after = snapshot()
    result["second_call_changed"] = sorted(k for k in set(before) | set(after)
                                           if before.get(k) != after.get(k))
    result["second_call_logged"] = records[logged:]


def state_and_reference(form):
    """A valid state of `form`'s ops (numpy, keyed by input name), the
    attributes, and the reference functions of its two ops."""
    from fastdeploy_mtp import reference, reference_fastdeploy
    from fastdeploy_mtp.harness import states

    rng = np.random.default_rng(7)
    if form in ("recompute", "pr5738"):
        pre = states.recompute_state(rng, 24, num_model_step=3)
        attrs = {"num_model_step": 3, "truncate_first_token": True, "splitwise_prefill": False,
                 "kvcache_scheduler_v1": True}
        ref = (reference.draft_model_preprocess_recompute if form == "recompute" else
               lambda **s: reference_fastdeploy.draft_model_preprocess_pr5738(
                   {n: s[n] for n in pre}, **{a: s[a] for a in attrs}))
        return pre, attrs, ref, states.mask_state(rng, 24), reference.update_attn_mask_offsets
    pre = states.shadow_state(rng, 24, num_model_step=3)
    attrs = {"num_model_step": 3, "is_splitwise_prefill": False}
    return (pre, attrs, reference.draft_model_preprocess_shadow, states.shadow_mask_state(rng, 24),
            reference.update_attn_mask_offsets_shadow)


def call_proposer(pre, attrs, mask):
    """The stand-in proposer's two calls, its arguments in the order of
    FastDeploy's registration (the stand-in's), taken from the states by name."""
    import paddle

    from fastdeploy_mtp.buffers import tensors

    registered = fastdeploy_ops.REGISTERED[fastdeploy_ops.COMMIT]
    inputs, attr_names = (s.split() for s in registered["draft_model_preprocess"])
    t = tensors(pre)
    mtp.prepare_inputs([t[n] for n in inputs], [attrs[n] for n in attr_names])
    m = tensors(mask)
    out = paddle.zeros([2 * mask["ids_remove_padding"].shape[0]], "int32")
    mtp.update_mask([m[n] for n in registered["update_attn_mask_offsets"][0].split()], out)
    return ({k: v.numpy() for k, v in t.items()}, out.numpy(), {k: v.numpy() for k, v in m.items()})


run = spec.get("run")
if run in ("recompute", "pr5738", "shadow"):
    pre, attrs, ref_pre, mask, ref_mask = state_and_reference(run)
    try:
        got_pre, got_out, got_mask = call_proposer(pre, attrs, mask)
        want_pre = {k: v.copy() for k, v in pre.items()}
        ref_pre(**want_pre, **attrs)
        want_mask = {k: v.copy() for k, v in mask.items()}
        want_out = ref_mask(**want_mask)
        bad = [f"preprocess {k}" for k in pre if not np.array_equal(got_pre[k], want_pre[k])]
        bad += [f"mask {k}" for k in mask if not np.array_equal(got_mask[k], want_mask[k])]
        bad += [] if np.array_equal(got_out, want_out) else ["mask attn_mask_offsets"]
        # The state must move, or "equal" would not tell our op from one that does nothing.
        moved = any(not np.array_equal(want_pre[k], pre[k]) for k in pre)
        result["mismatch"] = (", ".join(bad) or None) if moved else "the reference changed nothing"
    except Exception as e:
        result["mismatch"] = f"{type(e).__name__}: {(str(e).strip() or '-').splitlines()[0]}"
    result["calls"] = fastdeploy_ops.CALLS
elif run == "fastdeploy":
    from fastdeploy_mtp.buffers import tensors

    registered = fastdeploy_ops.REGISTERED[fastdeploy_ops.COMMIT]
    inputs, attr_names = (s.split() for s in registered["draft_model_preprocess"])
    pre, attrs = state_and_reference("recompute")[:2]
    t = tensors(pre)
    try:
        mtp.prepare_inputs([t[n] for n in inputs], [attrs.get(n, False) for n in attr_names])
    except Exception as e:  # an op of another signature
        result["call_error"] = f"{type(e).__name__}: {e}"
    result["calls"] = fastdeploy_ops.CALLS

print("RESULT " + json.dumps(result))
