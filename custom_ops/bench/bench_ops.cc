// Benchmark-only ops (GPU builds): the floor, the empty launch, a
// FastDeploy-shaped baseline of draft_model_preprocess, a captured step's
// launches agreeing only, and a late writer for the GPU tests.
#include "../gpu_record.h"
#include "../mask_output.h"
#include "../raise.h"
#include "../op_signatures.h"
#include "../tensor_views.h"
#include "agreement_floor.h"
#include "bench_kernels.h"

namespace {

struct PinnedByte {
  char* host = nullptr;
  PinnedByte() { cudaHostAlloc(&host, 1, cudaHostAllocDefault); }
};

}  // namespace

// Launch one empty kernel, copy one byte to the host, synchronise.
void BenchFloor(paddle::Tensor& x) {
  thread_local PinnedByte byte;
  cudaStream_t s = x.stream();
  mtp::cuda_check(mtp_bench::launch_empty(s), "bench_floor", "launch");
  mtp::cuda_check(cudaMemcpyAsync(byte.host, x.data(), 1, cudaMemcpyDeviceToHost, s),
                  "bench_floor", "copy");
  mtp::cuda_check(cudaStreamSynchronize(s), "bench_floor", "sync");
}

// Launch one empty kernel and return.
void BenchEmpty(paddle::Tensor& x) {
  mtp::cuda_check(mtp_bench::launch_empty(x.stream()), "bench_empty", "launch");
}

namespace {

// FastDeploy's launch of the checked-nothing kernel: the flag stays on the
// device in a captured step, else goes there and back as Paddle copies.
void run_baseline_preprocess(const mtp::PreprocessTensors& t, const mtp::PreprocessAttrs& a,
                             const paddle::Tensor& seq_lens_this_time,
                             paddle::Tensor& not_need_stop, const paddle::Tensor& draft_tokens,
                             int threads = 512) {
  if (!not_need_stop.is_cpu()) {  // a captured step's form: the flag stays on the device
    mtp::cuda_check(mtp_bench::launch_baseline_preprocess(t, a, seq_lens_this_time.shape()[0],
                                                          not_need_stop.data<bool>(),
                                                          draft_tokens.stream(), threads),
                    "bench_baseline_preprocess", "launch");
    return;
  }
  // As FastDeploy does: the host flag goes to the device and back as Paddle copies.
  paddle::Tensor flag = not_need_stop.copy_to(draft_tokens.place(), false);
  mtp::cuda_check(mtp_bench::launch_baseline_preprocess(t, a, seq_lens_this_time.shape()[0],
                                                        flag.data<bool>(), draft_tokens.stream(),
                                                        threads),
                  "bench_baseline_preprocess", "launch");
  paddle::Tensor back = flag.copy_to(paddle::CPUPlace(), true);
  *not_need_stop.data<bool>() = back.data<bool>()[0];
}

}  // namespace

void BenchBaselinePreprocess(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop,
    paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids,
    paddle::Tensor& mask_rollback, const paddle::Tensor& accept_tokens,
    const paddle::Tensor& accept_num, const paddle::Tensor&, const paddle::Tensor&,
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx,
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step,
    paddle::Tensor& base_model_draft_tokens, int num_model_step, bool truncate_first_token,
    bool splitwise_prefill, bool kvcache_scheduler_v1) {
  const mtp::PreprocessTensors t = mtp::preprocess_views(
      draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder,
      seq_lens_decoder, step_idx, is_block_step, batch_drop, pre_ids, mask_rollback,
      accept_tokens, accept_num, base_model_seq_lens_decoder, base_model_step_idx,
      base_model_stop_flags, base_model_is_block_step, base_model_draft_tokens);
  const mtp::PreprocessAttrs a{num_model_step, truncate_first_token, splitwise_prefill,
                               kvcache_scheduler_v1};
  run_baseline_preprocess(t, a, seq_lens_this_time, not_need_stop, draft_tokens);
}

// The recompute form's: FastDeploy's undeclared written tensors come by const
// reference, as in the op's binding.
void BenchBaselinePreprocessRecompute(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop,
    const paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids,
    const paddle::Tensor& mask_rollback, const paddle::Tensor& recompute_token_num,
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
    const paddle::Tensor& base_model_seq_lens_this_time, const paddle::Tensor&,
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx,
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step,
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool truncate_first_token,
    bool splitwise_prefill, bool kvcache_scheduler_v1) {
  const mtp::PreprocessTensors t = mtp::recompute_views(
      draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder,
      seq_lens_decoder, step_idx, is_block_step, batch_drop, pre_ids, mask_rollback,
      recompute_token_num, accept_tokens, accept_num, base_model_seq_lens_this_time,
      base_model_seq_lens_decoder, base_model_step_idx, base_model_stop_flags,
      base_model_is_block_step, base_model_draft_tokens);
  const mtp::PreprocessAttrs a{num_model_step, truncate_first_token, splitwise_prefill,
                               kvcache_scheduler_v1};
  run_baseline_preprocess(t, a, seq_lens_this_time, not_need_stop, draft_tokens);
}

