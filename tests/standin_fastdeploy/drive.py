"""One process of tests/test_plugin.py: FastDeploy's stand-in (this folder,
its commit STANDIN_FASTDEPLOY_COMMIT) loads its plugins as FastDeploy does,
by importing its models package; this script then reports, as one JSON line
starting with RESULT, what the plugin logged and did before any op was
called, and what the stand-in's proposer did when it called the ops on real
tensors, compared with the numpy models of the form's ops.

Its argument is a JSON object:
  proposer_first  import the proposer (and a module holding two of the ops
                  under other names) before the plugins are loaded
  break_library   fastdeploy_mtp.forms.load raises, as a failed build does
  register_twice  call the plugin's register() again, and report any change
  run             a form ("pr5245", "pr5738", "pr6403", "recompute",
                  "shadow"): call the proposer's preprocess once and its mask
                  op twice with a state of that form, and compare with that
                  form's models
  mask_upset      what FastDeploy's mask op does at its first call instead of
                  its kernel: "raise" (a RuntimeError) or "nothing" (changes
                  nothing, returns zeros)
  hostile_op      FastDeploy's draft_model_preprocess is an object whose
                  signature raises when read (a failure register() does not foresee)
  capture_log     collect the fastdeploy_mtp logger's records (else the
                  plugin's line goes wherever the plugin sends it)

The report's keys:
  log, log_at_register        every record, and those logged by register()
  loads, loads_at_register    the forms fastdeploy_mtp.forms.load was asked
                              for, in all and before the first op call
  library_at_register         whether our op library was loaded then
  calls_at_register           FastDeploy's op calls then
  held_at_register, held      what FastDeploy's ops module holds under each
                              op's two names, before and after the run:
                              "fastdeploy", "deferred" (the plugin's
                              stand-in), a form (our op of that form), else "other"
  fastdeploy_left_at_register, fastdeploy_left
                              every module:name holding one of FastDeploy's
                              op objects, before and after the run
  calls                       the proposer's calls that reached FastDeploy's ops
  probe_calls                 FastDeploy's op calls on tensors not the proposer's
  mismatch                    None, or what differs from the form's models
  mask_rule                   the decode_states rules (pr5738: 9018ccf74's,
                              pr6403: 2178f2829's) the proposer's calls followed
"""

import importlib
import json
import logging
import sys
import types

import numpy as np

spec = json.loads(sys.argv[1])
records = []
# FastDeploy imports Paddle before its plugins run, and Paddle 2's import sets
# the root logger to WARNING: the level below is set after it, as Paddle 3's
# import leaves it.
try:
    import paddle  # noqa: F401
except ImportError:
    pass
if spec.get("capture_log", True):
    class Collect(logging.Handler):
        def emit(self, record):
            if record.name.startswith("fastdeploy_mtp"):
                records.append([record.levelname, record.getMessage()])

    logging.getLogger().addHandler(Collect())
    logging.getLogger().setLevel(logging.INFO)

from fastdeploy_mtp import _build, forms  # noqa: E402
from fastdeploy_mtp import ops as our_ops  # noqa: E402
from fastdeploy_mtp.signature import FORMS, op_name  # noqa: E402

LOADS = []
_load = forms.load


def load(form="rollback"):
    LOADS.append(form)
    if spec.get("break_library"):
        raise _build.BuildError("building the op library failed: the compiler is missing")
    return _load(form)


forms.load = load

import fastdeploy.model_executor.ops.gpu as fd_ops  # noqa: E402

ORIGINALS = dict(fd_ops.ORIGINALS)
KEYS = [p + op for op in ("draft_model_preprocess", "update_attn_mask_offsets")
        for p in ("", "static_op_")]
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
    holder.static_mask_by_another_name = getattr(fd_ops, "static_op_update_attn_mask_offsets",
                                                 None)
    sys.modules["standin_holder"] = holder

importlib.import_module("fastdeploy.model_executor.models")  # loads the plugins, as FastDeploy does
from fastdeploy.model_executor.ops.gpu import fastdeploy_ops  # noqa: E402

