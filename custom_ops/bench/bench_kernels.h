// Reference points for the GPU benchmark (not part of the product).
#pragma once

#include <cuda_runtime.h>

#include "../mtp_bookkeeping.h"

namespace mtp_bench {

// One empty kernel: the least any op that launches can cost.
cudaError_t launch_empty(cudaStream_t stream);

// FastDeploy's launch shape: one block of 512 threads, thread i handles
// request i and nothing checks anything, so requests past 511 are skipped.
// The per-request work is ours (mtp_bookkeeping.h), so only the launch and the
// flag's round trip differ from the product.
cudaError_t launch_baseline_preprocess(const mtp::PreprocessTensors& t,
                                       const mtp::PreprocessAttrs& a, int64_t bsz,
                                       bool* not_need_stop_device, cudaStream_t stream);

}  // namespace mtp_bench
