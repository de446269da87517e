// Benchmark-only ops (GPU builds): the floor, the empty launch, and a
// FastDeploy-shaped baseline of draft_model_preprocess.
#include "../gpu_record.h"
#include "../mask_output.h"
#include "../op_error.h"
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
  const mtp::PreprocessTensors t{
      draft_tokens.data<int64_t>(), draft_tokens.shape()[1],
      input_ids.data<int64_t>(), input_ids.shape()[1],
      stop_flags.data<bool>(), seq_lens_this_time.data<int32_t>(),
      seq_lens_encoder.data<int32_t>(), seq_lens_decoder.data<int32_t>(),
      step_idx.data<int64_t>(), is_block_step.data<bool>(), batch_drop.data<bool>(),
      pre_ids.data<int64_t>(), pre_ids.shape()[1], mask_rollback.data<int32_t>(),
      accept_tokens.data<int64_t>(), accept_tokens.shape()[1], accept_num.data<int32_t>(),
      base_model_seq_lens_decoder.data<int32_t>(), base_model_step_idx.data<int64_t>(),
      base_model_stop_flags.data<bool>(), base_model_is_block_step.data<bool>(),
      base_model_draft_tokens.data<int64_t>(), base_model_draft_tokens.shape()[1]};
  const mtp::PreprocessAttrs a{num_model_step, truncate_first_token, splitwise_prefill,
                               kvcache_scheduler_v1};
  // As FastDeploy does: the host flag goes to the device and back as Paddle copies.
  paddle::Tensor flag = not_need_stop.copy_to(draft_tokens.place(), false);
  mtp::cuda_check(mtp_bench::launch_baseline_preprocess(t, a, seq_lens_this_time.shape()[0],
                                                        flag.data<bool>(), draft_tokens.stream()),
                  "bench_baseline_preprocess", "launch");
  paddle::Tensor back = flag.copy_to(paddle::CPUPlace(), true);
  *not_need_stop.data<bool>() = back.data<bool>()[0];
}

PD_BUILD_OP(bench_floor).Inputs({"x"}).Outputs({"x_out"}).SetInplaceMap({{"x", "x_out"}})
    .SetKernelFn(PD_KERNEL(BenchFloor));
PD_BUILD_OP(bench_empty).Inputs({"x"}).Outputs({"x_out"}).SetInplaceMap({{"x", "x_out"}})
    .SetKernelFn(PD_KERNEL(BenchEmpty));

#define PREPROCESS_PARAMS                                                                     \
  paddle::Tensor &draft_tokens, paddle::Tensor &, paddle::Tensor &, paddle::Tensor &,           \
      paddle::Tensor &, paddle::Tensor &, paddle::Tensor &, paddle::Tensor &, paddle::Tensor &, \
      paddle::Tensor &, paddle::Tensor &, paddle::Tensor &, const paddle::Tensor &,             \
      const paddle::Tensor &, const paddle::Tensor &, const paddle::Tensor &,                   \
      const paddle::Tensor &, const paddle::Tensor &, const paddle::Tensor &,                   \
      const paddle::Tensor &, paddle::Tensor &, int, bool, bool, bool
#define MASK_PARAMS                                                                           \
  const paddle::Tensor &ids, const paddle::Tensor &lens, const paddle::Tensor &,                \
      const paddle::Tensor &, const paddle::Tensor &, const paddle::Tensor &,                   \
      const paddle::Tensor &, const paddle::Tensor &, const paddle::Tensor &,                   \
      const paddle::Tensor &

