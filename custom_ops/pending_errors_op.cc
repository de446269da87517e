// raise_pending_errors: the explicit check for errors that asynchronous GPU
// calls (not_need_stop on the GPU, or a captured/asynchronous mask update)
// left on the device. Synchronises the tensor's stream; a no-op on the CPU.
#include "gpu_record.h"
#include "failure_messages.h"
#include "raise.h"
#include "op_signatures.h"

namespace {
constexpr const char* kOp = "raise_pending_errors";
}

void RaisePendingErrors(paddle::Tensor& x) {
  if (!x.is_gpu()) return;
#ifdef PADDLE_WITH_CUDA
  const mtp::DeviceScope on_device(x.place().GetDeviceId(), kOp);
  mtp::BatchResult* pending = mtp::pending_record(x.place(), x.stream(), kOp);
  const mtp::Report report = mtp::thread_report(x.place(), x.stream(), kOp);
  const mtp::BatchResult r = mtp::take_pending(pending, report, x.stream(), kOp);
  if (r.code != mtp::kOk) {
    mtp::BatchResult deferred = r;
    deferred.origin |= mtp::kDeferred;
    mtp::raise(mtp::describe_failure(kOp, deferred));
  }
#endif
}

PD_BUILD_OP(raise_pending_errors)
    .Inputs({MTP_RAISE_PENDING_ERRORS_INPUTS})
    .Outputs({MTP_RAISE_PENDING_ERRORS_OUTPUTS})
    .SetInplaceMap({MTP_RAISE_PENDING_ERRORS_INPLACE})
    .SetKernelFn(PD_KERNEL(RaisePendingErrors));
