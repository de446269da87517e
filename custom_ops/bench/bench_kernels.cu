#include "bench_kernels.h"

namespace mtp_bench {
namespace {

__global__ void empty_kernel() {}

template <mtp::Form F, int kThreads>
__global__ void __launch_bounds__(kThreads)
    baseline_preprocess_kernel(mtp::PreprocessTensors t, mtp::PreprocessAttrs a, int64_t bsz,
                               bool* not_need_stop) {
  const int64_t i = threadIdx.x;
  int running = 0;
  if (i < bsz) running = mtp::apply_preprocess(t, mtp::plan_preprocess<F>(t, a, i), i) ? 1 : 0;
  running = __syncthreads_or(running);
  if (threadIdx.x == 0) *not_need_stop = running != 0;
}

// Lets the next kernel on the stream launch at once (a programmatic
// dependent launch may then start), spins for `cycles` clock cycles, and only
// then adds 1 to each of x[0, n).
__global__ void late_bump_kernel(int32_t* x, int64_t n, long long cycles) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) x[k] += 1;
}

// Paddle's full kernel as paddle::full launches it for an int32 output: each
// thread writes one 16-byte vector, the remainder is written one int at a
// time, in blocks of a power of two between 64 and 512 threads.
__global__ void baseline_fill_kernel(int32_t* out, int64_t n) {
  const int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (4 * v + 3 < n) {
    reinterpret_cast<int4*>(out)[v] = make_int4(0, 0, 0, 0);
  } else {
    for (int64_t k = 4 * v; k < n; ++k) out[k] = 0;
  }
}

template <mtp::Form F>
__global__ void baseline_mask_kernel(mtp::MaskTensors t, int64_t bsz) {
  for (int64_t i = threadIdx.x; i < bsz; i += blockDim.x)
    mtp::apply_mask<F>(t, mtp::plan_mask<F>(t, i), i);
}

}  // namespace

template <mtp::Form F>
cudaError_t launch_baseline_mask(const mtp::MaskTensors& t, int64_t bsz, cudaStream_t stream) {
  const int64_t n = 2 * t.num_tokens;
  if (n > 0) {
    const int64_t vectors = (n + 3) / 4;
    int threads = 64;
    while (threads < 512 && threads < vectors / 264) threads *= 2;  // ~2 blocks an SM first
    baseline_fill_kernel<<<(unsigned)((vectors + threads - 1) / threads), threads, 0, stream>>>(
        t.out, n);
  }
  baseline_mask_kernel<F><<<1, 512, 0, stream>>>(t, bsz);
  return cudaGetLastError();
}

cudaError_t launch_late_bump(int32_t* x, int64_t n, cudaStream_t stream) {
  late_bump_kernel<<<1, 256, 0, stream>>>(x, n, 20000000LL);  // ~10 ms at 2 GHz
  return cudaGetLastError();
}

cudaError_t launch_empty(cudaStream_t stream) {
  empty_kernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

template <mtp::Form F>
cudaError_t launch_baseline_preprocess(const mtp::PreprocessTensors& t,
                                       const mtp::PreprocessAttrs& a, int64_t bsz,
                                       bool* not_need_stop_device, cudaStream_t stream,
                                       int threads) {
  if (threads == 1024) {
    baseline_preprocess_kernel<F, 1024><<<1, 1024, 0, stream>>>(t, a, bsz, not_need_stop_device);
  } else {
    baseline_preprocess_kernel<F, 512><<<1, 512, 0, stream>>>(t, a, bsz, not_need_stop_device);
  }
  return cudaGetLastError();
}

// Every form's (forms.h lists them).
#define MTP_BASELINE_PREPROCESS(F)                                                           \
  template cudaError_t launch_baseline_preprocess<mtp::F>(                                   \
      const mtp::PreprocessTensors&, const mtp::PreprocessAttrs&, int64_t, bool*, cudaStream_t, \
      int);
#define MTP_BASELINE_MASK(F) \
  template cudaError_t launch_baseline_mask<mtp::F>(const mtp::MaskTensors&, int64_t, cudaStream_t);
MTP_FOR_EACH_PREPROCESS_FORM(MTP_BASELINE_PREPROCESS)
MTP_FOR_EACH_MASK_FORM(MTP_BASELINE_MASK)
#undef MTP_BASELINE_PREPROCESS
#undef MTP_BASELINE_MASK

}  // namespace mtp_bench
