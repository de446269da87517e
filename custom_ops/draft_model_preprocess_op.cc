// Paddle binding of draft_model_preprocess: boundary checks, raw views, and
// dispatch to the CPU loop or the CUDA kernel. The rules themselves live in
// mtp_bookkeeping.h. The parameter list, the checks, the views and the
// registered names are the form's table's (fastdeploy_mtp/signature.py), as
// op_bindings.h and op_signatures.h render it: the library is built for one
// form (_build.py's -DMTP_FORM_<FORM>), and this binding is that form's.
#include "gpu_record.h"
#include "mtp_cpu.h"
#include "failure_messages.h"
#include "op_bindings.h"
#ifdef PADDLE_WITH_CUDA
#include "mtp_kernels.h"
#endif

namespace {

constexpr const char* kOp = "draft_model_preprocess";

using Views = mtp::OpViews<mtp::PreprocessTensors, mtp::PreprocessAttrs>;

// Runs the checked views on the CPU or the GPU and sets not_need_stop.
void run(const mtp::ArgChecker& c, const Views& v) {
  mtp::BatchResult r;
  if (c.place().GetType() == phi::AllocationType::CPU) {
    r = mtp::preprocess_batch(v.t, v.attrs, v.bsz);
  } else {
#ifdef PADDLE_WITH_CUDA
    const mtp::DeviceScope on_device(c.place().GetDeviceId(), kOp);
    cudaStream_t stream = v.device_tensor->stream();
    mtp::BatchResult* pending = mtp::pending_record(c.place(), stream, kOp);
    const mtp::GridScratch grid = mtp::grid_scratch(c.place(), stream, kOp);
    if (!v.flag->is_cpu()) {
      // Asynchronous: no copy, no wait; a failure waits on the device.
      mtp::cuda_check(mtp::launch_preprocess(v.t, v.attrs, v.bsz, v.flag->data<bool>(),
                                             {pending, nullptr}, grid, stream),
                      kOp, "kernel launch");
      return;
    }
    const mtp::Report report = mtp::thread_report(c.place(), stream, kOp);
    mtp::cuda_check(mtp::launch_preprocess(v.t, v.attrs, v.bsz, nullptr,
                                           {pending, mtp::arm_report(report)}, grid, stream),
                    kOp, "kernel launch");
    r = mtp::read_report(report, stream, kOp);
#else
    mtp::raise(kOp, ": this build has no CUDA support; tensors are on ",
               mtp::place_name(c.place()));
#endif
  }
  mtp::raise_if_failed(kOp, r);
  *v.flag->data<bool>() = r.any_running != 0;
}

}  // namespace

// FastDeploy registers some written tensors as plain inputs (the table's
// `undeclared`) and writes them all the same: registered the same way here,
// they come by const reference and are written through their views.
void DraftModelPreprocess(MTP_FORM_DRAFT_MODEL_PREPROCESS(PARAMS)) {
  mtp::ArgChecker c(kOp);
  mtp::form::draft_model_preprocess_checks(c, MTP_FORM_DRAFT_MODEL_PREPROCESS(ARGS));
  run(c, mtp::form::draft_model_preprocess_views(MTP_FORM_DRAFT_MODEL_PREPROCESS(ARGS)));
}

PD_BUILD_OP(draft_model_preprocess)
    .Inputs({MTP_FORM_DRAFT_MODEL_PREPROCESS(INPUTS)})
    .Outputs({MTP_FORM_DRAFT_MODEL_PREPROCESS(OUTPUTS)})
    .Attrs({MTP_FORM_DRAFT_MODEL_PREPROCESS(ATTRS)})
    .SetInplaceMap({MTP_FORM_DRAFT_MODEL_PREPROCESS(INPLACE)})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocess));
