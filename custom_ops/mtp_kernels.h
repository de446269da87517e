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
// for the grid-wide agreement (the block's first failing request in the high
// half, whether any of its requests runs in the low half: one load a block),
// and a counter with which a synchronous call's blocks find the last of them
// to finish (it reports). With null slots the kernels always run as one block.
constexpr int kGridSlots = 1024;
struct GridScratch {
  unsigned long long* slots;  // [kGridSlots]
  unsigned* finished;         // [1], 0 between launches
};

// A thread-block cluster launch (sm_90): one block up to `block_max` threads
// of work, and past it one cluster of up to `blocks` blocks (below 2: never;
// at most 16, and more than 8 only where the device has room for such a
// non-portable cluster) of `min_threads` to `threads` threads each, where
// that holds the work.
struct ClusterShape {
  int64_t block_max;
  int blocks;
  int threads;
  int min_threads;
};

// How the launchers size a launch. The defaults are what the benchmarks chose
// (docs/performance.md); the graph probe (benchmarks/graph_probe.cu) tries others.
struct LaunchShape {
  int one_block_max = 1024;    // threads of work up to which one block does it all
  int grid_threads = 256;      // threads per block of the grid (update_attn_mask_offsets)
  // The same for draft_model_preprocess. Its one block stops at 256 requests:
  // past them, one SM's load/store unit queued the rows a thread reads and
  // writes (draft_tokens, pre_ids, ...), and a grid of 128-thread blocks was
  // faster even with its barrier (measured with benchmarks/graph_probe.cu).
  int preprocess_one_block_max = 256;
  int preprocess_grid_threads = 128;
  // update_attn_mask_offsets: the lanes that share a request's tokens (32,
  // 16, 8, 4 or 2; a warp serves 32 / mask_lanes requests), 0 for a warp a
  // request up to mask_wide_max requests, half a warp up to mask_half_max and
  // 8 lanes past it; and the warps of a launch at most (past them, a group of
  // lanes takes several requests in turn).
  int mask_lanes = 0;
  int64_t mask_wide_max = 1024;
  int64_t mask_half_max = 2048;
  int mask_max_warps = 2048;
  // On sm_90, each op's one block stops at `cluster.block_max` threads of
  // work (before one_block_max or preprocess_one_block_max); past it, one
  // thread-block cluster, where that holds the work, instead of one block or
  // a grid. A cluster's barrier costs less than a grid's, and its blocks
  // share out one SM's queues. Measured with benchmarks/graph_probe.cu: the mask
  // op at 33-512 requests, preprocess at 129-2048; 16 blocks where the device
  // has room for them (else 8 where they hold the work, else the grid), and
  // no thinner blocks than `min_threads` (16 thinner blocks were slower than
  // 8: the mask op at 64 requests, preprocess at 512).
  ClusterShape mask_cluster{512, 16, 512, 256};
  ClusterShape preprocess_cluster{128, 16, 128, 64};
  // update_attn_mask_offsets: share out prompts of more than 64 tokens among
  // their block's threads where the batch may have one (mask_kernel.cuh,
  // SharedPrompts). Off, each prompt is walked by its own group of lanes:
  // the same result, slower for long prompts (a switch for the graph probe).
  bool share_long_prompts = true;
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
