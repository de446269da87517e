// The benchmark's FastDeploy-shaped launches of the ops: the rules of a form
// (nothing checked) launched as FastDeploy launches its kernel, one block.
// bench_baselines.cc, generated from the signature table, registers one of
// each op a form.
#pragma once

#include "../gpu_record.h"
#include "../mask_output.h"
#include "../raise.h"
#include "../op_bindings.h"
#include "bench_kernels.h"

namespace mtp_bench {

using PreprocessViews = mtp::OpViews<mtp::PreprocessTensors, mtp::PreprocessAttrs>;

// FastDeploy's launch of the checked-nothing kernel, one block of `threads`:
// the flag stays on the device in a captured step, else goes there and back
// as Paddle copies.
template <mtp::Form F>
void run_baseline_preprocess(const PreprocessViews& v, int threads) {
  const paddle::Tensor& on_device = *v.device_tensor;
  if (!v.flag->is_cpu()) {  // a captured step's form: the flag stays on the device
    mtp::cuda_check(launch_baseline_preprocess<F>(v.t, v.attrs, v.bsz, v.flag->data<bool>(),
                                                  on_device.stream(), threads),
                    "bench_baseline_preprocess", "launch");
    return;
  }
  paddle::Tensor flag = v.flag->copy_to(on_device.place(), false);
  mtp::cuda_check(launch_baseline_preprocess<F>(v.t, v.attrs, v.bsz, flag.data<bool>(),
                                                on_device.stream(), threads),
                  "bench_baseline_preprocess", "launch");
  paddle::Tensor back = flag.copy_to(paddle::CPUPlace(), true);
  *v.flag->data<bool>() = back.data<bool>()[0];
}

// FastDeploy's launch of the mask kernel, into a fresh output.
template <mtp::Form F>
std::vector<paddle::Tensor> run_baseline_mask(mtp::OpViews<mtp::MaskTensors> v) {
  paddle::Tensor out = mtp::fresh_mask_output(v.t.num_tokens, v.device_tensor->place());
  v.t.out = out.data<int32_t>();
  mtp::cuda_check(launch_baseline_mask<F>(v.t, v.bsz, v.device_tensor->stream()),
                  "bench_baseline_mask", "launch");
  return {out};
}

}  // namespace mtp_bench
