// Benchmark-only ops (GPU builds): the floor, the empty launch, a captured
// step's launches agreeing only, and a late writer for the GPU tests. Each
// form's FastDeploy-shaped baselines are in bench_baselines.cc.
#include "agreement_floor.h"
#include "bench_baseline.h"

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

using PreprocessViews = mtp_bench::PreprocessViews;

// Adds 1 to every element of the int32 tensor x, late (launch_late_bump).
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

// The floors with the ops' own signatures: Paddle's dispatch of 21 (or 10)
// tensors is part of any op that has them, and so is allocating
// update_attn_mask_offsets' fresh [2 * T] output. They touch the batch tensor
// only (and the mask op's token count), not the views.
void BenchFloorPreprocess(MTP_DRAFT_MODEL_PREPROCESS_PARAMS) {
  BenchFloor(MTP_DRAFT_MODEL_PREPROCESS_BATCH);
}
void BenchEmptyPreprocess(MTP_DRAFT_MODEL_PREPROCESS_PARAMS) {
  BenchEmpty(MTP_DRAFT_MODEL_PREPROCESS_BATCH);
}
static paddle::Tensor fresh_output(const paddle::Tensor& rows_of, const paddle::Tensor& on_device) {
  return mtp::fresh_mask_output(rows_of.shape()[0], on_device.place());
}
std::vector<paddle::Tensor> BenchFloorMask(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  paddle::Tensor out = fresh_output(MTP_UPDATE_ATTN_MASK_OFFSETS_ATTN_MASK_OFFSETS_ROWS_OF,
                                    MTP_UPDATE_ATTN_MASK_OFFSETS_BATCH);
  BenchFloor(const_cast<paddle::Tensor&>(MTP_UPDATE_ATTN_MASK_OFFSETS_BATCH));
  return {out};
}
std::vector<paddle::Tensor> BenchEmptyMask(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  paddle::Tensor out = fresh_output(MTP_UPDATE_ATTN_MASK_OFFSETS_ATTN_MASK_OFFSETS_ROWS_OF,
                                    MTP_UPDATE_ATTN_MASK_OFFSETS_BATCH);
  BenchEmpty(const_cast<paddle::Tensor&>(MTP_UPDATE_ATTN_MASK_OFFSETS_BATCH));
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
// Captured, where the host's work is not replayed: they take the views.
void BenchAgreementPreprocess(MTP_DRAFT_MODEL_PREPROCESS_PARAMS) {
  const PreprocessViews v =
      mtp::rollback::draft_model_preprocess_views(MTP_DRAFT_MODEL_PREPROCESS_ARGS);
  unsigned* sink = nullptr;
  const mtp::GridScratch scratch = agreement_scratch(&sink);
  mtp::cuda_check(mtp::launch_preprocess_agreement(v.bsz, sink, scratch,
                                                   v.device_tensor->stream()),
                  "bench_agreement_preprocess", "launch");
}
std::vector<paddle::Tensor> BenchAgreementMask(MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS) {
  const mtp::OpViews<mtp::MaskTensors> v =
      mtp::rollback::update_attn_mask_offsets_views(MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS);
  paddle::Tensor out = mtp::fresh_mask_output(v.t.num_tokens, v.device_tensor->place());
  unsigned* sink = nullptr;
  const mtp::GridScratch scratch = agreement_scratch(&sink);
  mtp::cuda_check(mtp::launch_mask_agreement(v.t.num_tokens, v.t.mask_full_cols, v.bsz, sink,
                                             scratch, v.device_tensor->stream()),
                  "bench_agreement_mask", "launch");
  return {out};
}

// The ops' own registered signatures (op_signatures.h, from signature.py),
// shared by the floors and the agreeing launches.
#define PREPROCESS_INPUTS {MTP_DRAFT_MODEL_PREPROCESS_INPUTS}
#define PREPROCESS_OUTPUTS {MTP_DRAFT_MODEL_PREPROCESS_OUTPUTS}
#define PREPROCESS_INPLACE {MTP_DRAFT_MODEL_PREPROCESS_INPLACE}
#define PREPROCESS_ATTRS {MTP_DRAFT_MODEL_PREPROCESS_ATTRS}
#define MASK_INPUTS {MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS}
#define MASK_OUTPUTS {MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS}
#define MASK_INPLACE {MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE}

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
