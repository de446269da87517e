// Generated from fastdeploy_mtp/signature.py: do not edit; run
// `python -m fastdeploy_mtp signature --write` after changing the table.
// Each form's FastDeploy-shaped baselines (bench_baseline.h): its rules, nothing
// checked, launched as FastDeploy launches its kernel; registered as
// bench_baseline_preprocess_<form> and bench_baseline_mask_<form> with the
// form's own signature.
#include "bench_baseline.h"

void BenchBaselinePreprocessRollback(MTP_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp_bench::run_baseline_preprocess<mtp::Form::kRollback>(
      mtp::rollback::draft_model_preprocess_views(MTP_DRAFT_MODEL_PREPROCESS_ARGS),
      512);
}
PD_BUILD_OP(bench_baseline_preprocess_rollback)
    .Inputs({MTP_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselinePreprocessRollback));

std::vector<paddle::Tensor> BenchBaselineMaskRollback(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  return mtp_bench::run_baseline_mask<mtp::Form::kRollback>(
      mtp::rollback::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS));
}
PD_BUILD_OP(bench_baseline_mask_rollback)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselineMaskRollback));

void BenchBaselinePreprocessRecompute(MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp_bench::run_baseline_preprocess<mtp::Form::kRecompute>(
      mtp::recompute::draft_model_preprocess_views(MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ARGS),
      512);
}
PD_BUILD_OP(bench_baseline_preprocess_recompute)
    .Inputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselinePreprocessRecompute));

std::vector<paddle::Tensor> BenchBaselineMaskRecompute(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  return mtp_bench::run_baseline_mask<mtp::Form::kRollback>(
      mtp::recompute::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS));
}
PD_BUILD_OP(bench_baseline_mask_recompute)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselineMaskRecompute));

void BenchBaselinePreprocessPr5245(MTP_PR5245_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp_bench::run_baseline_preprocess<mtp::Form::kPr5245>(
      mtp::pr5245::draft_model_preprocess_views(MTP_PR5245_DRAFT_MODEL_PREPROCESS_ARGS),
      512);
}
PD_BUILD_OP(bench_baseline_preprocess_pr5245)
    .Inputs({MTP_PR5245_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_PR5245_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_PR5245_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_PR5245_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselinePreprocessPr5245));

std::vector<paddle::Tensor> BenchBaselineMaskPr5245(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  return mtp_bench::run_baseline_mask<mtp::Form::kRollback>(
      mtp::pr5245::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS));
}
PD_BUILD_OP(bench_baseline_mask_pr5245)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselineMaskPr5245));

void BenchBaselinePreprocessPr5738(MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp_bench::run_baseline_preprocess<mtp::Form::kPr5738>(
      mtp::pr5738::draft_model_preprocess_views(MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ARGS),
      512);
}
PD_BUILD_OP(bench_baseline_preprocess_pr5738)
    .Inputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselinePreprocessPr5738));

std::vector<paddle::Tensor> BenchBaselineMaskPr5738(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  return mtp_bench::run_baseline_mask<mtp::Form::kRollback>(
      mtp::pr5738::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS));
}
PD_BUILD_OP(bench_baseline_mask_pr5738)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselineMaskPr5738));

void BenchBaselinePreprocessPr6403(MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp_bench::run_baseline_preprocess<mtp::Form::kPr5738>(
      mtp::pr6403::draft_model_preprocess_views(MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ARGS),
      512);
}
PD_BUILD_OP(bench_baseline_preprocess_pr6403)
    .Inputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselinePreprocessPr6403));

std::vector<paddle::Tensor> BenchBaselineMaskPr6403(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  return mtp_bench::run_baseline_mask<mtp::Form::kPr6403>(
      mtp::pr6403::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS));
}
PD_BUILD_OP(bench_baseline_mask_pr6403)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselineMaskPr6403));

void BenchBaselinePreprocessXpu(MTP_XPU_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp_bench::run_baseline_preprocess<mtp::Form::kPr5245>(
      mtp::xpu::draft_model_preprocess_views(MTP_XPU_DRAFT_MODEL_PREPROCESS_ARGS),
      512);
}
PD_BUILD_OP(bench_baseline_preprocess_xpu)
    .Inputs({MTP_XPU_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_XPU_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_XPU_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_XPU_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselinePreprocessXpu));

std::vector<paddle::Tensor> BenchBaselineMaskXpu(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  return mtp_bench::run_baseline_mask<mtp::Form::kRollback>(
      mtp::xpu::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS));
}
PD_BUILD_OP(bench_baseline_mask_xpu)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselineMaskXpu));

void BenchBaselinePreprocessShadow(MTP_SHADOW_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp_bench::run_baseline_preprocess<mtp::Form::kShadow>(
      mtp::shadow::draft_model_preprocess_views(MTP_SHADOW_DRAFT_MODEL_PREPROCESS_ARGS),
      1024);
}
PD_BUILD_OP(bench_baseline_preprocess_shadow)
    .Inputs({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselinePreprocessShadow));

std::vector<paddle::Tensor> BenchBaselineMaskShadow(MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  return mtp_bench::run_baseline_mask<mtp::Form::kShadow>(
      mtp::shadow::update_attn_mask_offsets_views(MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_ARGS));
}
PD_BUILD_OP(bench_baseline_mask_shadow)
    .Inputs({MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselineMaskShadow));

void BenchBaselinePreprocessCorrectedPr5245(MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp_bench::run_baseline_preprocess<mtp::Form::kCorrectedPr5245>(
      mtp::corrected_pr5245::draft_model_preprocess_views(MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_ARGS),
      512);
}
PD_BUILD_OP(bench_baseline_preprocess_corrected_pr5245)
    .Inputs({MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselinePreprocessCorrectedPr5245));

std::vector<paddle::Tensor> BenchBaselineMaskCorrectedPr5245(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  return mtp_bench::run_baseline_mask<mtp::Form::kCorrectedPr5738>(
      mtp::corrected_pr5245::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS));
}
PD_BUILD_OP(bench_baseline_mask_corrected_pr5245)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselineMaskCorrectedPr5245));

void BenchBaselinePreprocessCorrectedPr5738(MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp_bench::run_baseline_preprocess<mtp::Form::kCorrectedPr5738>(
      mtp::corrected_pr5738::draft_model_preprocess_views(MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_ARGS),
      512);
}
PD_BUILD_OP(bench_baseline_preprocess_corrected_pr5738)
    .Inputs({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselinePreprocessCorrectedPr5738));

std::vector<paddle::Tensor> BenchBaselineMaskCorrectedPr5738(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  return mtp_bench::run_baseline_mask<mtp::Form::kCorrectedPr5738>(
      mtp::corrected_pr5738::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS));
}
PD_BUILD_OP(bench_baseline_mask_corrected_pr5738)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselineMaskCorrectedPr5738));

void BenchBaselinePreprocessCorrectedPr6403(MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_PARAMS) {
  mtp_bench::run_baseline_preprocess<mtp::Form::kCorrectedPr5738>(
      mtp::corrected_pr6403::draft_model_preprocess_views(MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_ARGS),
      512);
}
PD_BUILD_OP(bench_baseline_preprocess_corrected_pr6403)
    .Inputs({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselinePreprocessCorrectedPr6403));

std::vector<paddle::Tensor> BenchBaselineMaskCorrectedPr6403(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  return mtp_bench::run_baseline_mask<mtp::Form::kCorrectedPr6403>(
      mtp::corrected_pr6403::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS));
}
PD_BUILD_OP(bench_baseline_mask_corrected_pr6403)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselineMaskCorrectedPr6403));
