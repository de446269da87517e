"""The proposer's use of the two ops, as FastDeploy's fastdeploy/spec_decode/mtp.py
has it: both imported by name when the module is imported (lines 55-68 at
9018ccf74), called positionally, preprocess's result ignored (lines 757-784)
and the mask op's one tensor copied into a buffer (lines 871-883)."""

from fastdeploy.model_executor.ops.gpu import draft_model_preprocess, update_attn_mask_offsets


def prepare_inputs(tensors, attrs):
    draft_model_preprocess(*tensors, *attrs)


def update_mask(tensors, attn_mask_offsets):
    out = update_attn_mask_offsets(*tensors)
    attn_mask_offsets.copy_(out, False)
