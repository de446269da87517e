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
    const DeviceScope on_device(c.place().GetDeviceId(), op);
    cudaStream_t stream = v.device_tensor->stream();
    BatchResult* pending = pending_record(c.place(), stream, op);
    const GridScratch grid = grid_scratch(c.place(), stream, op);
    if (!v.flag->is_cpu()) {
      // Asynchronous: no copy, no wait; a failure waits on the device.
      cuda_check(launch_preprocess<F>(v.t, v.attrs, v.bsz, v.flag->data<bool>(),
                                      {pending, nullptr}, grid, stream),
                 op, "kernel launch");
      return;
    }
    const Report report = thread_report(c.place(), stream, op);
    cuda_check(launch_preprocess<F>(v.t, v.attrs, v.bsz, nullptr, {pending, arm_report(report)},
                                    grid, stream),
               op, "kernel launch");
    r = read_report(report, stream, op);
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
    const DeviceScope on_device(c.place().GetDeviceId(), op);
    cudaStream_t stream = v.device_tensor->stream();
    BatchResult* pending = pending_record(c.place(), stream, op);
    const GridScratch grid = grid_scratch(c.place(), stream, op);
    // Asynchronous while a CUDA graph is captured (a sync is illegal then) or
    // when the runner asks for it; errors then wait on the device.
    if (asynchronous_mask_call(stream, op)) {
      cuda_check(launch_mask<F>(v.t, v.bsz, {pending, nullptr}, grid, stream), op,
                 "kernel launch");
    } else {
      const Report report = thread_report(c.place(), stream, op);
      cuda_check(launch_mask<F>(v.t, v.bsz, {pending, arm_report(report)}, grid, stream), op,
                 "kernel launch");
      raise_if_failed(op, read_report(report, stream, op));
    }
#else
    raise(op, ": this build has no CUDA support; tensors are on ", place_name(c.place()));
#endif
  }
  return {out};
}

}  // namespace mtp
