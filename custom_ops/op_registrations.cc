// Generated from fastdeploy_mtp/signature.py: do not edit; run
// `python -m fastdeploy_mtp signature --write` after changing the table.
// Every form's ops in one library, each registered as <op>_<form>
// (signature.op_name): its boundary checks and views (op_bindings.h), then
// the dispatch of op_dispatch.h instantiated for its form.
#include "op_bindings.h"
#include "op_dispatch.h"

// draft_model_preprocess, the rollback form's.
void DraftModelPreprocessRollback(MTP_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp::ArgChecker c("draft_model_preprocess");
  mtp::rollback::draft_model_preprocess_checks(c, MTP_DRAFT_MODEL_PREPROCESS_ARGS);
  const auto v = mtp::rollback::draft_model_preprocess_views(MTP_DRAFT_MODEL_PREPROCESS_ARGS);
  mtp::run_draft_model_preprocess<mtp::Form::kRollback>(c, v);
}
PD_BUILD_OP(draft_model_preprocess_rollback)
    .Inputs({MTP_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocessRollback));

// update_attn_mask_offsets, the rollback form's.
std::vector<paddle::Tensor> UpdateAttnMaskOffsetsRollback(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  mtp::ArgChecker c("update_attn_mask_offsets");
  mtp::rollback::update_attn_mask_offsets_checks(c, MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  const auto v = mtp::rollback::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  return mtp::run_update_attn_mask_offsets<mtp::Form::kRollback>(c, v);
}
PD_BUILD_OP(update_attn_mask_offsets_rollback)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(UpdateAttnMaskOffsetsRollback))
    .SetInferShapeFn(PD_INFER_SHAPE(mtp::rollback::update_attn_mask_offsets_shape))
    .SetInferDtypeFn(PD_INFER_DTYPE(mtp::rollback::update_attn_mask_offsets_dtype));

// draft_model_preprocess, the recompute form's.
void DraftModelPreprocessRecompute(MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp::ArgChecker c("draft_model_preprocess");
  mtp::recompute::draft_model_preprocess_checks(c, MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ARGS);
  const auto v = mtp::recompute::draft_model_preprocess_views(MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ARGS);
  mtp::run_draft_model_preprocess<mtp::Form::kRecompute>(c, v);
}
PD_BUILD_OP(draft_model_preprocess_recompute)
    .Inputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocessRecompute));

// update_attn_mask_offsets, the recompute form's.
std::vector<paddle::Tensor> UpdateAttnMaskOffsetsRecompute(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  mtp::ArgChecker c("update_attn_mask_offsets");
  mtp::recompute::update_attn_mask_offsets_checks(c, MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  const auto v = mtp::recompute::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  return mtp::run_update_attn_mask_offsets<mtp::Form::kRollback>(c, v);
}
PD_BUILD_OP(update_attn_mask_offsets_recompute)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(UpdateAttnMaskOffsetsRecompute))
    .SetInferShapeFn(PD_INFER_SHAPE(mtp::recompute::update_attn_mask_offsets_shape))
    .SetInferDtypeFn(PD_INFER_DTYPE(mtp::recompute::update_attn_mask_offsets_dtype));

// draft_model_preprocess, the pr5245 form's.
void DraftModelPreprocessPr5245(MTP_PR5245_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp::ArgChecker c("draft_model_preprocess");
  mtp::pr5245::draft_model_preprocess_checks(c, MTP_PR5245_DRAFT_MODEL_PREPROCESS_ARGS);
  const auto v = mtp::pr5245::draft_model_preprocess_views(MTP_PR5245_DRAFT_MODEL_PREPROCESS_ARGS);
  mtp::run_draft_model_preprocess<mtp::Form::kPr5245>(c, v);
}
PD_BUILD_OP(draft_model_preprocess_pr5245)
    .Inputs({MTP_PR5245_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_PR5245_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_PR5245_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_PR5245_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocessPr5245));

// update_attn_mask_offsets, the pr5245 form's.
std::vector<paddle::Tensor> UpdateAttnMaskOffsetsPr5245(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  mtp::ArgChecker c("update_attn_mask_offsets");
  mtp::pr5245::update_attn_mask_offsets_checks(c, MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  const auto v = mtp::pr5245::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  return mtp::run_update_attn_mask_offsets<mtp::Form::kRollback>(c, v);
}
PD_BUILD_OP(update_attn_mask_offsets_pr5245)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(UpdateAttnMaskOffsetsPr5245))
    .SetInferShapeFn(PD_INFER_SHAPE(mtp::pr5245::update_attn_mask_offsets_shape))
    .SetInferDtypeFn(PD_INFER_DTYPE(mtp::pr5245::update_attn_mask_offsets_dtype));

// draft_model_preprocess, the pr5738 form's.
void DraftModelPreprocessPr5738(MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp::ArgChecker c("draft_model_preprocess");
  mtp::pr5738::draft_model_preprocess_checks(c, MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ARGS);
  const auto v = mtp::pr5738::draft_model_preprocess_views(MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ARGS);
  mtp::run_draft_model_preprocess<mtp::Form::kPr5738>(c, v);
}
PD_BUILD_OP(draft_model_preprocess_pr5738)
    .Inputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocessPr5738));

