// Paddle binding of update_attn_mask_offsets: boundary checks, raw views, and
// dispatch to the CPU loop or the CUDA kernel (rules in mtp_bookkeeping.h).
#include "gpu_record.h"
#include "mask_output.h"
#include "mtp_cpu.h"
#include "failure_messages.h"
#include "op_signatures.h"
#include "tensor_checks.h"
#include "tensor_views.h"
#ifdef PADDLE_WITH_CUDA
#include "mtp_kernels.h"
#endif

namespace {

constexpr const char* kOp = "update_attn_mask_offsets";

constexpr mtp::Access W = mtp::Access::kWritten;

// Every form's checks, in input order; `cursor` and `rollback` are null in the
// shadow form, which has neither. Returns bsz.
int64_t check_inputs(mtp::ArgChecker& c, const paddle::Tensor& ids_remove_padding,
                     const paddle::Tensor& seq_lens_this_time,
                     const paddle::Tensor& seq_lens_encoder,
                     const paddle::Tensor& seq_lens_decoder, const paddle::Tensor& cu_seqlens_q,
                     const paddle::Tensor& attn_mask_offsets_full, const paddle::Tensor* cursor,
                     const paddle::Tensor& is_block_step, const paddle::Tensor& decode_states,
                     const paddle::Tensor* rollback) {
  using paddle::DataType;
  c.length_only(ids_remove_padding, "ids_remove_padding");
  const int64_t bsz = c.length_only(seq_lens_this_time, "seq_lens_this_time");
  c.vector(seq_lens_this_time, "seq_lens_this_time", DataType::INT32, bsz);
  c.vector(seq_lens_encoder, "seq_lens_encoder", DataType::INT32, bsz);
  c.vector(seq_lens_decoder, "seq_lens_decoder", DataType::INT32, bsz);
  // bsz + 1 prefix sums, or bsz (the last request then ends at the token total).
  c.flat(cu_seqlens_q, "cu_seqlens_q", DataType::INT32, bsz);
  c.matrix(attn_mask_offsets_full, "attn_mask_offsets_full", DataType::INT32, bsz);
  if (cursor != nullptr) {
    const paddle::Tensor& attn_mask_offsets_decoder = *cursor;
    c.vector(attn_mask_offsets_decoder, "attn_mask_offsets_decoder", DataType::INT32, bsz, W);
  }
  c.vector(is_block_step, "is_block_step", DataType::BOOL, bsz);
  // Column 0 is read for every prompt request (vision generation flag).
  c.matrix(decode_states, "decode_states", DataType::INT32, bsz, W, /*min_cols=*/1);
  if (rollback != nullptr) {
    const paddle::Tensor& mask_rollback = *rollback;
    c.vector(mask_rollback, "mask_rollback", DataType::INT32, bsz, W);
  }
  c.no_overlap();
  return bsz;
}

// Runs the checked views on the CPU or the GPU.
void run(const mtp::ArgChecker& c, const mtp::MaskTensors& t, int64_t bsz,
         const paddle::Tensor& seq_lens_this_time) {
  if (c.place().GetType() == phi::AllocationType::CPU) {
    mtp::raise_if_failed(kOp, mtp::mask_batch(t, bsz));
  } else {
#ifdef PADDLE_WITH_CUDA
    const mtp::DeviceScope on_device(c.place().GetDeviceId(), kOp);
    cudaStream_t stream = seq_lens_this_time.stream();
    mtp::BatchResult* pending = mtp::pending_record(c.place(), stream, kOp);
    const mtp::GridScratch grid = mtp::grid_scratch(c.place(), stream, kOp);
    // Asynchronous while a CUDA graph is captured (a sync is illegal then) or
    // when the runner asks for it; errors then wait on the device.
    if (mtp::asynchronous_mask_call(stream, kOp)) {
      mtp::cuda_check(mtp::launch_mask(t, bsz, {pending, nullptr}, grid, stream), kOp,
                      "kernel launch");
    } else {
      const mtp::Report report = mtp::thread_report(c.place(), stream, kOp);
      mtp::cuda_check(
          mtp::launch_mask(t, bsz, {pending, mtp::arm_report(report)}, grid, stream), kOp,
          "kernel launch");
      mtp::raise_if_failed(kOp, mtp::read_report(report, stream, kOp));
    }
#else
    (void)seq_lens_this_time;
    mtp::raise(kOp, ": this build has no CUDA support; tensors are on ", mtp::place_name(c.place()));
#endif
  }
}

}  // namespace

#ifndef MTP_FORM_SHADOW

