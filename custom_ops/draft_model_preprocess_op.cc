// Paddle binding of draft_model_preprocess: boundary checks, raw views, and
// dispatch to the CPU loop or the CUDA kernel. The rules themselves live in
// mtp_bookkeeping.h; the registered names come from op_signatures.h, which is
// rendered from fastdeploy_mtp/signature.py.
#include "gpu_record.h"
#include "mtp_cpu.h"
#include "failure_messages.h"
#include "op_signatures.h"
#include "tensor_checks.h"
#include "tensor_views.h"
#ifdef PADDLE_WITH_CUDA
#include "mtp_kernels.h"
#endif

namespace {

constexpr const char* kOp = "draft_model_preprocess";
constexpr mtp::Access W = mtp::Access::kWritten, R = mtp::Access::kRead,
                      U = mtp::Access::kUnread;

// The rollback and recompute forms' checks, in input order; `recompute` is the recompute form's
// recompute_token_num (null in the rollback form, which never reads
// base_model_seq_lens_this_time).
void check_inputs(mtp::ArgChecker& c, int64_t bsz, const paddle::Tensor& draft_tokens,
                  const paddle::Tensor& input_ids, const paddle::Tensor& stop_flags,
                  const paddle::Tensor& seq_lens_this_time,
                  const paddle::Tensor& seq_lens_encoder, const paddle::Tensor& seq_lens_decoder,
                  const paddle::Tensor& step_idx, const paddle::Tensor& not_need_stop,
                  const paddle::Tensor& is_block_step, const paddle::Tensor& batch_drop,
                  const paddle::Tensor& pre_ids, const paddle::Tensor& mask_rollback,
                  const paddle::Tensor* recompute, const paddle::Tensor& accept_tokens,
                  const paddle::Tensor& accept_num,
                  const paddle::Tensor& base_model_seq_lens_this_time,
                  const paddle::Tensor& base_model_seq_lens_encoder,
                  const paddle::Tensor& base_model_seq_lens_decoder,
                  const paddle::Tensor& base_model_step_idx,
                  const paddle::Tensor& base_model_stop_flags,
                  const paddle::Tensor& base_model_is_block_step,
                  const paddle::Tensor& base_model_draft_tokens) {
  using paddle::DataType;
  c.vector(seq_lens_this_time, "seq_lens_this_time", DataType::INT32, bsz, W);
  c.matrix(draft_tokens, "draft_tokens", DataType::INT64, bsz, W);
  c.matrix(input_ids, "input_ids", DataType::INT64, bsz, W);
  c.vector(stop_flags, "stop_flags", DataType::BOOL, bsz, W);
  c.vector(seq_lens_encoder, "seq_lens_encoder", DataType::INT32, bsz, W);
  c.vector(seq_lens_decoder, "seq_lens_decoder", DataType::INT32, bsz, W);
  c.vector(step_idx, "step_idx", DataType::INT64, bsz, W);
  c.vector(is_block_step, "is_block_step", DataType::BOOL, bsz, W);
  c.vector(batch_drop, "batch_drop", DataType::BOOL, bsz, W);
  c.matrix(pre_ids, "pre_ids", DataType::INT64, bsz, W);
  c.vector(mask_rollback, "mask_rollback", DataType::INT32, bsz, W);
  if (recompute != nullptr) {
    const paddle::Tensor& recompute_token_num = *recompute;
    c.vector(recompute_token_num, "recompute_token_num", DataType::INT32, bsz, W);
  }
  c.matrix(accept_tokens, "accept_tokens", DataType::INT64, bsz, R);
  c.vector(accept_num, "accept_num", DataType::INT32, bsz, R);
  c.vector(base_model_seq_lens_this_time, "base_model_seq_lens_this_time", DataType::INT32, bsz,
           recompute != nullptr ? R : U);
  c.vector(base_model_seq_lens_encoder, "base_model_seq_lens_encoder", DataType::INT32, bsz, U);
  c.vector(base_model_seq_lens_decoder, "base_model_seq_lens_decoder", DataType::INT32, bsz, R);
  c.vector(base_model_step_idx, "base_model_step_idx", DataType::INT64, bsz, R);
  c.vector(base_model_stop_flags, "base_model_stop_flags", DataType::BOOL, bsz, R);
  c.vector(base_model_is_block_step, "base_model_is_block_step", DataType::BOOL, bsz, R);
  c.matrix(base_model_draft_tokens, "base_model_draft_tokens", DataType::INT64, bsz, W);
  c.host_or_device_flag(not_need_stop, "not_need_stop");
  c.no_overlap();
}

// Runs the checked views on the CPU or the GPU and sets not_need_stop.
void run(const mtp::ArgChecker& c, const mtp::PreprocessTensors& t,
         const mtp::PreprocessAttrs& attrs, int64_t bsz, paddle::Tensor& not_need_stop,
         const paddle::Tensor& stream_of) {
  mtp::BatchResult r;
  if (c.place().GetType() == phi::AllocationType::CPU) {
    r = mtp::preprocess_batch(t, attrs, bsz);
  } else {
#ifdef PADDLE_WITH_CUDA
    const mtp::DeviceScope on_device(c.place().GetDeviceId(), kOp);
    cudaStream_t stream = stream_of.stream();
    mtp::BatchResult* pending = mtp::pending_record(c.place(), stream, kOp);
    const mtp::GridScratch grid = mtp::grid_scratch(c.place(), stream, kOp);
    if (!not_need_stop.is_cpu()) {
      // Asynchronous: no copy, no wait; a failure waits on the device.
      mtp::cuda_check(mtp::launch_preprocess(t, attrs, bsz, not_need_stop.data<bool>(),
                                             {pending, nullptr}, grid, stream),
                      kOp, "kernel launch");
      return;
    }
    const mtp::Report report = mtp::thread_report(c.place(), stream, kOp);
    mtp::cuda_check(mtp::launch_preprocess(t, attrs, bsz, nullptr,
                                           {pending, mtp::arm_report(report)}, grid, stream),
                    kOp, "kernel launch");
    r = mtp::read_report(report, stream, kOp);
#else
    (void)stream_of;
    mtp::raise(kOp, ": this build has no CUDA support; tensors are on ",
               mtp::place_name(c.place()));
#endif
  }
  mtp::raise_if_failed(kOp, r);
  *not_need_stop.data<bool>() = r.any_running != 0;
}

}  // namespace

