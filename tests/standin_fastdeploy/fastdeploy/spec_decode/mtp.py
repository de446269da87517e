"""The proposer's use of the two ops, as FastDeploy's fastdeploy/spec_decode/mtp.py
has it: both bound by name when the module is imported (lines 55-68 at
9018ccf74, 57-72 at 2178f2829, 37-50 at ba915e03e; 52eda7fdb's lines 32-42
import no update_attn_mask_offsets, which its ops have not), called
positionally in dynamic mode, preprocess's result ignored (lines 757-784 at
9018ccf74, 698-725 at 2178f2829, 685-710 at ba915e03e) and the mask op's one
tensor copied into a buffer (lines 871-883 at 9018ccf74, 828-842 at
2178f2829, 797-809 at ba915e03e). The stand-in passes the tensors in the
order of the registration; FastDeploy's proposer passes batch_drop where
is_block_step is registered and the other way round (9018ccf74 lines 766-767,
2178f2829 lines 707-708, ba915e03e lines 694-695), which no plugin can see."""

from fastdeploy.model_executor.ops import gpu as _ops

draft_model_preprocess = _ops.draft_model_preprocess
update_attn_mask_offsets = getattr(_ops, "update_attn_mask_offsets", None)


def prepare_inputs(tensors, attrs):
    draft_model_preprocess(*tensors, *attrs)


def update_mask(tensors, attn_mask_offsets):
    out = update_attn_mask_offsets(*tensors)
    attn_mask_offsets.copy_(out, False)
