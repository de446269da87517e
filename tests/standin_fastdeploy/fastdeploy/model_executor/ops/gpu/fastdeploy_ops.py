"""The stand-in of FastDeploy's compiled fastdeploy_ops: per op, the C++
extension's function (no Python parameter names; its docstring states
argN parameters, as pybind11 writes them) and Paddle's generated function of
the registered op, static_op_<name>, whose parameters are the registered
inputs then attributes. Each records its call in CALLS and changes nothing.

The registrations are FastDeploy's, at the commit STANDIN_FASTDEPLOY_COMMIT
names (its PD_BUILD_STATIC_OP in custom_ops/gpu_ops/speculate_decoding/
draft_model/draft_model_preprocess.cu and custom_ops/gpu_ops/
update_attn_mask_offsets.cu); "none" exposes no op, as FastDeploy's ops module
is where its library did not import."""

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

# commit -> op -> (registered inputs, attributes)
REGISTERED = {
    # draft_model_preprocess.cu lines 450-497, update_attn_mask_offsets.cu lines 128-142.
    "9018ccf74": {
        "draft_model_preprocess": (
            f"{_FIRST} is_block_step batch_drop pre_ids mask_rollback recompute_token_num "
            f"accept_tokens accept_num {_BASE}", _ATTRS4),
        "update_attn_mask_offsets": (_MASK10, ""),
    },
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
    "none": {},
}

CALLS = []


class _ExtensionFunction:
    """A C++ extension's function: positional only, names unknown to Python.
    Returns what FastDeploy's C++ functions return: nothing for the
    preprocess, a one-element list (a fresh [2T] int32 tensor) for the mask op."""

    def __init__(self, name, count):
        self.__name__ = name
        self.__doc__ = (f"{name}(" + ", ".join(f"arg{k}: paddle::Tensor" for k in range(count))
                        + ") -> object\n\nthe C++ extension's function")
        self._count = count

    def __call__(self, *args):
        CALLS.append((self.__name__, "extension"))
        if len(args) != self._count:
            raise TypeError(f"{self.__name__}: {len(args)} arguments, not {self._count}")
        if self.__name__ == "update_attn_mask_offsets":
            import paddle

            return [paddle.zeros([2 * args[0].shape[0]], "int32")]
        return None


def _generated_function(name, params):
    """Paddle's generated function of registered op `name`: the registered
    parameters, by name."""

    def op(*args, **kwargs):
        CALLS.append((name, "static"))
        op.__signature__.bind(*args, **kwargs)
        return None

    op.__name__ = op.__qualname__ = name
    op.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params])
    return op


COMMIT = os.environ["STANDIN_FASTDEPLOY_COMMIT"]
for _name, (_inputs, _attrs) in REGISTERED[COMMIT].items():
    _params = _inputs.split() + _attrs.split()
    globals()[_name] = _ExtensionFunction(_name, len(_params))
    globals()["static_op_" + _name] = _generated_function("static_op_" + _name, _params)