#if !defined(MTP_FORM_RECOMPUTE) && !defined(MTP_FORM_SHADOW)

// The rollback form (the default): 21 tensors.
void DraftModelPreprocess(paddle::Tensor& draft_tokens, paddle::Tensor& input_ids,
                          paddle::Tensor& stop_flags, paddle::Tensor& seq_lens_this_time,
                          paddle::Tensor& seq_lens_encoder, paddle::Tensor& seq_lens_decoder,
                          paddle::Tensor& step_idx, paddle::Tensor& not_need_stop,
                          paddle::Tensor& is_block_step, paddle::Tensor& batch_drop,
                          paddle::Tensor& pre_ids, paddle::Tensor& mask_rollback,
                          const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
                          const paddle::Tensor& base_model_seq_lens_this_time,
                          const paddle::Tensor& base_model_seq_lens_encoder,
                          const paddle::Tensor& base_model_seq_lens_decoder,
                          const paddle::Tensor& base_model_step_idx,
                          const paddle::Tensor& base_model_stop_flags,
                          const paddle::Tensor& base_model_is_block_step,
                          paddle::Tensor& base_model_draft_tokens, int num_model_step,
                          bool truncate_first_token, bool splitwise_prefill,
                          bool kvcache_scheduler_v1) {
  MTP_CHECK(num_model_step >= 1, kOp, ": num_model_step must be >= 1, got ", num_model_step);
  mtp::ArgChecker c(kOp);
  const int64_t bsz = c.length_only(seq_lens_this_time, "seq_lens_this_time");
  check_inputs(c, bsz, draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder,
               seq_lens_decoder, step_idx, not_need_stop, is_block_step, batch_drop, pre_ids,
               mask_rollback, nullptr, accept_tokens, accept_num, base_model_seq_lens_this_time,
               base_model_seq_lens_encoder, base_model_seq_lens_decoder, base_model_step_idx,
               base_model_stop_flags, base_model_is_block_step, base_model_draft_tokens);
  const mtp::PreprocessTensors t = mtp::preprocess_views(
      draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder,
      seq_lens_decoder, step_idx, is_block_step, batch_drop, pre_ids, mask_rollback,
      accept_tokens, accept_num, base_model_seq_lens_decoder, base_model_step_idx,
      base_model_stop_flags, base_model_is_block_step, base_model_draft_tokens);
  run(c, t, {num_model_step, truncate_first_token, splitwise_prefill, kvcache_scheduler_v1}, bsz,
      not_need_stop, draft_tokens);
}

PD_BUILD_OP(draft_model_preprocess)
    .Inputs({MTP_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocess));

#elif defined(MTP_FORM_RECOMPUTE)