// Adds 1 to every element of the int32 tensor x, late (launch_late_bump).
// The shadow form's, launched as FastDeploy launches it: one block of 1024
// threads.
void BenchBaselinePreprocessShadow(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop,
    paddle::Tensor& pre_ids, const paddle::Tensor& accept_tokens,
    const paddle::Tensor& accept_num, const paddle::Tensor&,
    const paddle::Tensor& target_model_seq_lens_decoder,
    const paddle::Tensor& target_model_step_idx, const paddle::Tensor& target_model_stop_flags,
    const paddle::Tensor& max_dec_len, const paddle::Tensor& target_model_draft_tokens,
    int num_model_step, bool is_splitwise_prefill) {
  const mtp::PreprocessTensors t = mtp::shadow_views(
      draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder,
      seq_lens_decoder, step_idx, pre_ids, accept_tokens, accept_num,
      target_model_seq_lens_decoder, target_model_step_idx, target_model_stop_flags, max_dec_len,
      target_model_draft_tokens);
  const mtp::PreprocessAttrs a{num_model_step, true, is_splitwise_prefill, false};
  run_baseline_preprocess(t, a, seq_lens_this_time, not_need_stop, draft_tokens, 1024);
}

// The shadow form's update_attn_mask_offsets (8 tensors), launched as the others.
std::vector<paddle::Tensor> BenchBaselineMaskShadow(
    const paddle::Tensor& ids_remove_padding, const paddle::Tensor& seq_lens_this_time,
    const paddle::Tensor& seq_lens_encoder, const paddle::Tensor& seq_lens_decoder,
    const paddle::Tensor& cu_seqlens_q, const paddle::Tensor& attn_mask_offsets_full,
    const paddle::Tensor& is_block_step, paddle::Tensor& decode_states) {
  paddle::Tensor out =
      mtp::fresh_mask_output(ids_remove_padding.shape()[0], ids_remove_padding.place());
  const mtp::MaskTensors t = mtp::shadow_mask_views(
      ids_remove_padding, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, cu_seqlens_q,
      attn_mask_offsets_full, is_block_step, decode_states, out);
  mtp::cuda_check(mtp_bench::launch_baseline_mask(t, seq_lens_this_time.shape()[0],
                                                  ids_remove_padding.stream()),
                  "bench_baseline_mask_shadow", "launch");
  return {out};
}

std::vector<paddle::Tensor> BenchBaselineMask(
    const paddle::Tensor& ids_remove_padding, const paddle::Tensor& seq_lens_this_time,
    const paddle::Tensor& seq_lens_encoder, const paddle::Tensor& seq_lens_decoder,
    const paddle::Tensor& cu_seqlens_q, const paddle::Tensor& attn_mask_offsets_full,
    paddle::Tensor& attn_mask_offsets_decoder, const paddle::Tensor& is_block_step,
    paddle::Tensor& decode_states, paddle::Tensor& mask_rollback) {
  paddle::Tensor out =
      mtp::fresh_mask_output(ids_remove_padding.shape()[0], ids_remove_padding.place());
  const mtp::MaskTensors t = mtp::mask_views(
      ids_remove_padding, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, cu_seqlens_q,
      attn_mask_offsets_full, attn_mask_offsets_decoder, is_block_step, decode_states,
      mask_rollback, out);
  mtp::cuda_check(mtp_bench::launch_baseline_mask(t, seq_lens_this_time.shape()[0],
                                                  ids_remove_padding.stream()),
                  "bench_baseline_mask", "launch");
  return {out};
}

void BenchLateBump(paddle::Tensor& x) {
  mtp::cuda_check(mtp_bench::launch_late_bump(x.data<int32_t>(), x.numel(), x.stream()),
                  "bench_late_bump", "launch");
}

// One-tensor ops: raise_pending_errors' signature (x, written in place).
PD_BUILD_OP(bench_floor)
    .Inputs({MTP_RAISE_PENDING_ERRORS_INPUTS})
    .Outputs({MTP_RAISE_PENDING_ERRORS_OUTPUTS})
    .SetInplaceMap({MTP_RAISE_PENDING_ERRORS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchFloor));
