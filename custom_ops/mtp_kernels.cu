// CUDA drivers of the per-request rules in mtp_bookkeeping.h.
//
// Each op is one block: the threads stride over the batch, agree on the first
// failing request (shared-memory atomicMin), and only then write. A single
// block is what makes "validate the whole batch before writing anything" cheap
// to guarantee; the per-request work is a few dozen loads, so even 8192
// requests are a handful of strides.
#include <climits>

#include "mtp_kernels.h"

namespace mtp {
namespace {

constexpr int kMaxThreads = 1024;

int threads_for(int64_t work) {
  const int64_t warps = (work + 31) / 32;
  const int64_t threads = (warps < 1 ? 1 : warps) * 32;
  return threads > kMaxThreads ? kMaxThreads : (int)threads;
}

// The whole-batch agreement both kernels start with: every thread checks its
// requests, the block agrees on the first failing one (shared atomicMin), and
// thread 0 records it. Returns whether the batch may be written. A record
// already holding an error (an earlier asynchronous call's) also stops the
// batch: it is marked deferred and left for the host to report.
template <typename CheckRequest>
__device__ bool batch_is_valid(int64_t bsz, OpId op, ErrorRecord* record, CheckRequest check) {
  __shared__ long long first_bad;
  __shared__ bool pending;
  if (threadIdx.x == 0) {
    first_bad = LLONG_MAX;
    pending = record->code != kOk;
  }
  __syncthreads();
  if (pending) {
    if (threadIdx.x == 0) record->origin |= kDeferred;
    return false;
  }
  for (int64_t i = threadIdx.x; i < bsz; i += blockDim.x) {
    if (check(i).code != kOk) atomicMin(&first_bad, (long long)i);
  }
  __syncthreads();
  if (first_bad != LLONG_MAX) {
    if (threadIdx.x == 0) *record = record_failure(op, first_bad, check(first_bad));
    return false;
  }
  return true;
}

__global__ void preprocess_kernel(PreprocessTensors t, PreprocessAttrs a, int64_t bsz,
                                  bool* not_need_stop, ErrorRecord* record) {
  auto check = [&](int64_t i) { return check_preprocess(t, plan_preprocess(t, a, i), i); };
  if (!batch_is_valid(bsz, kPreprocessOp, record, check)) return;
  int any = 0;
  for (int64_t i = threadIdx.x; i < bsz; i += blockDim.x)
    any |= apply_preprocess(t, plan_preprocess(t, a, i), i) ? 1 : 0;
  any = __syncthreads_or(any);
  if (threadIdx.x == 0) {
    *record = record_ok(any != 0);
    if (not_need_stop != nullptr) *not_need_stop = any != 0;
  }
}

__global__ void mask_kernel(MaskTensors t, int64_t bsz, ErrorRecord* record) {
  auto check = [&](int64_t i) { return check_mask(t, plan_mask(t, i), i); };
  if (!batch_is_valid(bsz, kMaskOp, record, check)) return;
  // Every entry is written: zeros first, then each request's odd entries.
  for (int64_t k = threadIdx.x; k < 2 * t.num_tokens; k += blockDim.x) t.out[k] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < bsz; i += blockDim.x) apply_mask(t, plan_mask(t, i), i);
  if (threadIdx.x == 0) *record = record_ok(false);
}

}  // namespace

cudaError_t launch_preprocess(const PreprocessTensors& t, const PreprocessAttrs& a, int64_t bsz,
                              bool* not_need_stop, ErrorRecord* record, cudaStream_t stream) {
  preprocess_kernel<<<1, threads_for(bsz), 0, stream>>>(t, a, bsz, not_need_stop, record);
  return cudaGetLastError();
}

cudaError_t launch_mask(const MaskTensors& t, int64_t bsz, ErrorRecord* record,
                        cudaStream_t stream) {
  const int64_t work = bsz > 2 * t.num_tokens ? bsz : 2 * t.num_tokens;
  mask_kernel<<<1, threads_for(work), 0, stream>>>(t, bsz, record);
  return cudaGetLastError();
}

}  // namespace mtp
