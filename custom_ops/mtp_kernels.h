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

// Device scratch of the multi-block path, one per stream: one slot per block
// for the grid-wide agreement (the first failing request, and whether any
// request runs), and a counter with which a synchronous call's blocks find
// the last of them to finish (it reports). With null slots the kernels always
// run as one block.
constexpr int kGridSlots = 1024;
struct GridScratch {
  unsigned* bad_slots;  // [kGridSlots]
  unsigned* any_slots;  // [kGridSlots]
  unsigned* finished;    // [1], 0 between launches
};

// How the launchers size a launch. The defaults are what the benchmarks chose
// (docs/performance.md); the graph probe (tests/graph_probe.cu) tries others.
struct LaunchShape {
  int one_block_max = 1024;    // threads of work up to which one block does it all
  int grid_threads = 256;      // threads per block of the grid
  // update_attn_mask_offsets: a warp for every request up to this many
  // warps; past it a warp takes several requests in turn.
  int mask_max_warps = 2048;
  // Programmatic dependent launch (sm_90 and later): the kernel may be
  // launched while the previous kernel on the stream still runs, and waits for
  // it to finish before its first memory access.
  bool overlap_launch = true;
};

// One launch for any bsz. `not_need_stop` is a device pointer for an
// asynchronous call, null for a synchronous one (the host reads the report).
cudaError_t launch_preprocess(const PreprocessTensors& t, const PreprocessAttrs& a, int64_t bsz,
                              bool* not_need_stop, Reporting out, GridScratch scratch,
                              cudaStream_t stream, const LaunchShape& shape = LaunchShape{});

// One launch for any bsz; writes every entry of t.out.
cudaError_t launch_mask(const MaskTensors& t, int64_t bsz, Reporting out, GridScratch scratch,
                        cudaStream_t stream, const LaunchShape& shape = LaunchShape{});

}  // namespace mtp
