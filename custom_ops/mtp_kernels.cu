// CUDA drivers of the per-request rules in mtp_bookkeeping.h.
//
// Each op is one launch that validates the whole batch before it writes
// anything: each thread plans and checks its requests, all threads agree on
// the first failing request (and on whether any request runs), and only then
// do they write, the first request of each thread from the plan it already
// holds (draft_model_preprocess: a thread a request; update_attn_mask_offsets:
// a group of lanes a request, see Group). A small batch is one block (an
// agreement in shared memory); on sm_90 and later a middle one is one
// thread-block cluster (the blocks agree through each other's shared memory);
// past that, the kernel runs as a cooperative grid, every block resident at
// once, and the blocks agree through per-block slots and one grid barrier,
// also inside a CUDA graph capture (where the stream's scratch was made by a
// warm-up call). LaunchShape holds the sizes at which each takes over.
//
// A captured step is a chain of short kernels, so what costs is latency: each
// kernel has one agreement, and on sm_90 and later each is launched as a
// programmatic dependent launch, so that its launch overlaps the previous
// kernel and it waits for that kernel's writes only at its first memory
// access.
//
// "sm_90 and later" is the device and the code both: clusters and the wait
// are compiled only for sm_90 and later (agreement.cuh, early_start.cuh), and
// the launcher takes them only where the kernel image loaded on the device
// has them (launch_plan.cuh). Code compiled for an older arch, on any device,
// runs one block or a grid, each launch after the previous one.
//
// Where things are: early_start.cuh (work before the wait), agreement.cuh
// (the verdict and the scopes that agree on it), preprocess_kernel.cuh and
// mask_kernel.cuh (the two kernels), launch_rules.h (the choice of launch,
// pure) and launch_plan.cuh (its CUDA side); this file holds the launchers.
#include <cstdint>

#include "mtp_kernels.h"
// Each builds on the ones before it.
#include "early_start.cuh"
#include "agreement.cuh"
#include "preprocess_kernel.cuh"
#include "mask_kernel.cuh"
#include "launch_plan.cuh"

namespace mtp {

template <Form F>
cudaError_t launch_preprocess(const PreprocessTensors& t, const PreprocessAttrs& a, int64_t bsz,
                              bool* not_need_stop, Reporting out, GridScratch scratch,
                              cudaStream_t stream, const LaunchShape& shape) {
  static_assert(F == preprocess_form(F), "a form that runs another's preprocess has none");
  if (bsz > kMaxBatch) return cudaErrorInvalidValue;
  const Launch l =
      plan_preprocess_launch(CudaDevice<F>::current(), bsz, scratch.slots != nullptr, shape);
  return with_scope(l, scratch, [&](auto scope) {
    return launch<preprocess_kernel<F, decltype(scope)>>(l, stream, t, a, bsz, not_need_stop, out,
                                                         scope);
  });
}

template <Form F>
cudaError_t launch_mask(const MaskTensors& t, int64_t bsz, Reporting out, GridScratch scratch,
                        cudaStream_t stream, const LaunchShape& shape) {
  static_assert(F == mask_form(F), "a form whose mask op runs another form's kernel instantiates none");
  if (bsz > kMaxBatch) return cudaErrorInvalidValue;
  const MaskLaunch p = plan_mask_op(CudaDevice<F>::current(), t.num_tokens, t.mask_full_cols, bsz,
                                    scratch.slots != nullptr, shape);
  return with_mask_kernel(p.kernel, cudaErrorInvalidValue, [&](auto lanes, auto share) {
    return with_scope(p.launch, scratch, [&](auto scope) {
      return launch_mask_kernel<F, decltype(lanes)::value, decltype(share)::value>(
          p.launch, stream, scope, t, bsz, out);
    });
  });
}

// Every form's launchers, in this one library (forms.h lists them).
#define MTP_PREPROCESS_LAUNCHER(F)                                                            \
  template cudaError_t launch_preprocess<F>(const PreprocessTensors&, const PreprocessAttrs&, \
                                            int64_t, bool*, Reporting, GridScratch,          \
                                            cudaStream_t, const LaunchShape&);
#define MTP_MASK_LAUNCHER(F)                                                                  \
  template cudaError_t launch_mask<F>(const MaskTensors&, int64_t, Reporting, GridScratch,    \
                                      cudaStream_t, const LaunchShape&);
MTP_FOR_EACH_PREPROCESS_FORM(MTP_PREPROCESS_LAUNCHER)
MTP_FOR_EACH_MASK_FORM(MTP_MASK_LAUNCHER)
#undef MTP_PREPROCESS_LAUNCHER
#undef MTP_MASK_LAUNCHER

namespace {
__global__ void take_pending_kernel(BatchResult* pending, BatchResult* report) {
  const BatchResult r = read_pending(pending);
  clear_pending(pending, r);
  publish(report, r);
}
}  // namespace

cudaError_t launch_take_pending(BatchResult* pending, BatchResult* report, cudaStream_t stream) {
  take_pending_kernel<<<1, 1, 0, stream>>>(pending, report);
  return cudaGetLastError();
}

}  // namespace mtp