// The floors with the ops' own signatures: Paddle's dispatch of 21 (or 10)
// tensors is part of any op that has them, and so is allocating
// update_attn_mask_offsets' fresh [2 * T] output.
void BenchFloorPreprocess(PREPROCESS_PARAMS) { BenchFloor(draft_tokens); }
void BenchEmptyPreprocess(PREPROCESS_PARAMS) { BenchEmpty(draft_tokens); }
static paddle::Tensor fresh_output(const paddle::Tensor& ids) {
  return mtp::fresh_mask_output(ids.shape()[0], ids.place());
}
std::vector<paddle::Tensor> BenchFloorMask(MASK_PARAMS) {
  paddle::Tensor out = fresh_output(ids);
  BenchFloor(const_cast<paddle::Tensor&>(lens));
  return {out};
}
std::vector<paddle::Tensor> BenchEmptyMask(MASK_PARAMS) {
  paddle::Tensor out = fresh_output(ids);
  BenchEmpty(const_cast<paddle::Tensor&>(lens));
  return {out};
}

// draft_model_preprocess's signature, shared by the baseline and its floors.
#define PREPROCESS_INPUTS                                                                       \
  {"draft_tokens", "input_ids", "stop_flags", "seq_lens_this_time", "seq_lens_encoder",          \
   "seq_lens_decoder", "step_idx", "not_need_stop", "is_block_step", "batch_drop", "pre_ids",    \
   "mask_rollback", "accept_tokens", "accept_num", "base_model_seq_lens_this_time",              \
   "base_model_seq_lens_encoder", "base_model_seq_lens_decoder", "base_model_step_idx",          \
   "base_model_stop_flags", "base_model_is_block_step", "base_model_draft_tokens"}
#define PREPROCESS_OUTPUTS                                                                      \
  {"draft_tokens_out", "input_ids_out", "stop_flags_out", "seq_lens_this_time_out",             \
   "seq_lens_encoder_out", "seq_lens_decoder_out", "step_idx_out", "not_need_stop_out",         \
   "is_block_step_out", "batch_drop_out", "pre_ids_out", "mask_rollback_out",                   \
   "base_model_draft_tokens_out"}
#define PREPROCESS_INPLACE                                                                      \
  {{"draft_tokens", "draft_tokens_out"}, {"input_ids", "input_ids_out"},                        \
   {"stop_flags", "stop_flags_out"}, {"seq_lens_this_time", "seq_lens_this_time_out"},          \
   {"seq_lens_encoder", "seq_lens_encoder_out"}, {"seq_lens_decoder", "seq_lens_decoder_out"},  \
   {"step_idx", "step_idx_out"}, {"not_need_stop", "not_need_stop_out"},                        \
   {"is_block_step", "is_block_step_out"}, {"batch_drop", "batch_drop_out"},                    \
   {"pre_ids", "pre_ids_out"}, {"mask_rollback", "mask_rollback_out"},                          \
   {"base_model_draft_tokens", "base_model_draft_tokens_out"}}
#define PREPROCESS_ATTRS                                                                        \
  {"num_model_step: int", "truncate_first_token: bool", "splitwise_prefill: bool",              \
   "kvcache_scheduler_v1: bool"}
#define MASK_INPUTS                                                                             \
  {"ids_remove_padding", "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder",          \
   "cu_seqlens_q", "attn_mask_offsets_full", "attn_mask_offsets_decoder", "is_block_step",      \
   "decode_states", "mask_rollback"}
#define MASK_OUTPUTS                                                                            \
  {"attn_mask_offsets", "attn_mask_offsets_decoder_out", "decode_states_out",                   \
   "mask_rollback_out"}
#define MASK_INPLACE                                                                            \
  {{"attn_mask_offsets_decoder", "attn_mask_offsets_decoder_out"},                             \
   {"decode_states", "decode_states_out"}, {"mask_rollback", "mask_rollback_out"}}

PD_BUILD_OP(bench_baseline_preprocess)
    .Inputs(PREPROCESS_INPUTS)
    .Outputs(PREPROCESS_OUTPUTS)
    .Attrs(PREPROCESS_ATTRS)
    .SetInplaceMap(PREPROCESS_INPLACE)
    .SetKernelFn(PD_KERNEL(BenchBaselinePreprocess));
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
