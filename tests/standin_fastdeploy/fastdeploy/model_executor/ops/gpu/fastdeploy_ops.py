"""The stand-in of FastDeploy's compiled fastdeploy_ops: per op, the C++
extension's function (no Python parameter names; its docstring states
argN parameters, as pybind11 writes them) and Paddle's generated function of
the registered op, static_op_<name>, whose parameters are the registered
inputs then attributes. Each records its call in CALLS.

The registrations are FastDeploy's, at the commit STANDIN_FASTDEPLOY_COMMIT
names (its PD_BUILD_STATIC_OP in custom_ops/gpu_ops/speculate_decoding/
draft_model/draft_model_preprocess.cu and custom_ops/gpu_ops/
update_attn_mask_offsets.cu); "none" exposes no op, as FastDeploy's ops module
is where its library did not import.

The extension functions compute what FastDeploy's kernels of that commit
compute, in place (MODELS: the numpy models of those kernels this project
holds its forms to), and return what FastDeploy's C++ functions return:
nothing for the preprocess, a one-element list (a fresh [2T] int32 tensor
on ids_remove_padding's place) for the mask op. A commit without a model
(c29e86fc9) changes nothing and returns zeros. So a call that reaches
FastDeploy's op here is told from one that reaches ours by CALLS, not by its
result, and the plugin's probe of FastDeploy's mask op sees that commit's
decode_states rule."""

import inspect
import os

_FIRST = ("draft_tokens input_ids stop_flags seq_lens_this_time seq_lens_encoder seq_lens_decoder "
          "step_idx not_need_stop")
_BASE = ("base_model_seq_lens_this_time base_model_seq_lens_encoder "
         "base_model_seq_lens_decoder base_model_step_idx base_model_stop_flags "
         "base_model_is_block_step base_model_draft_tokens")
_ATTRS4 = "num_model_step truncate_first_token splitwise_prefill kvcache_scheduler_v1"
_MASK8 = ("ids_remove_padding seq_lens_this_time seq_lens_encoder seq_lens_decoder cu_seqlens_q "
          "attn_mask_offsets_full is_block_step decode_states")
_MASK10 = ("ids_remove_padding seq_lens_this_time seq_lens_encoder seq_lens_decoder cu_seqlens_q "
           "attn_mask_offsets_full attn_mask_offsets_decoder is_block_step decode_states "
           "mask_rollback")
_SHADOW = (f"{_FIRST} pre_ids accept_tokens accept_num target_model_seq_lens_encoder "
           "target_model_seq_lens_decoder target_model_step_idx target_model_stop_flags "
           "max_dec_len target_model_draft_tokens", "num_model_step is_splitwise_prefill")
_PREPROCESS22 = (f"{_FIRST} is_block_step batch_drop pre_ids mask_rollback recompute_token_num "
                 f"accept_tokens accept_num {_BASE}", _ATTRS4)

# commit -> op -> (registered inputs, attributes)
REGISTERED = {
    # draft_model_preprocess.cu lines 450-497, update_attn_mask_offsets.cu lines 128-142.
    "9018ccf74": {"draft_model_preprocess": _PREPROCESS22,
                  "update_attn_mask_offsets": (_MASK10, "")},
    # draft_model_preprocess.cu lines 450-497 (the file as at 9018ccf74),
    # update_attn_mask_offsets.cu lines 126-140 (the same inputs and outputs).
    "2178f2829": {"draft_model_preprocess": _PREPROCESS22,
                  "update_attn_mask_offsets": (_MASK10, "")},
    # draft_model_preprocess.cu lines 214-251, update_attn_mask_offsets.cu lines 115-126.
    "7a6c28781": {"draft_model_preprocess": _SHADOW, "update_attn_mask_offsets": (_MASK8, "")},
    # The same registrations as 7a6c28781's.
    "c29e86fc9": {"draft_model_preprocess": _SHADOW, "update_attn_mask_offsets": (_MASK8, "")},
    # draft_model_preprocess.cu lines 432-474, update_attn_mask_offsets.cu lines 128-142.
    "ba915e03e": {
        "draft_model_preprocess": (f"{_FIRST} is_block_step batch_drop pre_ids accept_tokens "
                                   f"accept_num {_BASE}", _ATTRS4),
        "update_attn_mask_offsets": (_MASK10, ""),
    },
    # draft_model_preprocess.cu lines 453-494: 19 tensors (no is_block_step) and
    # 3 attributes, none of our forms' signatures; no update_attn_mask_offsets yet
    # (11398790d added it).
    "52eda7fdb": {"draft_model_preprocess": (
        f"{_FIRST} batch_drop pre_ids accept_tokens accept_num {_BASE}",
        "num_model_step truncate_first_token splitwise_prefill")},
    "none": {},
}