if fastdeploy_ops.REGISTERED[fastdeploy_ops.COMMIT]:  # with no op, the proposer does not import
    import fastdeploy.spec_decode.mtp as mtp

if spec.get("mask_upset"):
    fastdeploy_ops.update_attn_mask_offsets.upsets.append(
        RuntimeError("the probe's tensors are refused") if spec["mask_upset"] == "raise"
        else "nothing")


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


def held():
    """What FastDeploy's ops module holds under each op's names."""
    library = our_ops.load_library() if our_ops.load_library.cache_info().currsize else None
    out = {}
    for key in KEYS:
        value = fd_ops.__dict__.get(key)
        name = key[len("static_op_"):] if key.startswith("static_op_") else key
        if value is None:
            continue
        if value is ORIGINALS.get(key):
            out[key] = "fastdeploy"
        elif getattr(value, "fastdeploy_mtp_deferred", False):
            out[key] = "deferred"
        elif getattr(value, "fastdeploy_mtp_form", None):
            out[key] = value.fastdeploy_mtp_form
        else:
            mine = [f for f in FORMS if library is not None
                    and value is getattr(library, op_name(f, FORMS[f][name]), None)]
            out[key] = mine[0] if mine else "other"
    return out


def snapshot():
    return {f"{m}:{n}": id(v) for m, mod in list(sys.modules.items())
            if isinstance(getattr(mod, "__dict__", None), dict)
            for n, v in list(vars(mod).items()) if callable(v)}


result = {
    "log_at_register": list(records),
    "loads_at_register": list(LOADS),
    "library_at_register": bool(our_ops.load_library.cache_info().currsize
                                or _build.MODULE_NAME in sys.modules),
    "calls_at_register": [list(c[:2]) for c in fastdeploy_ops.CALLS],
    "held_at_register": held(),
    "fastdeploy_left_at_register": holders(),
}
try:
    import inspect

    result["signature"] = list(inspect.signature(fd_ops.draft_model_preprocess).parameters)
except Exception:  # none, or one that cannot be read
    result["signature"] = None
if fastdeploy_ops.REGISTERED[fastdeploy_ops.COMMIT]:
    result["proposer_uses_ops_module"] = (
        mtp.draft_model_preprocess is fd_ops.draft_model_preprocess
        and mtp.update_attn_mask_offsets is getattr(fd_ops, "update_attn_mask_offsets", None))

if spec.get("register_twice"):
    from fastdeploy_mtp import plugin

    before, logged = snapshot(), len(records)
    plugin.register()
    after = snapshot()
    result["second_call_changed"] = sorted(k for k in set(before) | set(after)
                                           if before.get(k) != after.get(k))
    result["second_call_logged"] = records[logged:]


def state_and_models(form):
    """A valid state of `form`'s ops (numpy, keyed by input name), the
    attributes, and the models of its two ops (each takes the state, changes
    it in place; the mask op's returns its output)."""
    from fastdeploy_mtp import reference, reference_fastdeploy
    from fastdeploy_mtp.harness import states

    rng = np.random.default_rng(7)
    if form == "shadow":
        pre = states.shadow_state(rng, 24, num_model_step=3)
        attrs = {"num_model_step": 3, "is_splitwise_prefill": False}
        return (pre, attrs, lambda s: reference.draft_model_preprocess_shadow(s, **attrs),
                states.shadow_mask_state(rng, 24),
                lambda s: reference.update_attn_mask_offsets_shadow(s))
    pre = states.recompute_state(rng, 24, num_model_step=3)
    pre = {n: pre[n] for n in FORMS[form]["draft_model_preprocess"].input_names}
    attrs = {"num_model_step": 3, "truncate_first_token": True, "splitwise_prefill": False,
             "kvcache_scheduler_v1": True}
    if form == "recompute":
        ref_pre = lambda s: reference.draft_model_preprocess_recompute(s, **attrs)  # noqa: E731
    elif form.startswith("corrected_"):
        ref_pre = lambda s: reference.draft_model_preprocess_corrected(  # noqa: E731
            s, **attrs, form=form)
        return pre, attrs, ref_pre, states.mask_state(rng, 24), (
            lambda s: reference.update_attn_mask_offsets_corrected(s, form=form))
    else:  # FastDeploy's kernels: pr6403's preprocess is pr5738's
        version = "pr5245" if form == "pr5245" else "pr5738"
        kernel = getattr(reference_fastdeploy, f"draft_model_preprocess_{version}")
        ref_pre = lambda s: kernel(s, **attrs)  # noqa: E731
    return pre, attrs, ref_pre, states.mask_state(rng, 24), MASK_RULES[
        "pr6403" if form == "pr6403" else "pr5738"]


