// The ops' dispatch, per form: checked views (op_bindings.h) to the CPU loop
// or the CUDA kernel of form F, and the outcome back to Paddle. No tensor is
// named here: op_registrations.cc, generated from the signature table,
// instantiates these for each form's registered ops. The rules themselves
// live in mtp_bookkeeping.h.
#pragma once

#include "failure_messages.h"
#include "gpu_record.h"
#include "mask_output.h"
#include "mtp_cpu.h"
#include "tensor_checks.h"
#include "tensor_views.h"
#ifdef PADDLE_WITH_CUDA
#include "mtp_kernels.h"
#endif

namespace mtp {

#ifdef PADDLE_WITH_CUDA
// What every GPU call needs, in this order: the tensors' device made current
// for the call, their stream, the device's record of pending errors and the
// stream's grid scratch; and its two ways of launching.
class GpuCall {
 public:
  GpuCall(const ArgChecker& c, cudaStream_t stream)
      : op_(c.op()),
        place_(c.place()),
        on_device_(c.place().GetDeviceId(), op_),
        stream_(stream),
        pending_(pending_record(place_, stream_, op_)),
        grid_(grid_scratch(place_, stream_, op_)) {}

  // launch(Reporting, GridScratch, cudaStream_t) -> cudaError_t, with no
  // report: returns at once, and a failure waits on the device.
  template <typename Launch>
  void launch_async(Launch launch) const {
    cuda_check(launch(Reporting{pending_, nullptr}, grid_, stream_), op_, "kernel launch");
  }
  // The same, then waits for the kernel's report (a success or the failure).
  template <typename Launch>
  BatchResult launch_reported(Launch launch) const {
    const Report report = thread_report(place_, stream_, op_);
    cuda_check(launch(Reporting{pending_, arm_report(report)}, grid_, stream_), op_,
               "kernel launch");
    return read_report(report, stream_, op_);
  }

 private:
  const char* op_;
  paddle::Place place_;
  DeviceScope on_device_;
  cudaStream_t stream_;
  BatchResult* pending_;
  GridScratch grid_;
};
#endif

// draft_model_preprocess: runs the checked views on the CPU or the GPU and
// sets not_need_stop (on the device, asynchronously, where it lives there).
template <Form F>
void run_draft_model_preprocess(const ArgChecker& c,
                                const OpViews<PreprocessTensors, PreprocessAttrs>& v) {
  const char* op = c.op();
  BatchResult r;
  if (c.place().GetType() == phi::AllocationType::CPU) {
    r = preprocess_batch<F>(v.t, v.attrs, v.bsz);
  } else {
#ifdef PADDLE_WITH_CUDA
    const GpuCall gpu(c, v.device_tensor->stream());
    // With not_need_stop on the device: no copy, no wait.
    bool* flag = v.flag->is_cpu() ? nullptr : v.flag->data<bool>();
    const auto launch = [&](Reporting reporting, GridScratch grid, cudaStream_t stream) {
      return launch_preprocess<F>(v.t, v.attrs, v.bsz, flag, reporting, grid, stream);
    };
    if (flag != nullptr) {
      gpu.launch_async(launch);
      return;
    }
    r = gpu.launch_reported(launch);
#else
    raise(op, ": this build has no CUDA support; tensors are on ", place_name(c.place()));
#endif
  }
  raise_if_failed(op, r);
  *v.flag->data<bool>() = r.any_running != 0;
}

// update_attn_mask_offsets (F: the mask kernel's form, mask_form): runs the
// checked views on the CPU or the GPU into a fresh output, which it returns
// (Paddle returns the in-place outputs itself).
template <Form F>
std::vector<paddle::Tensor> run_update_attn_mask_offsets(const ArgChecker& c,
                                                         OpViews<MaskTensors> v) {
  const char* op = c.op();
  paddle::Tensor out = fresh_mask_output(v.t.num_tokens, c.place());
  v.t.out = out.data<int32_t>();
  if (c.place().GetType() == phi::AllocationType::CPU) {
    raise_if_failed(op, mask_batch<F>(v.t, v.bsz));
  } else {
#ifdef PADDLE_WITH_CUDA
    const GpuCall gpu(c, v.device_tensor->stream());
    const auto launch = [&](Reporting reporting, GridScratch grid, cudaStream_t stream) {
      return launch_mask<F>(v.t, v.bsz, reporting, grid, stream);
    };
    // Asynchronous while a CUDA graph is captured (a sync is illegal then) or
    // when the runner asks for it; errors then wait on the device.
    if (asynchronous_mask_call(v.device_tensor->stream(), op)) {
      gpu.launch_async(launch);
    } else {
      raise_if_failed(op, gpu.launch_reported(launch));
    }
#else
    raise(op, ": this build has no CUDA support; tensors are on ", place_name(c.place()));
#endif
  }
  return {out};
}

}  // namespace mtp
