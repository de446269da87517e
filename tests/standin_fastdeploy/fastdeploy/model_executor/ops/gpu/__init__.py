"""FastDeploy's GPU ops as fastdeploy/model_executor/ops/gpu/__init__.py exposes
them (9018ccf74 line 22; fastdeploy/import_ops.py lines 24-113): every member
of the compiled module copied in, then each op that has a static_op_<name>
made one function that runs the C++ one in dynamic mode (a one-element list
unwrapped) and the static one otherwise, wrapping the static one."""

import functools

from . import fastdeploy_ops as _compiled


def _unified(extension_op, static_op):
    @functools.wraps(static_op)
    def op(*args, **kwargs):
        import paddle

        if paddle.in_dynamic_mode():
            res = extension_op(*args, **kwargs)
            if isinstance(res, list) and len(res) == 1:
                return res[0]
            return res
        return static_op(*args, **kwargs)

    return op


def _expose(namespace):
    for name, value in vars(_compiled).items():
        if not name.startswith("_") and callable(value):
            namespace[name] = value
    for static_name in [n for n in namespace if n.startswith("static_op_")]:
        name = static_name[len("static_op_"):]
        namespace[name] = (_unified(namespace[name], namespace[static_name]) if name in namespace
                           else namespace[static_name])


_expose(globals())

# What this module exposes of the two ops, for the tests to tell FastDeploy's from ours.
ORIGINALS = {n: globals()[n] for n in ("draft_model_preprocess", "update_attn_mask_offsets",
                                       "static_op_draft_model_preprocess",
                                       "static_op_update_attn_mask_offsets") if n in globals()}
