// Launchers of the CUDA kernels. No Paddle here: CI compiles mtp_kernels.cu
// with plain nvcc so the device code cannot rot on machines without a GPU.
#pragma once

#include <cuda_runtime.h>

#include "mtp_bookkeeping.h"

namespace mtp {

// One launch for any bsz. `record` is device memory holding one ErrorRecord.
// If the record already holds an error (from an earlier asynchronous call that
// nobody has checked yet) the kernel changes nothing and leaves it there.
// `not_need_stop` is a device pointer, or null when the host reads the record.
cudaError_t launch_preprocess(const PreprocessTensors& t, const PreprocessAttrs& a, int64_t bsz,
                              bool* not_need_stop, ErrorRecord* record, cudaStream_t stream);

// One launch for any bsz; writes every entry of t.out.
cudaError_t launch_mask(const MaskTensors& t, int64_t bsz, ErrorRecord* record,
                        cudaStream_t stream);

}  // namespace mtp