// update_attn_mask_offsets, the pr5738 form's.
std::vector<paddle::Tensor> UpdateAttnMaskOffsetsPr5738(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  mtp::ArgChecker c("update_attn_mask_offsets");
  mtp::pr5738::update_attn_mask_offsets_checks(c, MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  const auto v = mtp::pr5738::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  return mtp::run_update_attn_mask_offsets<mtp::Form::kRollback>(c, v);
}
PD_BUILD_OP(update_attn_mask_offsets_pr5738)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(UpdateAttnMaskOffsetsPr5738))
    .SetInferShapeFn(PD_INFER_SHAPE(mtp::pr5738::update_attn_mask_offsets_shape))
    .SetInferDtypeFn(PD_INFER_DTYPE(mtp::pr5738::update_attn_mask_offsets_dtype));

// draft_model_preprocess, the pr6403 form's.
void DraftModelPreprocessPr6403(MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp::ArgChecker c("draft_model_preprocess");
  mtp::pr6403::draft_model_preprocess_checks(c, MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ARGS);
  const auto v = mtp::pr6403::draft_model_preprocess_views(MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ARGS);
  mtp::run_draft_model_preprocess<mtp::Form::kPr5738>(c, v);
}
PD_BUILD_OP(draft_model_preprocess_pr6403)
    .Inputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocessPr6403));

// update_attn_mask_offsets, the pr6403 form's.
std::vector<paddle::Tensor> UpdateAttnMaskOffsetsPr6403(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  mtp::ArgChecker c("update_attn_mask_offsets");
  mtp::pr6403::update_attn_mask_offsets_checks(c, MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  const auto v = mtp::pr6403::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  return mtp::run_update_attn_mask_offsets<mtp::Form::kPr6403>(c, v);
}
PD_BUILD_OP(update_attn_mask_offsets_pr6403)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(UpdateAttnMaskOffsetsPr6403))
    .SetInferShapeFn(PD_INFER_SHAPE(mtp::pr6403::update_attn_mask_offsets_shape))
    .SetInferDtypeFn(PD_INFER_DTYPE(mtp::pr6403::update_attn_mask_offsets_dtype));

// draft_model_preprocess, the xpu form's.
void DraftModelPreprocessXpu(MTP_XPU_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp::ArgChecker c("draft_model_preprocess");
  mtp::xpu::draft_model_preprocess_checks(c, MTP_XPU_DRAFT_MODEL_PREPROCESS_ARGS);
  const auto v = mtp::xpu::draft_model_preprocess_views(MTP_XPU_DRAFT_MODEL_PREPROCESS_ARGS);
  mtp::run_draft_model_preprocess<mtp::Form::kPr5245>(c, v);
}
PD_BUILD_OP(draft_model_preprocess_xpu)
    .Inputs({MTP_XPU_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_XPU_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_XPU_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_XPU_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocessXpu));

// update_attn_mask_offsets, the xpu form's.
std::vector<paddle::Tensor> UpdateAttnMaskOffsetsXpu(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  mtp::ArgChecker c("update_attn_mask_offsets");
  mtp::xpu::update_attn_mask_offsets_checks(c, MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  const auto v = mtp::xpu::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  return mtp::run_update_attn_mask_offsets<mtp::Form::kRollback>(c, v);
}
PD_BUILD_OP(update_attn_mask_offsets_xpu)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(UpdateAttnMaskOffsetsXpu))
    .SetInferShapeFn(PD_INFER_SHAPE(mtp::xpu::update_attn_mask_offsets_shape))
    .SetInferDtypeFn(PD_INFER_DTYPE(mtp::xpu::update_attn_mask_offsets_dtype));

// draft_model_preprocess, the shadow form's.
void DraftModelPreprocessShadow(MTP_SHADOW_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp::ArgChecker c("draft_model_preprocess");
  mtp::shadow::draft_model_preprocess_checks(c, MTP_SHADOW_DRAFT_MODEL_PREPROCESS_ARGS);
  const auto v = mtp::shadow::draft_model_preprocess_views(MTP_SHADOW_DRAFT_MODEL_PREPROCESS_ARGS);
  mtp::run_draft_model_preprocess<mtp::Form::kShadow>(c, v);
}
PD_BUILD_OP(draft_model_preprocess_shadow)
    .Inputs({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocessShadow));

