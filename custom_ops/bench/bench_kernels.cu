#include "bench_kernels.h"

namespace mtp_bench {
namespace {

__global__ void empty_kernel() {}

__global__ void baseline_preprocess_kernel(mtp::PreprocessTensors t, mtp::PreprocessAttrs a,
                                           int64_t bsz, bool* not_need_stop) {
  const int64_t i = threadIdx.x;
  int running = 0;
  if (i < bsz) running = mtp::apply_preprocess(t, mtp::plan_preprocess(t, a, i), i) ? 1 : 0;
  running = __syncthreads_or(running);
  if (threadIdx.x == 0) *not_need_stop = running != 0;
}

}  // namespace

cudaError_t launch_empty(cudaStream_t stream) {
  empty_kernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t launch_baseline_preprocess(const mtp::PreprocessTensors& t,
                                       const mtp::PreprocessAttrs& a, int64_t bsz,
                                       bool* not_need_stop_device, cudaStream_t stream) {
  baseline_preprocess_kernel<<<1, 512, 0, stream>>>(t, a, bsz, not_need_stop_device);
  return cudaGetLastError();
}

}  // namespace mtp_bench
