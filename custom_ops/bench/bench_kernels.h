// Reference points for the GPU benchmark (not part of the product).
#pragma once

#include <cuda_runtime.h>

#include "../mtp_bookkeeping.h"

namespace mtp_bench {

// Adds 1 to each of x[0, n) about 10 ms after it starts, having let the next
// kernel on the stream launch at once: a writer late on purpose, so that a
// kernel launched after it that read x without waiting for it (programmatic
// dependent launch) would see the old values. For the GPU tests.
cudaError_t launch_late_bump(int32_t* x, int64_t n, cudaStream_t stream);

// One empty kernel: the least any op that launches can cost.
cudaError_t launch_empty(cudaStream_t stream);

// FastDeploy's launch shape: one block of `threads` threads (512, or the
// shadow form's 1024), thread i handles request i and nothing checks
// anything, so requests past the block are skipped. The per-request work is
// ours (mtp_bookkeeping.h), so only the launch and the flag's round trip
// differ from the product. F: the form whose rules run.
template <mtp::Form F>
cudaError_t launch_baseline_preprocess(const mtp::PreprocessTensors& t,
                                       const mtp::PreprocessAttrs& a, int64_t bsz,
                                       bool* not_need_stop_device, cudaStream_t stream,
                                       int threads = 512);

// FastDeploy's update_attn_mask_offsets: the output zeroed by a fill kernel
// shaped as Paddle's (paddle::full launches one), then one block of 512
// threads, thread i on requests i, i + 512, ..., nothing checked. The
// per-request work is ours (mtp_bookkeeping.h). F: mask_form of the form.
template <mtp::Form F>
cudaError_t launch_baseline_mask(const mtp::MaskTensors& t, int64_t bsz, cudaStream_t stream);

}  // namespace mtp_bench