def _fastdeploy_kernel(version):
    """reference_fastdeploy's model of FastDeploy's preprocess kernel `version`
    (a state dict, its attributes by name)."""
    def run(state, attrs):
        from fastdeploy_mtp import reference_fastdeploy

        getattr(reference_fastdeploy, f"draft_model_preprocess_{version}")(state, **attrs)

    return run


def _reference(name):
    """fastdeploy_mtp.reference's function `name` (the state dict, its
    attributes by name)."""
    def run(state, attrs):
        from fastdeploy_mtp import reference

        return getattr(reference, name)(state, **attrs)

    return run


# commit -> op -> the model of FastDeploy's kernel there.
MODELS = {
    # draft_model_preprocess.cu lines 219-241 (the pr5738 rules); the mask op's
    # decode_states rule at update_attn_mask_offsets.cu lines 68-77: a decode of
    # more than one token rewrites its row.
    "9018ccf74": {"draft_model_preprocess": _fastdeploy_kernel("pr5738"),
                  "update_attn_mask_offsets": _reference("update_attn_mask_offsets")},
    # The preprocess kernel as at 9018ccf74 (draft_model_preprocess.cu has no
    # change between them); update_attn_mask_offsets.cu lines 68-75: every
    # decode rewrites its row, a 1 among its tokens' columns becoming -1.
    "2178f2829": {"draft_model_preprocess": _fastdeploy_kernel("pr5738"),
                  "update_attn_mask_offsets": _reference("update_attn_mask_offsets_pr6403")},
    # draft_model_preprocess.cu as 88d44a2c9 left it (a running decode rolls
    # back num_model_step - 1, lines 226-230); update_attn_mask_offsets.cu as
    # at 9018ccf74 (no change between them).
    "ba915e03e": {"draft_model_preprocess": _fastdeploy_kernel("pr5245"),
                  "update_attn_mask_offsets": _reference("update_attn_mask_offsets")},
    "7a6c28781": {"draft_model_preprocess": _reference("draft_model_preprocess_shadow"),
                  "update_attn_mask_offsets": _reference("update_attn_mask_offsets_shadow")},
}

# (op, "extension" or "static", id of the call's first tensor) per call.
CALLS = []


class _ExtensionFunction:
    """A C++ extension's function: positional only, names unknown to Python.
    `upsets`: what its next calls do instead of its kernel, one each: an
    exception to raise, or "nothing" (change nothing and return zeros, as a
    kernel of another version might)."""

    def __init__(self, name, inputs, attrs):
        self.__name__ = name
        count = len(inputs) + len(attrs)
        self.__doc__ = (f"{name}(" + ", ".join(f"arg{k}: paddle::Tensor" for k in range(count))
                        + ") -> object\n\nthe C++ extension's function")
        self._inputs, self._attrs = inputs, attrs
        self.upsets = []

    def __call__(self, *args):
        CALLS.append((self.__name__, "extension", id(args[0]) if args else None))
        if len(args) != len(self._inputs) + len(self._attrs):
            raise TypeError(f"{self.__name__}: {len(args)} arguments, not "
                            f"{len(self._inputs) + len(self._attrs)}")
        model = MODELS.get(COMMIT, {}).get(self.__name__)
        upset = self.upsets.pop(0) if self.upsets else None
        if isinstance(upset, BaseException):
            raise upset
        tensors = args[:len(self._inputs)]
        out = None
        if model is not None and upset is None:
            state = {n: t.numpy().copy() for n, t in zip(self._inputs, tensors)}
            out = model(state, dict(zip(self._attrs, args[len(self._inputs):])))
            for n, t in zip(self._inputs, tensors):
                t.set_value(state[n])
        if self.__name__ != "update_attn_mask_offsets":
            return None
        import numpy as np
        import paddle

        if out is None:
            out = np.zeros([2 * tensors[0].shape[0]], np.int32)
        return [paddle.to_tensor(np.asarray(out, np.int32), place=tensors[0].place)]


def _generated_function(name, params):
    """Paddle's generated function of registered op `name`: the registered
    parameters, by name."""

    def op(*args, **kwargs):
        CALLS.append((name, "static", id(args[0]) if args else None))
        op.__signature__.bind(*args, **kwargs)
        return None

    op.__name__ = op.__qualname__ = name
    op.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params])
    return op


COMMIT = os.environ["STANDIN_FASTDEPLOY_COMMIT"]
for _name, (_inputs, _attrs) in REGISTERED[COMMIT].items():
    globals()[_name] = _ExtensionFunction(_name, _inputs.split(), _attrs.split())
    globals()["static_op_" + _name] = _generated_function("static_op_" + _name,
                                                         _inputs.split() + _attrs.split())