PD_BUILD_OP(bench_empty)
    .Inputs({MTP_RAISE_PENDING_ERRORS_INPUTS})
    .Outputs({MTP_RAISE_PENDING_ERRORS_OUTPUTS})
    .SetInplaceMap({MTP_RAISE_PENDING_ERRORS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchEmpty));
PD_BUILD_OP(bench_late_bump)
    .Inputs({MTP_RAISE_PENDING_ERRORS_INPUTS})
    .Outputs({MTP_RAISE_PENDING_ERRORS_OUTPUTS})
    .SetInplaceMap({MTP_RAISE_PENDING_ERRORS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchLateBump));

#define PREPROCESS_PARAMS                                                                     \
  paddle::Tensor &draft_tokens, paddle::Tensor &, paddle::Tensor &,                             \
      paddle::Tensor &seq_lens_this_time,                                                       \
      paddle::Tensor &, paddle::Tensor &, paddle::Tensor &, paddle::Tensor &, paddle::Tensor &, \
      paddle::Tensor &, paddle::Tensor &, paddle::Tensor &, const paddle::Tensor &,             \
      const paddle::Tensor &, const paddle::Tensor &, const paddle::Tensor &,                   \
      const paddle::Tensor &, const paddle::Tensor &, const paddle::Tensor &,                   \
      const paddle::Tensor &, paddle::Tensor &, int, bool, bool, bool
#define MASK_PARAMS                                                                          \
  const paddle::Tensor &ids_remove_padding, const paddle::Tensor &seq_lens_this_time,         \
      const paddle::Tensor &, const paddle::Tensor &, const paddle::Tensor &,                  \
      const paddle::Tensor &attn_mask_offsets_full, const paddle::Tensor &,                    \
      const paddle::Tensor &, const paddle::Tensor &, const paddle::Tensor &

// The floors with the ops' own signatures: Paddle's dispatch of 21 (or 10)
// tensors is part of any op that has them, and so is allocating
// update_attn_mask_offsets' fresh [2 * T] output.
void BenchFloorPreprocess(PREPROCESS_PARAMS) { BenchFloor(draft_tokens); }
void BenchEmptyPreprocess(PREPROCESS_PARAMS) { BenchEmpty(draft_tokens); }
static paddle::Tensor fresh_output(const paddle::Tensor& ids_remove_padding) {
  return mtp::fresh_mask_output(ids_remove_padding.shape()[0], ids_remove_padding.place());
}
std::vector<paddle::Tensor> BenchFloorMask(MASK_PARAMS) {
  paddle::Tensor out = fresh_output(ids_remove_padding);
  BenchFloor(const_cast<paddle::Tensor&>(seq_lens_this_time));
  return {out};
}
std::vector<paddle::Tensor> BenchEmptyMask(MASK_PARAMS) {
  paddle::Tensor out = fresh_output(ids_remove_padding);
  BenchEmpty(const_cast<paddle::Tensor&>(seq_lens_this_time));
  return {out};
}

// Each op's launch as the op would make it for these tensors, with a kernel
// that only agrees (agreement_floor.h): the floor the launch shapes put under
// a captured step. Their grid scratch, and the word the leaders write their
// verdict to, are one set for the process (the benchmark runs on one stream
// of one device), made by the first call, which must come before any capture.
static mtp::GridScratch agreement_scratch(unsigned** sink) {
  static mtp::GridScratch scratch{nullptr, nullptr};
  static unsigned* word = nullptr;
  if (scratch.slots == nullptr) {
    const char* op = "bench_agreement";
    mtp::cuda_check(cudaMalloc(&scratch.slots, mtp::kGridSlots * sizeof *scratch.slots), op,
                    "cudaMalloc");
    mtp::cuda_check(cudaMalloc(&scratch.finished, 2 * sizeof *scratch.finished), op,
                    "cudaMalloc");
    mtp::cuda_check(cudaMemset(scratch.finished, 0, 2 * sizeof *scratch.finished), op,
                    "cudaMemset");
    word = scratch.finished + 1;
  }
  *sink = word;
  return scratch;
}
void BenchAgreementPreprocess(PREPROCESS_PARAMS) {
  unsigned* sink = nullptr;
  const mtp::GridScratch scratch = agreement_scratch(&sink);
  mtp::cuda_check(mtp::launch_preprocess_agreement(seq_lens_this_time.shape()[0], sink, scratch,
                                                   draft_tokens.stream()),
                  "bench_agreement_preprocess", "launch");
}
std::vector<paddle::Tensor> BenchAgreementMask(MASK_PARAMS) {
  paddle::Tensor out = fresh_output(ids_remove_padding);
  unsigned* sink = nullptr;
  const mtp::GridScratch scratch = agreement_scratch(&sink);
  mtp::cuda_check(mtp::launch_mask_agreement(ids_remove_padding.shape()[0],
                                             attn_mask_offsets_full.shape()[1],
                                             seq_lens_this_time.shape()[0], sink, scratch,
                                             ids_remove_padding.stream()),
                  "bench_agreement_mask", "launch");
  return {out};
}

