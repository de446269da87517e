// Launchers of the CUDA kernels. No Paddle here: CI compiles mtp_kernels.cu
// with plain nvcc so the device code cannot rot on machines without a GPU.
#pragma once

#include <cuda_runtime.h>

#include "launch_rules.h"
#include "mtp_bookkeeping.h"

namespace mtp {

// Where a kernel reports. `pending` is device memory, one record a device
// shared by every thread and stream (gpu_record.h), holding the error of an
// earlier asynchronous call that nobody has read (code kOk if none); while it
// holds one, kernels change nothing. `report` is host memory mapped into the
// device for a synchronous call, which then also takes over a pending error
// (clearing it); it is null for an asynchronous call, whose failure is left
// in `pending` instead, unless an earlier one is there already (the first
// error stays; the later call changed nothing either way).
//
// Kernels on several streams may meet at `pending`: a writer claims it
// (code kOk -> kClaimed) before it writes the rest and publishes the code
// last; a reader waits out a claim; a taker clears the code only if it still
// holds the error it read.
constexpr int64_t kClaimed = -2;
struct Reporting {
  BatchResult* pending;
  BatchResult* report;
};

// Device scratch of the multi-block path, one per stream: one slot per block
// (kGridSlots, launch_rules.h) for the grid-wide agreement (the block's first
// failing request in the high half, whether any of its requests runs in the
// low half: one load a block), and a counter with which a synchronous call's
// blocks find the last of them to finish (it reports). With null slots the
// kernels always run as one block.
struct GridScratch {
  unsigned long long* slots;  // [kGridSlots]
  unsigned* finished;         // [1], 0 between launches
};

// One launch for any bsz. `not_need_stop` is a device pointer for an
// asynchronous call, null for a synchronous one (the host reads the report).
// F: the form whose rules run (every form is instantiated in mtp_kernels.cu).
template <Form F>
cudaError_t launch_preprocess(const PreprocessTensors& t, const PreprocessAttrs& a, int64_t bsz,
                              bool* not_need_stop, Reporting out, GridScratch scratch,
                              cudaStream_t stream, const LaunchShape& shape = LaunchShape{});

// One launch for any bsz; writes every entry of t.out. F: mask_form of the
// op's form (kRollback or kShadow).
template <Form F>
cudaError_t launch_mask(const MaskTensors& t, int64_t bsz, Reporting out, GridScratch scratch,
                        cudaStream_t stream, const LaunchShape& shape = LaunchShape{});

// Moves the pending error into `report` (mapped host memory, as a synchronous
// call's), clearing it; code kOk there if there was none. One thread.
cudaError_t launch_take_pending(BatchResult* pending, BatchResult* report, cudaStream_t stream);

}  // namespace mtp
