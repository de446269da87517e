// The agreement floor of a captured step, for bench-gpu's graph table and
// the graph probe (not the product).
//
// Each op is launched exactly as its launcher would launch it: the same plan
// (one block, a cluster or a cooperative grid; blocks, threads, lanes), the
// same programmatic dependent launch. But the kernel only agrees, through the
// same scope as the op's: it reads and writes no request. A step of these
// costs what any kernels of the ops' shapes that validate a whole batch before
// writing must pay on the device; what the ops cost beyond it is their
// requests' work. The probe's "agreement" variant.
//
// This file includes the kernels' source, so that it plans with the
// launchers' own functions; it replaces mtp_kernels.cu in the probe's link,
// and the bench library holds it beside no other copy of the kernels.
#include "agreement_floor.h"

#include "../mtp_kernels.cu"

namespace mtp {
namespace {

// `sink`: where the leader writes the verdict, as an op writes not_need_stop,
// so that no part of the agreement is left out as unused.
template <typename Scope>
__global__ void __launch_bounds__(kMaskMaxThreads, 1)
    agreement_kernel(unsigned* sink, Scope scope) {
  scope.start();
  wait_for_previous_kernel();
  let_next_kernel_launch();
  const Verdict v = scope.agree(Verdict{kNone, 0});
  if (scope.leader()) *sink = v.bad | v.any;
}

cudaError_t launch_agreement(const Launch& l, unsigned* sink, const GridScratch& scratch,
                             cudaStream_t stream) {
  return with_scope(l, scratch, [&](auto scope) {
    return launch<agreement_kernel<decltype(scope)>>(l, stream, sink, scope);
  });
}

// The other side of the floor: the ops' own kernels with the agreement
// across blocks taken out. Each block agrees only within itself and writes
// its requests on its own verdict; the launch has the op's blocks and
// threads, as a plain grid (no cluster, no grid barrier). Unsafe: a failing
// request stops only its own block, and the mask op's zeroing by other blocks
// may land after a block's writes (only the agreement orders them). So it is
// only a floor, timed on the probe's valid states: what a step would cost if
// agreeing were free. The probe's "free" variant.
//
// BlockOnly is the grid's scope (its share of the batch, leader and
// report) but for the agreement. The kernels' `is_same` tests do not take it
// for a WholeGrid, so the mask kernel runs its cluster paths in it at every
// size (a grid's differ in how a warp's groups spread their requests at 16
// lanes or fewer, and in where a block's verdict is agreed): the figures in
// docs/performance.md were measured so.
struct BlockOnly : WholeGrid {
  __device__ Verdict agree(Verdict v) const { return block_agree(v); }
  __device__ Verdict agree_blocks(Verdict block) const { return block; }
};

// `l` with BlockOnly in place of a cluster's or a grid's scope (one block
// stays as it is: it has no agreement across blocks to take out).
template <typename F>
cudaError_t with_free_scope(Launch l, const GridScratch& scratch, F f) {
  if (l.scope == Scope::kOneBlock) return f(l, OneBlock{});
  l.scope = Scope::kGrid;
  return f(l, BlockOnly{{scratch}});
}

}  // namespace

cudaError_t launch_preprocess_free(const PreprocessTensors& t, const PreprocessAttrs& a,
                                   int64_t bsz, bool* not_need_stop, Reporting out,
                                   GridScratch scratch, cudaStream_t stream,
                                   const LaunchShape& shape) {
  const Launch plan =
      plan_preprocess_launch(CudaDevice<Form::kRollback>::current(), bsz, scratch.slots != nullptr, shape);
  return with_free_scope(plan, scratch, [&](const Launch& l, auto scope) {
    return launch<preprocess_kernel<Form::kRollback, decltype(scope)>>(l, stream, t, a, bsz, not_need_stop, out,
                                                      scope);
  });
}

cudaError_t launch_mask_free(const MaskTensors& t, int64_t bsz, Reporting out,
                             GridScratch scratch, cudaStream_t stream, const LaunchShape& shape) {
  const MaskLaunch p = plan_mask_op(CudaDevice<Form::kRollback>::current(), t.num_tokens, t.mask_full_cols, bsz,
                                    scratch.slots != nullptr, shape);
  return with_mask_kernel(p.kernel, cudaErrorInvalidValue, [&](auto lanes, auto share) {
    return with_free_scope(p.launch, scratch, [&](const Launch& l, auto scope) {
      return launch<mask_kernel<Form::kRollback, decltype(lanes)::value, decltype(share)::value, decltype(scope)>>(
          l, stream, t, bsz, out, scope);
    });
  });
}

cudaError_t launch_preprocess_agreement(int64_t bsz, unsigned* sink, GridScratch scratch,
                                        cudaStream_t stream, const LaunchShape& shape) {
  return launch_agreement(
      plan_preprocess_launch(CudaDevice<Form::kRollback>::current(), bsz, scratch.slots != nullptr, shape), sink,
      scratch, stream);
}

cudaError_t launch_mask_agreement(int64_t num_tokens, int64_t mask_full_cols, int64_t bsz,
                                  unsigned* sink, GridScratch scratch, cudaStream_t stream,
                                  const LaunchShape& shape) {
  const MaskLaunch p = plan_mask_op(CudaDevice<Form::kRollback>::current(), num_tokens, mask_full_cols, bsz,
                                    scratch.slots != nullptr, shape);
  if (p.kernel.lanes == 0) return cudaErrorInvalidValue;
  return launch_agreement(p.launch, sink, scratch, stream);
}

}  // namespace mtp