// The ops' own registered signatures (op_signatures.h, from signature.py),
// shared by the baseline and the floors.
#define PREPROCESS_INPUTS {MTP_DRAFT_MODEL_PREPROCESS_INPUTS}
#define PREPROCESS_OUTPUTS {MTP_DRAFT_MODEL_PREPROCESS_OUTPUTS}
#define PREPROCESS_INPLACE {MTP_DRAFT_MODEL_PREPROCESS_INPLACE}
#define PREPROCESS_ATTRS {MTP_DRAFT_MODEL_PREPROCESS_ATTRS}
#define MASK_INPUTS {MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS}
#define MASK_OUTPUTS {MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS}
#define MASK_INPLACE {MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE}

PD_BUILD_OP(bench_baseline_preprocess)
    .Inputs(PREPROCESS_INPUTS)
    .Outputs(PREPROCESS_OUTPUTS)
    .Attrs(PREPROCESS_ATTRS)
    .SetInplaceMap(PREPROCESS_INPLACE)
    .SetKernelFn(PD_KERNEL(BenchBaselinePreprocess));
PD_BUILD_OP(bench_baseline_preprocess_recompute)
    .Inputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselinePreprocessRecompute));
PD_BUILD_OP(bench_baseline_preprocess_shadow)
    .Inputs({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_INPUTS})
    .Outputs({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_OUTPUTS})
    .Attrs({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_ATTRS})
    .SetInplaceMap({MTP_SHADOW_DRAFT_MODEL_PREPROCESS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselinePreprocessShadow));
PD_BUILD_OP(bench_baseline_mask_shadow)
    .Inputs({MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_INPUTS})
    .Outputs({MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS})
    .SetInplaceMap({MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_INPLACE})
    .SetKernelFn(PD_KERNEL(BenchBaselineMaskShadow));
PD_BUILD_OP(bench_floor_preprocess)
    .Inputs(PREPROCESS_INPUTS)
    .Outputs(PREPROCESS_OUTPUTS)
    .Attrs(PREPROCESS_ATTRS)
    .SetInplaceMap(PREPROCESS_INPLACE)
    .SetKernelFn(PD_KERNEL(BenchFloorPreprocess));
PD_BUILD_OP(bench_empty_preprocess)
    .Inputs(PREPROCESS_INPUTS)
    .Outputs(PREPROCESS_OUTPUTS)
    .Attrs(PREPROCESS_ATTRS)
    .SetInplaceMap(PREPROCESS_INPLACE)
    .SetKernelFn(PD_KERNEL(BenchEmptyPreprocess));
PD_BUILD_OP(bench_baseline_mask)
    .Inputs(MASK_INPUTS)
    .Outputs(MASK_OUTPUTS)
    .SetInplaceMap(MASK_INPLACE)
    .SetKernelFn(PD_KERNEL(BenchBaselineMask));
PD_BUILD_OP(bench_floor_mask)
    .Inputs(MASK_INPUTS)
    .Outputs(MASK_OUTPUTS)
    .SetInplaceMap(MASK_INPLACE)
    .SetKernelFn(PD_KERNEL(BenchFloorMask));
PD_BUILD_OP(bench_empty_mask)
    .Inputs(MASK_INPUTS)
    .Outputs(MASK_OUTPUTS)
    .SetInplaceMap(MASK_INPLACE)
    .SetKernelFn(PD_KERNEL(BenchEmptyMask));
PD_BUILD_OP(bench_agreement_preprocess)
    .Inputs(PREPROCESS_INPUTS)
    .Outputs(PREPROCESS_OUTPUTS)
    .Attrs(PREPROCESS_ATTRS)
    .SetInplaceMap(PREPROCESS_INPLACE)
    .SetKernelFn(PD_KERNEL(BenchAgreementPreprocess));
PD_BUILD_OP(bench_agreement_mask)
    .Inputs(MASK_INPUTS)
    .Outputs(MASK_OUTPUTS)
    .SetInplaceMap(MASK_INPLACE)
    .SetKernelFn(PD_KERNEL(BenchAgreementMask));