// The recompute form: 22 tensors. FastDeploy registers is_block_step,
// mask_rollback, recompute_token_num and base_model_draft_tokens as plain
// inputs and writes them all the same; registered the same way here, they
// come by const reference and are written through their views.
void DraftModelPreprocessRecompute(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop,
    const paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids,
    const paddle::Tensor& mask_rollback, const paddle::Tensor& recompute_token_num,
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
    const paddle::Tensor& base_model_seq_lens_this_time,
    const paddle::Tensor& base_model_seq_lens_encoder,
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx,
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step,
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool truncate_first_token,
    bool splitwise_prefill, bool kvcache_scheduler_v1) {
  MTP_CHECK(num_model_step >= 1, kOp, ": num_model_step must be >= 1, got ", num_model_step);
  mtp::ArgChecker c(kOp);
  const int64_t bsz = c.length_only(seq_lens_this_time, "seq_lens_this_time");
  check_inputs(c, bsz, draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder,
               seq_lens_decoder, step_idx, not_need_stop, is_block_step, batch_drop, pre_ids,
               mask_rollback, &recompute_token_num, accept_tokens, accept_num,
               base_model_seq_lens_this_time, base_model_seq_lens_encoder,
               base_model_seq_lens_decoder, base_model_step_idx, base_model_stop_flags,
               base_model_is_block_step, base_model_draft_tokens);
  const mtp::PreprocessTensors t = mtp::recompute_views(
      draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder,
      seq_lens_decoder, step_idx, is_block_step, batch_drop, pre_ids, mask_rollback,
      recompute_token_num, accept_tokens, accept_num, base_model_seq_lens_this_time,
      base_model_seq_lens_decoder, base_model_step_idx, base_model_stop_flags,
      base_model_is_block_step, base_model_draft_tokens);
  run(c, t, {num_model_step, truncate_first_token, splitwise_prefill, kvcache_scheduler_v1}, bsz,
      not_need_stop, draft_tokens);
}

PD_BUILD_OP(draft_model_preprocess)
    .Inputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocessRecompute));

#else

// The shadow form: 17 tensors, the base model named the target model.
// FastDeploy registers target_model_draft_tokens as a plain input and writes
// it all the same; registered the same way here, it comes by const reference.
void DraftModelPreprocessShadow(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop,
    paddle::Tensor& pre_ids, const paddle::Tensor& accept_tokens,
    const paddle::Tensor& accept_num, const paddle::Tensor& target_model_seq_lens_encoder,
    const paddle::Tensor& target_model_seq_lens_decoder,
    const paddle::Tensor& target_model_step_idx, const paddle::Tensor& target_model_stop_flags,
    const paddle::Tensor& max_dec_len, const paddle::Tensor& target_model_draft_tokens,
    int num_model_step, bool is_splitwise_prefill) {
  using paddle::DataType;
  MTP_CHECK(num_model_step >= 1, kOp, ": num_model_step must be >= 1, got ", num_model_step);
  mtp::ArgChecker c(kOp);
  const int64_t bsz = c.length_only(seq_lens_this_time, "seq_lens_this_time");
  c.vector(seq_lens_this_time, "seq_lens_this_time", DataType::INT32, bsz, W);
  c.matrix(draft_tokens, "draft_tokens", DataType::INT64, bsz, W);
  c.matrix(input_ids, "input_ids", DataType::INT64, bsz, W);
  c.vector(stop_flags, "stop_flags", DataType::BOOL, bsz, W);
  c.vector(seq_lens_encoder, "seq_lens_encoder", DataType::INT32, bsz, W);
  c.vector(seq_lens_decoder, "seq_lens_decoder", DataType::INT32, bsz, W);
  c.vector(step_idx, "step_idx", DataType::INT64, bsz, W);
  c.matrix(pre_ids, "pre_ids", DataType::INT64, bsz, W);
  c.matrix(accept_tokens, "accept_tokens", DataType::INT64, bsz, R);
  c.vector(accept_num, "accept_num", DataType::INT32, bsz, R);
  c.vector(target_model_seq_lens_encoder, "target_model_seq_lens_encoder", DataType::INT32, bsz,
           U);
  c.vector(target_model_seq_lens_decoder, "target_model_seq_lens_decoder", DataType::INT32, bsz,
           R);
  c.vector(target_model_step_idx, "target_model_step_idx", DataType::INT64, bsz, R);
  c.vector(target_model_stop_flags, "target_model_stop_flags", DataType::BOOL, bsz, R);
  c.vector(max_dec_len, "max_dec_len", DataType::INT64, bsz, R);
  c.matrix(target_model_draft_tokens, "target_model_draft_tokens", DataType::INT64, bsz, W);
  c.host_or_device_flag(not_need_stop, "not_need_stop");
  c.no_overlap();
  const mtp::PreprocessTensors t = mtp::shadow_views(
      draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder,
      seq_lens_decoder, step_idx, pre_ids, accept_tokens, accept_num,
      target_model_seq_lens_decoder, target_model_step_idx, target_model_stop_flags, max_dec_len,
      target_model_draft_tokens);
  // The shadow form has no truncate_first_token (its first token goes to E - 1)
  // and no kvcache_scheduler_v1 (nothing is parked or dropped).
  run(c, t, {num_model_step, true, is_splitwise_prefill, false}, bsz, not_need_stop,
      draft_tokens);
}

PD_BUILD_OP(draft_model_preprocess)
    .Inputs({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocessShadow));

#endif
