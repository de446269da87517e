// Paddle binding of update_attn_mask_offsets: boundary checks, raw views, and
// dispatch to the CPU loop or the CUDA kernel (rules in mtp_bookkeeping.h).
// The parameter list, the checks, the views, the output's shape and dtype and
// the registered names are the form's table's (fastdeploy_mtp/signature.py),
// as op_bindings.h and op_signatures.h render it.
#include "gpu_record.h"
#include "mask_output.h"
#include "mtp_cpu.h"
#include "failure_messages.h"
#include "op_bindings.h"
#ifdef PADDLE_WITH_CUDA
#include "mtp_kernels.h"
#endif

namespace {

constexpr const char* kOp = "update_attn_mask_offsets";

// Runs the checked views on the CPU or the GPU; returns the fresh output.
paddle::Tensor run(const mtp::ArgChecker& c, mtp::OpViews<mtp::MaskTensors> v) {
  paddle::Tensor out = mtp::fresh_mask_output(v.t.num_tokens, c.place());
  v.t.out = out.data<int32_t>();
  if (c.place().GetType() == phi::AllocationType::CPU) {
    mtp::raise_if_failed(kOp, mtp::mask_batch(v.t, v.bsz));
  } else {
#ifdef PADDLE_WITH_CUDA
    const mtp::DeviceScope on_device(c.place().GetDeviceId(), kOp);
    cudaStream_t stream = v.device_tensor->stream();
    mtp::BatchResult* pending = mtp::pending_record(c.place(), stream, kOp);
    const mtp::GridScratch grid = mtp::grid_scratch(c.place(), stream, kOp);
    // Asynchronous while a CUDA graph is captured (a sync is illegal then) or
    // when the runner asks for it; errors then wait on the device.
    if (mtp::asynchronous_mask_call(stream, kOp)) {
      mtp::cuda_check(mtp::launch_mask(v.t, v.bsz, {pending, nullptr}, grid, stream), kOp,
                      "kernel launch");
    } else {
      const mtp::Report report = mtp::thread_report(c.place(), stream, kOp);
      mtp::cuda_check(
          mtp::launch_mask(v.t, v.bsz, {pending, mtp::arm_report(report)}, grid, stream), kOp,
          "kernel launch");
      mtp::raise_if_failed(kOp, mtp::read_report(report, stream, kOp));
    }
#else
    mtp::raise(kOp, ": this build has no CUDA support; tensors are on ", mtp::place_name(c.place()));
#endif
  }
  return out;
}

}  // namespace

std::vector<paddle::Tensor> UpdateAttnMaskOffsets(MTP_FORM_UPDATE_ATTN_MASK_OFFSETS(PARAMS)) {
  mtp::ArgChecker c(kOp);
  mtp::form::update_attn_mask_offsets_checks(c, MTP_FORM_UPDATE_ATTN_MASK_OFFSETS(ARGS));
  paddle::Tensor out =
      run(c, mtp::form::update_attn_mask_offsets_views(MTP_FORM_UPDATE_ATTN_MASK_OFFSETS(ARGS)));
  // Paddle returns the in-place outputs itself; only the fresh one is ours to return.
  return {out};
}

PD_BUILD_OP(update_attn_mask_offsets)
    .Inputs({MTP_FORM_UPDATE_ATTN_MASK_OFFSETS(INPUTS)})
    .Outputs({MTP_FORM_UPDATE_ATTN_MASK_OFFSETS(OUTPUTS)})
    .SetInplaceMap({MTP_FORM_UPDATE_ATTN_MASK_OFFSETS(INPLACE)})
    .SetKernelFn(PD_KERNEL(UpdateAttnMaskOffsets))
    .SetInferShapeFn(PD_INFER_SHAPE(mtp::form::update_attn_mask_offsets_shape))
    .SetInferDtypeFn(PD_INFER_DTYPE(mtp::form::update_attn_mask_offsets_dtype));
