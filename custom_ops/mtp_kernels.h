// Launchers of the CUDA kernels. No Paddle here: CI compiles mtp_kernels.cu
// with plain nvcc so the device code cannot rot on machines without a GPU.
#pragma once

#include <cuda_runtime.h>

#include "mtp_bookkeeping.h"

namespace mtp {

// Where a kernel reports. `pending` is device memory holding the error of an
// earlier asynchronous call that nobody has read (code kOk if none); while it
// holds one, kernels change nothing. `report` is host memory mapped into the
// device (see gpu_record.h) for a synchronous call, which then also takes over
// a pending error (clearing it); it is null for an asynchronous call, whose
// failure is left in `pending` instead.
struct Reporting {
  BatchResult* pending;
  BatchResult* report;
};

// Device scratch of the multi-block path: one slot per block for each of the
// two grid-wide agreements (first failing request; any request running). With
// null slots the kernels always run as one block.
constexpr int kGridSlots = 1024;
struct GridScratch {
  long long* min_slots;  // [kGridSlots]
  int* or_slots;         // [kGridSlots]
};

// One launch for any bsz. `not_need_stop` is a device pointer for an
// asynchronous call, null for a synchronous one (the host reads the report).
cudaError_t launch_preprocess(const PreprocessTensors& t, const PreprocessAttrs& a, int64_t bsz,
                              bool* not_need_stop, Reporting out, GridScratch scratch,
                              cudaStream_t stream);

// One launch for any bsz; writes every entry of t.out.
cudaError_t launch_mask(const MaskTensors& t, int64_t bsz, Reporting out, GridScratch scratch,
                        cudaStream_t stream);

}  // namespace mtp