def _mask_rule(name):
    def run(s):
        from fastdeploy_mtp import reference

        return getattr(reference, name)(s)

    return run


# The two decode_states rules of the ten-tensor mask op.
MASK_RULES = {"pr5738": _mask_rule("update_attn_mask_offsets"),
              "pr6403": _mask_rule("update_attn_mask_offsets_pr6403")}
MASK_CALLS = 2


def call_proposer(pre, attrs, mask):
    """The stand-in proposer's calls (preprocess once, the mask op
    MASK_CALLS times), its arguments in the order of FastDeploy's
    registration (the stand-in's), taken from the states by name. Returns
    the states after them, the mask op's outputs and the ids of the
    proposer's tensors."""
    import paddle

    from fastdeploy_mtp.buffers import tensors

    registered = fastdeploy_ops.REGISTERED[fastdeploy_ops.COMMIT]
    inputs, attr_names = (s.split() for s in registered["draft_model_preprocess"])
    t = tensors(pre)
    mtp.prepare_inputs([t[n] for n in inputs], [attrs[n] for n in attr_names])
    m = tensors(mask)
    outs = []
    for _ in range(MASK_CALLS):
        out = paddle.zeros([2 * mask["ids_remove_padding"].shape[0]], "int32")
        mtp.update_mask([m[n] for n in registered["update_attn_mask_offsets"][0].split()], out)
        outs.append(out.numpy())
    ids = {id(v) for v in list(t.values()) + list(m.values())}
    return ({k: v.numpy() for k, v in t.items()}, outs, {k: v.numpy() for k, v in m.items()},
            ids)


def copied(s):
    return {k: v.copy() for k, v in s.items()}


run = spec.get("run")
if run:
    pre, attrs, ref_pre, mask, ref_mask = state_and_models(run)
    ids = set()
    try:
        got_pre, got_outs, got_mask, ids = call_proposer(pre, attrs, mask)
        want_pre = copied(pre)
        ref_pre(want_pre)
        want_mask = copied(mask)
        want_outs = [ref_mask(want_mask) for _ in range(MASK_CALLS)]
        bad = [f"preprocess {k}" for k in pre if not np.array_equal(got_pre[k], want_pre[k])]
        bad += [f"mask {k}" for k in mask if not np.array_equal(got_mask[k], want_mask[k])]
        bad += [f"mask attn_mask_offsets, call {c + 1}" for c in range(MASK_CALLS)
                if not np.array_equal(got_outs[c], want_outs[c])]
        # The state must move, or "equal" would not tell our op from one that does nothing.
        moved = any(not np.array_equal(want_pre[k], pre[k]) for k in pre)
        result["mismatch"] = (", ".join(bad) or None) if moved else "the model changed nothing"
        if run != "shadow":
            rules = []
            for rule, model in MASK_RULES.items():
                s = copied(mask)
                for _ in range(MASK_CALLS):
                    model(s)
                rules += [rule] if np.array_equal(s["decode_states"], got_mask["decode_states"]) \
                    else []
            result["mask_rule"] = rules
    except Exception as e:
        result["mismatch"] = f"{type(e).__name__}: {(str(e).strip() or '-').splitlines()[0]}"
    result["calls"] = [list(c[:2]) for c in fastdeploy_ops.CALLS if c[2] in ids]
    result["probe_calls"] = [list(c[:2]) for c in fastdeploy_ops.CALLS if c[2] not in ids]

result["log"] = records
result["loads"] = LOADS
result["held"] = held()
result["fastdeploy_left"] = holders()
print("RESULT " + json.dumps(result))