// update_attn_mask_offsets, the shadow form's.
std::vector<paddle::Tensor> UpdateAttnMaskOffsetsShadow(MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  mtp::ArgChecker c("update_attn_mask_offsets");
  mtp::shadow::update_attn_mask_offsets_checks(c, MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  const auto v = mtp::shadow::update_attn_mask_offsets_views(MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  return mtp::run_update_attn_mask_offsets<mtp::Form::kShadow>(c, v);
}
PD_BUILD_OP(update_attn_mask_offsets_shadow)
    .Inputs({MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(UpdateAttnMaskOffsetsShadow))
    .SetInferShapeFn(PD_INFER_SHAPE(mtp::shadow::update_attn_mask_offsets_shape))
    .SetInferDtypeFn(PD_INFER_DTYPE(mtp::shadow::update_attn_mask_offsets_dtype));

// draft_model_preprocess, the corrected_pr5245 form's.
void DraftModelPreprocessCorrectedPr5245(MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp::ArgChecker c("draft_model_preprocess");
  mtp::corrected_pr5245::draft_model_preprocess_checks(c, MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_ARGS);
  const auto v = mtp::corrected_pr5245::draft_model_preprocess_views(MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_ARGS);
  mtp::run_draft_model_preprocess<mtp::Form::kCorrectedPr5245>(c, v);
}
PD_BUILD_OP(draft_model_preprocess_corrected_pr5245)
    .Inputs({MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocessCorrectedPr5245));

// update_attn_mask_offsets, the corrected_pr5245 form's.
std::vector<paddle::Tensor> UpdateAttnMaskOffsetsCorrectedPr5245(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  mtp::ArgChecker c("update_attn_mask_offsets");
  mtp::corrected_pr5245::update_attn_mask_offsets_checks(c, MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  const auto v = mtp::corrected_pr5245::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  return mtp::run_update_attn_mask_offsets<mtp::Form::kCorrectedPr5738>(c, v);
}
PD_BUILD_OP(update_attn_mask_offsets_corrected_pr5245)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(UpdateAttnMaskOffsetsCorrectedPr5245))
    .SetInferShapeFn(PD_INFER_SHAPE(mtp::corrected_pr5245::update_attn_mask_offsets_shape))
    .SetInferDtypeFn(PD_INFER_DTYPE(mtp::corrected_pr5245::update_attn_mask_offsets_dtype));

// draft_model_preprocess, the corrected_pr5738 form's.
void DraftModelPreprocessCorrectedPr5738(MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp::ArgChecker c("draft_model_preprocess");
  mtp::corrected_pr5738::draft_model_preprocess_checks(c, MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_ARGS);
  const auto v = mtp::corrected_pr5738::draft_model_preprocess_views(MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_ARGS);
  mtp::run_draft_model_preprocess<mtp::Form::kCorrectedPr5738>(c, v);
}
PD_BUILD_OP(draft_model_preprocess_corrected_pr5738)
    .Inputs({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocessCorrectedPr5738));

// update_attn_mask_offsets, the corrected_pr5738 form's.
std::vector<paddle::Tensor> UpdateAttnMaskOffsetsCorrectedPr5738(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  mtp::ArgChecker c("update_attn_mask_offsets");
  mtp::corrected_pr5738::update_attn_mask_offsets_checks(c, MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  const auto v = mtp::corrected_pr5738::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  return mtp::run_update_attn_mask_offsets<mtp::Form::kCorrectedPr5738>(c, v);
}
PD_BUILD_OP(update_attn_mask_offsets_corrected_pr5738)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(UpdateAttnMaskOffsetsCorrectedPr5738))
    .SetInferShapeFn(PD_INFER_SHAPE(mtp::corrected_pr5738::update_attn_mask_offsets_shape))
    .SetInferDtypeFn(PD_INFER_DTYPE(mtp::corrected_pr5738::update_attn_mask_offsets_dtype));

// draft_model_preprocess, the corrected_pr6403 form's.
void DraftModelPreprocessCorrectedPr6403(MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp::ArgChecker c("draft_model_preprocess");
  mtp::corrected_pr6403::draft_model_preprocess_checks(c, MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_ARGS);
  const auto v = mtp::corrected_pr6403::draft_model_preprocess_views(MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_ARGS);
  mtp::run_draft_model_preprocess<mtp::Form::kCorrectedPr5738>(c, v);
}
PD_BUILD_OP(draft_model_preprocess_corrected_pr6403)
    .Inputs({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocessCorrectedPr6403));

// update_attn_mask_offsets, the corrected_pr6403 form's.
std::vector<paddle::Tensor> UpdateAttnMaskOffsetsCorrectedPr6403(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  mtp::ArgChecker c("update_attn_mask_offsets");
  mtp::corrected_pr6403::update_attn_mask_offsets_checks(c, MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  const auto v = mtp::corrected_pr6403::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  return mtp::run_update_attn_mask_offsets<mtp::Form::kCorrectedPr6403>(c, v);
}
PD_BUILD_OP(update_attn_mask_offsets_corrected_pr6403)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(UpdateAttnMaskOffsetsCorrectedPr6403))
    .SetInferShapeFn(PD_INFER_SHAPE(mtp::corrected_pr6403::update_attn_mask_offsets_shape))
    .SetInferDtypeFn(PD_INFER_DTYPE(mtp::corrected_pr6403::update_attn_mask_offsets_dtype));