std::vector<paddle::Tensor> UpdateAttnMaskOffsets(
    const paddle::Tensor& ids_remove_padding, const paddle::Tensor& seq_lens_this_time,
    const paddle::Tensor& seq_lens_encoder, const paddle::Tensor& seq_lens_decoder,
    const paddle::Tensor& cu_seqlens_q, const paddle::Tensor& attn_mask_offsets_full,
    paddle::Tensor& attn_mask_offsets_decoder, const paddle::Tensor& is_block_step,
    paddle::Tensor& decode_states, paddle::Tensor& mask_rollback) {
  mtp::ArgChecker c(kOp);
  const int64_t bsz = check_inputs(c, ids_remove_padding, seq_lens_this_time, seq_lens_encoder,
                                   seq_lens_decoder, cu_seqlens_q, attn_mask_offsets_full,
                                   &attn_mask_offsets_decoder, is_block_step, decode_states,
                                   &mask_rollback);
  paddle::Tensor out = mtp::fresh_mask_output(ids_remove_padding.shape()[0], c.place());
  run(c,
      mtp::mask_views(ids_remove_padding, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder,
                      cu_seqlens_q, attn_mask_offsets_full, attn_mask_offsets_decoder,
                      is_block_step, decode_states, mask_rollback, out),
      bsz, seq_lens_this_time);
  // Paddle returns the in-place outputs itself; only the fresh one is ours to return.
  return {out};
}

std::vector<std::vector<int64_t>> UpdateAttnMaskOffsetsShape(
    const std::vector<int64_t>& ids_remove_padding, const std::vector<int64_t>&,
    const std::vector<int64_t>&, const std::vector<int64_t>&, const std::vector<int64_t>&,
    const std::vector<int64_t>&, const std::vector<int64_t>&, const std::vector<int64_t>&,
    const std::vector<int64_t>&, const std::vector<int64_t>&) {
  const int64_t T = ids_remove_padding.empty() ? -1 : ids_remove_padding[0];
  return {{T < 0 ? -1 : 2 * T}};
}

std::vector<paddle::DataType> UpdateAttnMaskOffsetsDtype(
    const paddle::DataType&, const paddle::DataType&, const paddle::DataType&,
    const paddle::DataType&, const paddle::DataType&, const paddle::DataType&,
    const paddle::DataType&, const paddle::DataType&, const paddle::DataType&,
    const paddle::DataType&) {
  return {paddle::DataType::INT32};
}

PD_BUILD_OP(update_attn_mask_offsets)
    .Inputs({MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(UpdateAttnMaskOffsets))
    .SetInferShapeFn(PD_INFER_SHAPE(UpdateAttnMaskOffsetsShape))
    .SetInferDtypeFn(PD_INFER_DTYPE(UpdateAttnMaskOffsetsDtype));

#else

// The shadow form: 8 tensors, no cursor and no rollback; a decode token's
// mask end is seq_lens_decoder + 1 + j.
std::vector<paddle::Tensor> UpdateAttnMaskOffsetsShadow(
    const paddle::Tensor& ids_remove_padding, const paddle::Tensor& seq_lens_this_time,
    const paddle::Tensor& seq_lens_encoder, const paddle::Tensor& seq_lens_decoder,
    const paddle::Tensor& cu_seqlens_q, const paddle::Tensor& attn_mask_offsets_full,
    const paddle::Tensor& is_block_step, paddle::Tensor& decode_states) {
  mtp::ArgChecker c(kOp);
  const int64_t bsz = check_inputs(c, ids_remove_padding, seq_lens_this_time, seq_lens_encoder,
                                   seq_lens_decoder, cu_seqlens_q, attn_mask_offsets_full,
                                   nullptr, is_block_step, decode_states, nullptr);
  paddle::Tensor out = mtp::fresh_mask_output(ids_remove_padding.shape()[0], c.place());
  run(c,
      mtp::shadow_mask_views(ids_remove_padding, seq_lens_this_time, seq_lens_encoder,
                             seq_lens_decoder, cu_seqlens_q, attn_mask_offsets_full,
                             is_block_step, decode_states, out),
      bsz, seq_lens_this_time);
  return {out};
}

std::vector<std::vector<int64_t>> UpdateAttnMaskOffsetsShadowShape(
    const std::vector<int64_t>& ids_remove_padding, const std::vector<int64_t>&,
    const std::vector<int64_t>&, const std::vector<int64_t>&, const std::vector<int64_t>&,
    const std::vector<int64_t>&, const std::vector<int64_t>&, const std::vector<int64_t>&) {
  const int64_t T = ids_remove_padding.empty() ? -1 : ids_remove_padding[0];
  return {{T < 0 ? -1 : 2 * T}};
}

std::vector<paddle::DataType> UpdateAttnMaskOffsetsShadowDtype(
    const paddle::DataType&, const paddle::DataType&, const paddle::DataType&,
    const paddle::DataType&, const paddle::DataType&, const paddle::DataType&,
    const paddle::DataType&, const paddle::DataType&) {
  return {paddle::DataType::INT32};
}

PD_BUILD_OP(update_attn_mask_offsets)
    .Inputs({MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(UpdateAttnMaskOffsetsShadow))
    .SetInferShapeFn(PD_INFER_SHAPE(UpdateAttnMaskOffsetsShadowShape))
    .SetInferDtypeFn(PD_INFER_DTYPE(UpdateAttnMaskOffsetsShadowDtype));

#endif
