// How each GPU launch is shaped, as pure functions: the batch (requests,
// packed tokens, prompt-offset columns), LaunchShape's sizes and the device's
// facts in, the plan out (one block, one thread-block cluster or a cooperative
// grid; its blocks, threads and, for the mask op, lanes a request and whether
// long prompts are shared out). No CUDA here: the launcher (launch_plan.cuh)
// asks the device and launches what the plan says, and the CPU tests
// (tests/launch_rules.cc, tests/test_launch_plan.py) run the same functions
// over devices they describe.
#pragma once

#include <cstdint>

namespace mtp {

// Blocks of the preprocess kernel hold at most this many threads: a request's
// plan, kept in registers from the check to the write, needs more than the 64
// registers a thread of a 1024-thread block can have.
constexpr int kPreprocessMaxThreads = 512;
// The mask kernel's most threads a block.
constexpr int kMaskMaxThreads = 1024;
// A cooperative grid agrees through one slot a block (GridScratch).
constexpr int kGridSlots = 1024;
// Thread-block clusters (sm_90): 8 blocks is the portable size; up to 16 with
// the kernel's leave where the device has room for them.
constexpr int kPortableClusterBlocks = 8;
constexpr int kMaxClusterBlocks = 16;
// update_attn_mask_offsets shares a prompt of more than this many tokens out
// among its block's threads (mask_kernel.cuh, SharedPrompts).
constexpr int32_t kShareTokens = 64;

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

// The sizes at which each launch takes over. The defaults are the product's
// (docs/performance.md says how they were chosen); the graph probe
// (benchmarks/graph_probe.cu) tries others.
struct LaunchShape {
  int one_block_max = 1024;    // threads of work up to which one block does it all
  int grid_threads = 256;      // threads per block of the grid (update_attn_mask_offsets)
  // The same for draft_model_preprocess. Its one block stops at 256 requests:
  // past them one SM's load/store unit queues the rows a thread reads and
  // writes (draft_tokens, pre_ids, ...), and a grid of 128-thread blocks
  // does better even with its barrier.
  int preprocess_one_block_max = 256;
  int preprocess_grid_threads = 128;
  // update_attn_mask_offsets: the lanes that share a request's tokens (32, 16
  // or 8; a warp serves 32 / mask_lanes requests), 0 for a warp a request up
  // to mask_wide_max requests, half a warp up to mask_half_max and 8 lanes
  // past it; and the warps of a launch at most (past them, a group of lanes
  // takes several requests in turn).
  int mask_lanes = 0;
  int64_t mask_wide_max = 1024;
  int64_t mask_half_max = 2048;
  int mask_max_warps = 2048;
  // On sm_90, each op's one block stops at `cluster.block_max` threads of
  // work (before one_block_max or preprocess_one_block_max); past it, one
  // thread-block cluster, where that holds the work, instead of one block or
  // a grid. A cluster's barrier costs less than a grid's, and its blocks
  // share out one SM's queues. 16 blocks where the device has room for them
  // (else 8 where they hold the work, else the grid), and no thinner blocks
  // than `min_threads` (thinner blocks had more of them wait at the barrier).
  ClusterShape mask_cluster{512, 16, 512, 256};
  ClusterShape preprocess_cluster{128, 16, 128, 64};
};

enum class Scope : int32_t { kOneBlock = 0, kCluster = 1, kGrid = 2 };

// A launch: its scope, grid and whether it is a programmatic dependent launch.
struct Launch {
  Scope scope;
  int blocks;   // 1 for the one block
  int threads;  // a block's
  bool overlap;
};

// The kernel a device is asked about (its occupancy and cluster room depend
// on it): draft_model_preprocess's (lanes 0), or the mask kernel of `lanes`
// lanes a request with or without shared prompts.
struct KernelId {
  int32_t lanes;
  bool share;
};
constexpr KernelId kPreprocessKernel{0, false};

// What a plan needs of the device, as a type with these members (the CUDA
// device in launch_plan.cuh, described devices in the CPU tests):
//   bool clusters() const;  the device and the kernel code loaded on it both
//                           sm_90 or later: thread-block clusters and
//                           programmatic dependent launches
//   int resident(KernelId k, int threads) const;
//                           blocks of k's grid form of `threads` threads that
//                           fit on the device at once; -1: no cooperative launch
//   bool cluster_fits(KernelId k, int blocks, int threads) const;
//                           whether one cluster of k's cluster form fits

inline int threads_for(int64_t work, int max_threads) {
  const int64_t warps = (work + 31) / 32;
  const int64_t threads = (warps < 1 ? 1 : warps) * 32;
  return threads > max_threads ? max_threads : (int)threads;
}

// The grid for `work` threads' worth of items, or the one block when the work
// is small, there is no scratch (a stream first seen inside a capture has
// none), or the device has no cooperative launches. Never more blocks than can
// be resident at once (a cooperative launch needs that) nor than the scratch
// has slots for. A cooperative launch is captured into a CUDA graph as a
// cooperative kernel node, so a captured step keeps the grid too.
// `max_threads`: the kernel's own bound on its blocks.
template <class Device>
Launch plan_grid(const Device& d, KernelId k, int max_threads, int64_t work, bool has_scratch,
                 int one_block_max, int grid_threads_wanted) {
  const int grid_threads = grid_threads_wanted < max_threads ? grid_threads_wanted : max_threads;
  const bool overlap = d.clusters();
  const Launch one{Scope::kOneBlock, 1, threads_for(work, max_threads), overlap};
  if (work <= one_block_max || !has_scratch) return one;
  const int resident = d.resident(k, grid_threads);
  if (resident < 0) return one;
  int64_t blocks = (work + grid_threads - 1) / grid_threads;
  if (blocks > resident) blocks = resident;
  if (blocks > kGridSlots) blocks = kGridSlots;
  if (blocks < 2) return one;
  return Launch{Scope::kGrid, (int)blocks, grid_threads, overlap};
}

// `c` within what a cluster launch and the kernel allow: at most
// kMaxClusterBlocks blocks of whole warps, each of at most `max_threads`.
struct ClusterBounds {
  int64_t blocks, threads;
  // Threads of work one cluster holds; 0 when `c` allows no cluster.
  int64_t capacity() const { return blocks >= 2 && threads >= 32 ? blocks * threads : 0; }
};
inline ClusterBounds cluster_bounds(const ClusterShape& c, int max_threads) {
  const int64_t threads = c.threads < max_threads ? c.threads : max_threads;
  return ClusterBounds{c.blocks < kMaxClusterBlocks ? c.blocks : kMaxClusterBlocks,
                       threads / 32 * 32};
}

// One cluster as `c` asks for `work` threads' worth of items, on a device with
// clusters; otherwise scope kOneBlock with no threads (take another launch).
// A device with no room for a cluster past the portable size gets one of that
// size, where it holds the work. A cluster needs no scratch, so a stream first
// seen inside a capture gets it too.
template <class Device>
Launch plan_cluster(const Device& d, KernelId k, int64_t work, const ClusterShape& c,
                    int max_threads) {
  const Launch none{Scope::kOneBlock, 0, 0, false};
  ClusterBounds most = cluster_bounds(c, max_threads);
  // Each pass returns, or shrinks the cluster to the portable size, at which
  // the next pass returns. A retry that shrinks returns within one pass per
  // cluster size (2 to 16 blocks), so the bound changes no plan; one that does
  // not shrink stops at the bound instead of looping forever.
  for (int pass = 0; pass < kMaxClusterBlocks; ++pass) {
    if (work <= c.block_max || work > most.capacity()) return none;
    int64_t threads = ((work + most.blocks - 1) / most.blocks + 31) / 32 * 32;
    const int64_t least = ((int64_t)c.min_threads + 31) / 32 * 32;
    if (threads < least) threads = least;
    if (threads > most.threads) threads = most.threads;
    const int64_t blocks = (work + threads - 1) / threads;
    if (blocks < 2 || blocks > most.blocks || !d.clusters()) return none;
    if (d.cluster_fits(k, (int)blocks, (int)threads))
      return Launch{Scope::kCluster, (int)blocks, (int)threads, true};
    if (most.blocks <= kPortableClusterBlocks) return none;
    most.blocks = kPortableClusterBlocks;
  }
  return none;
}

// draft_model_preprocess: a thread a request, in one cluster, a grid or one
// block.
template <class Device>
Launch plan_preprocess_launch(const Device& d, int64_t bsz, bool has_scratch,
                              const LaunchShape& shape) {
  const Launch c = plan_cluster(d, kPreprocessKernel, bsz, shape.preprocess_cluster,
                                kPreprocessMaxThreads);
  if (c.threads > 0) return c;
  return plan_grid(d, kPreprocessKernel, kPreprocessMaxThreads, bsz, has_scratch,
                   shape.preprocess_one_block_max, shape.preprocess_grid_threads);
}

// Whether update_attn_mask_offsets shares long prompts out among a block's
// threads: where a prompt of more than kShareTokens tokens may be in the batch.
inline bool shares_prompts(int64_t num_tokens, int64_t mask_full_cols) {
  return mask_full_cols > kShareTokens && num_tokens > kShareTokens;
}

// The most lanes a request (32, then 16) that keep the batch in one block; on
// a device with clusters, one block only up to shape.mask_cluster.block_max
// threads, then the most lanes (32, 16) that keep it in one cluster (8 lanes
// in a cluster did worse than the grid); past that, a warp a request up to
// shape.mask_wide_max requests, half a warp up to shape.mask_half_max, and 8
// lanes beyond: more lanes a request queue more instructions than the SMs
// issue in time, fewer make a long prompt take more turns.
inline int auto_mask_lanes(int64_t bsz, const LaunchShape& shape, bool device_clusters) {
  const ClusterShape& c = shape.mask_cluster;
  const bool clusters = c.blocks >= 2 && device_clusters;
  int64_t one_block = shape.one_block_max < kMaskMaxThreads ? shape.one_block_max : kMaskMaxThreads;
  if (clusters && c.block_max < one_block) one_block = c.block_max;
  if (bsz * 32 <= one_block) return 32;
  if (bsz * 16 <= one_block) return 16;
  if (clusters) {
    const int64_t capacity = cluster_bounds(c, kMaskMaxThreads).capacity();
    for (int lanes = 32; lanes >= 16; lanes /= 2)
      if (bsz * lanes <= capacity) return lanes;
  }
  if (bsz <= shape.mask_wide_max) return 32;
  if (bsz <= shape.mask_half_max) return 16;
  return 8;
}

// update_attn_mask_offsets' launch of `k` (its lanes a request and sharing):
// a group of lanes for every request up to shape.mask_max_warps warps of them
// (past that, a group takes several in turn: a bigger grid would cost more in
// its barrier than it saves), or enough threads for the zeroing (16-byte
// stores), whichever is more. Where long prompts are shared out, each is
// walked by the threads of one block, so blocks past one a request would only
// zero: with no more requests than a cluster has blocks, the zeroing asks for
// at most a grid block's threads a request (one long prompt then runs in one
// block, not a cluster of several that only zero). 8 lanes a request never
// run as a cluster (auto_mask_lanes picks them past any cluster's reach, and
// those kernels are not built).
constexpr bool cluster_lanes(int lanes) { return lanes >= 16; }
template <class Device>
Launch plan_mask_launch(const Device& d, KernelId k, int64_t num_tokens, int64_t bsz,
                        bool has_scratch, const LaunchShape& shape) {
  const int64_t max_groups = (int64_t)shape.mask_max_warps * (32 / k.lanes);
  const int64_t stores = (2 * num_tokens + 3) / 4;
  const int64_t per_request = bsz * shape.grid_threads;
  const bool capped = k.share && bsz <= shape.mask_cluster.blocks && per_request < stores;
  const int64_t zeroing = capped ? per_request : stores;
  const int64_t groups_work = (bsz < max_groups ? bsz : max_groups) * k.lanes;
  const int64_t work = groups_work > zeroing ? groups_work : zeroing;
  if (cluster_lanes(k.lanes)) {
    const Launch c = plan_cluster(d, k, work, shape.mask_cluster, kMaskMaxThreads);
    if (c.threads > 0) return c;
  }
  return plan_grid(d, k, kMaskMaxThreads, work, has_scratch, shape.one_block_max,
                   shape.grid_threads);
}

// The mask op's whole plan: the kernel (lanes, sharing) and its launch.
// lanes 0 in `kernel` when shape.mask_lanes asks for a number of lanes the
// kernels are not built for (the launcher refuses it).
struct MaskLaunch {
  KernelId kernel;
  Launch launch;
};
inline bool built_lanes(int lanes) { return lanes == 32 || lanes == 16 || lanes == 8; }
template <class Device>
MaskLaunch plan_mask_op(const Device& d, int64_t num_tokens, int64_t mask_full_cols, int64_t bsz,
                       bool has_scratch, const LaunchShape& shape) {
  const int lanes =
      shape.mask_lanes != 0 ? shape.mask_lanes : auto_mask_lanes(bsz, shape, d.clusters());
  const KernelId k{lanes, shares_prompts(num_tokens, mask_full_cols)};
  if (!built_lanes(lanes)) return MaskLaunch{KernelId{0, false}, Launch{Scope::kOneBlock, 0, 0, false}};
  return MaskLaunch{k, plan_mask_launch(d, k, num_tokens, bsz, has_scratch, shape)};
}

}  // namespace mtp
