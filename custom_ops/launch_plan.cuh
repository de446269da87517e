// Host code: how each launch is shaped (one block, one thread-block cluster
// or a cooperative grid; blocks, threads, lanes a request) from the batch,
// the device's facts (asked once per device) and LaunchShape, and the launch
// itself. Part of mtp_kernels.cu (included there only).
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "agreement.cuh"
#include "mask_kernel.cuh"
#include "mtp_kernels.h"
#include "preprocess_kernel.cuh"

namespace mtp {
namespace {

constexpr int kMaxDevices = 64;

int threads_for(int64_t work, int max_threads) {
  const int64_t warps = (work + 31) / 32;
  const int64_t threads = (warps < 1 ? 1 : warps) * 32;
  return threads > max_threads ? max_threads : (int)threads;
}

// Per device, asked once: how many blocks of each grid kernel fit at once
// with the default shape (0: not asked yet; -1: no cooperative launches), and
// whether the device has programmatic dependent launches.
struct DeviceFacts {
  int resident;
  bool overlap;  // sm_90 and later: programmatic dependent launches, clusters
};

// The device's compute capability major, asked once per device (-1: unknown).
int device_major(int dev) {
  static std::atomic<int> cached[kMaxDevices];
  int major = cached[dev].load(std::memory_order_relaxed);
  if (major == 0) {
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
      major = -1;
    cached[dev].store(major, std::memory_order_relaxed);
  }
  return major;
}
// sm_90 and later: programmatic dependent launches and thread-block clusters.
bool has_clusters(int dev) { return device_major(dev) >= 9; }

// A cache per kernel (kKernel: the function itself, not its type, which
// kernels of different lanes share) and device, for the block size last
// asked about: the block size in the high half, the count in the low half, so
// that one atomic holds both.
template <auto kKernel>
DeviceFacts device_facts(int dev, int grid_threads) {
  static std::atomic<uint64_t> cached_resident[kMaxDevices];
  const uint64_t cached = cached_resident[dev].load(std::memory_order_relaxed);
  int resident = cached >> 32 == (uint64_t)grid_threads ? (int)(uint32_t)cached : 0;
  if (resident == 0) {
    int cooperative = 0, sms = 0, per_sm = 0;
    const bool ok =
        cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, grid_threads, 0) ==
            cudaSuccess;
    resident = ok && cooperative && sms * per_sm > 0 ? sms * per_sm : -1;
    cached_resident[dev].store((uint64_t)grid_threads << 32 | (uint32_t)resident,
                               std::memory_order_relaxed);
  }
  return DeviceFacts{resident, has_clusters(dev)};
}

// Lets kKernel run in clusters of more than the portable size, once per
// kernel and device (the launch, and the occupancy query, refuse them
// otherwise).
template <auto kKernel>
bool allow_big_clusters(int dev) {
  static std::atomic<int> allowed[kMaxDevices];  // 0: not asked; 1: yes; 2: no
  int a = allowed[dev].load(std::memory_order_relaxed);
  if (a == 0) {
    const bool ok = cudaFuncSetAttribute(kKernel, cudaFuncAttributeNonPortableClusterSizeAllowed,
                                         1) == cudaSuccess;
    if (!ok) (void)cudaGetLastError();  // a refusal means: no big clusters
    a = ok ? 1 : 2;
    allowed[dev].store(a, std::memory_order_relaxed);
  }
  return a == 1;
}

// Whether a cluster of `blocks` blocks of `threads` threads of kKernel fits
// on device `dev`, asked once per kernel, device and cluster size (for the
// block size last asked about: the block size above 2 bits of answer, 1 fits,
// 2 does not).
template <auto kKernel>
bool cluster_fits(int dev, int blocks, int threads) {
  static std::atomic<uint32_t> cached[kMaxDevices][kMaxClusterBlocks + 1];
  const uint32_t c = cached[dev][blocks].load(std::memory_order_relaxed);
  if (c >> 2 == (uint32_t)threads) return (c & 3) == 1;
  if (blocks > kPortableClusterBlocks && !allow_big_clusters<kKernel>(dev)) return false;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = blocks;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.attrs = &attr;
  config.numAttrs = 1;
  int clusters = 0;
  const bool fits = cudaOccupancyMaxActiveClusters(&clusters, kKernel, &config) == cudaSuccess &&
                    clusters > 0;
  if (!fits) (void)cudaGetLastError();  // a refusal is an answer, not an error to report
  cached[dev][blocks].store((uint32_t)threads << 2 | (fits ? 1u : 2u), std::memory_order_relaxed);
  return fits;
}

// A launch: its grid, and the device facts it was sized with.
struct Launch {
  int blocks;  // 0: the single block
  int threads;
  bool overlap;
  bool cluster = false;  // the blocks are one cluster, not a cooperative grid
};

// The grid path for `work` threads' worth of items, or the single block when
// the work is small, there is no scratch (a stream first seen inside a
// capture has none), or the device has no cooperative launches. Never more
// blocks than can be resident at once (a cooperative launch needs that) nor
// than the scratch has slots for. A cooperative launch is captured into a CUDA
// graph as a cooperative kernel node, so a captured step keeps the grid too.
// `max_threads`: the kernel's own bound on its blocks; `one_block_max` and
// `shape_grid_threads`: the op's fields of `shape`.
template <auto kGridKernel>
Launch plan_launch(int max_threads, int64_t work, const GridScratch& scratch,
                   const LaunchShape& shape, int one_block_max, int shape_grid_threads) {
  const int grid_threads = shape_grid_threads < max_threads ? shape_grid_threads : max_threads;
  int dev = 0;
  DeviceFacts facts{-1, false};
  if (cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < kMaxDevices)
    facts = device_facts<kGridKernel>(dev, grid_threads);
  const bool overlap = shape.overlap_launch && facts.overlap;
  Launch one{0, threads_for(work, max_threads), overlap};
  if (work <= one_block_max || scratch.slots == nullptr || facts.resident < 0) return one;
  int64_t blocks = (work + grid_threads - 1) / grid_threads;
  if (blocks > facts.resident) blocks = facts.resident;
  if (blocks > kGridSlots) blocks = kGridSlots;
  if (blocks < 2) return one;
  return Launch{(int)blocks, grid_threads, overlap};
}

// `c` within what a cluster launch and the kernel allow: at most
// kMaxClusterBlocks blocks of whole warps, each of at most `max_threads`. Both
// the launch (plan_cluster) and the mask op's choice of lanes
// (auto_mask_lanes) size a cluster from this.
struct ClusterBounds {
  int64_t blocks, threads;
  // Threads of work one cluster holds; 0 when `c` allows no cluster.
  int64_t capacity() const { return blocks >= 2 && threads >= 32 ? blocks * threads : 0; }
};
ClusterBounds cluster_bounds(const ClusterShape& c, int max_threads) {
  const int64_t threads = c.threads < max_threads ? c.threads : max_threads;
  return ClusterBounds{c.blocks < kMaxClusterBlocks ? c.blocks : kMaxClusterBlocks,
                       threads / 32 * 32};
}

// One cluster as `c` asks for `work` threads' worth of items, on a device
// with clusters; otherwise blocks == 0. A cluster launch needs no scratch, so a
// stream first seen inside a capture gets it too. `max_threads`: the
// kernel's own bound on its blocks.
template <auto kClusterKernel>
Launch plan_cluster(int64_t work, const ClusterShape& c, int max_threads, bool overlap_launch) {
  const Launch none{0, 0, false};
  ClusterBounds most = cluster_bounds(c, max_threads);
  int dev = -1;
  // A device with no room for a cluster past the portable size gets one of
  // that size, where it holds the work.
  for (;;) {
    if (work <= c.block_max || work > most.capacity()) return none;
    int64_t threads = ((work + most.blocks - 1) / most.blocks + 31) / 32 * 32;
    const int64_t least = ((int64_t)c.min_threads + 31) / 32 * 32;
    if (threads < least) threads = least;
    if (threads > most.threads) threads = most.threads;
    const int64_t blocks = (work + threads - 1) / threads;
    if (blocks < 2 || blocks > most.blocks) return none;
    if (dev < 0 && (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices ||
                    !has_clusters(dev)))
      return none;
    if (cluster_fits<kClusterKernel>(dev, (int)blocks, (int)threads))
      return Launch{(int)blocks, (int)threads, overlap_launch, true};
    if (most.blocks <= kPortableClusterBlocks) return none;
    most.blocks = kPortableClusterBlocks;
  }
}

// Launches kKernel with its own parameter types, as one cluster (past the
// portable size, with the kernel's leave) or cooperatively for a grid, and as
// a programmatic dependent launch where the device has it.
template <auto kKernel, typename... Args>
cudaError_t launch(const Launch& l, cudaStream_t stream, Args&&... args) {
  if (l.cluster && l.blocks > kPortableClusterBlocks) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices ||
        !allow_big_clusters<kKernel>(dev))
      return cudaErrorInvalidConfiguration;
  }
  cudaLaunchAttribute attrs[2];
  unsigned n = 0;
  if (l.blocks > 0 && l.cluster) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = l.blocks;
    attrs[n].val.clusterDim.y = 1;
    attrs[n].val.clusterDim.z = 1;
    ++n;
  } else if (l.blocks > 0) {
    attrs[n].id = cudaLaunchAttributeCooperative;
    attrs[n].val.cooperative = 1;
    ++n;
  }
  if (l.overlap) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(l.blocks > 0 ? l.blocks : 1);
  config.blockDim = dim3(l.threads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = attrs;
  config.numAttrs = n;
  return cudaLaunchKernelEx(&config, kKernel, std::forward<Args>(args)...);
}

// Calls `f` with the scope launch `l` runs in (its kernels' template argument).
template <typename F>
cudaError_t with_scope(const Launch& l, const GridScratch& scratch, F f) {
  if (l.blocks > 0 && l.cluster) return f(Cluster{});
  if (l.blocks > 0) return f(WholeGrid{scratch});
  return f(OneBlock{});
}

// draft_model_preprocess: a thread a request, in one cluster, a grid or one
// block.
Launch plan_preprocess_launch(int64_t bsz, const GridScratch& scratch, const LaunchShape& shape) {
  const Launch c = plan_cluster<preprocess_kernel<Cluster>>(
      bsz, shape.preprocess_cluster, kPreprocessMaxThreads, shape.overlap_launch);
  if (c.blocks > 0) return c;
  return plan_launch<preprocess_kernel<WholeGrid>>(kPreprocessMaxThreads, bsz, scratch, shape,
                                                   shape.preprocess_one_block_max,
                                                   shape.preprocess_grid_threads);
}

// update_attn_mask_offsets with kLanes lanes a request: a group of lanes for
// every request up to shape.mask_max_warps warps of them (past that, a group
// takes several in turn: a bigger grid would cost more in its barrier than it
// saves, measured with benchmarks/graph_probe.cu), or enough threads for the
// zeroing (16-byte stores), whichever is more. Where long prompts are shared
// out, each is walked by the threads of one block, so blocks past one a
// request would only zero: with no more requests than a cluster has blocks,
// the zeroing asks for at most a grid block's threads a request. One request
// with a prompt of 1413 tokens: one block of 256 threads instead of a cluster
// of three, 9.36 -> 8.00 us a step (graph probe). With more requests the cap
// made a cluster of a grid, two prompts a block: 32 requests, 22.4 -> 24.6.
template <int kLanes, bool kShare>
Launch plan_mask_launch(int64_t num_tokens, int64_t bsz, const GridScratch& scratch,
                        const LaunchShape& shape) {
  const int64_t max_groups = (int64_t)shape.mask_max_warps * (32 / kLanes);
  const int64_t stores = (2 * num_tokens + 3) / 4;
  const int64_t per_request = bsz * shape.grid_threads;
  const bool capped = kShare && bsz <= shape.mask_cluster.blocks && per_request < stores;
  const int64_t zeroing = capped ? per_request : stores;
  const int64_t groups_work = (bsz < max_groups ? bsz : max_groups) * kLanes;
  const int64_t work = groups_work > zeroing ? groups_work : zeroing;
  const Launch c = plan_cluster<mask_kernel<kLanes, kShare, Cluster>>(
      work, shape.mask_cluster, kMaskMaxThreads, shape.overlap_launch);
  if (c.blocks > 0) return c;
  return plan_launch<mask_kernel<kLanes, kShare, WholeGrid>>(
      kMaskMaxThreads, work, scratch, shape, shape.one_block_max, shape.grid_threads);
}

// The most lanes a request (32, then 16) that keep the batch in one block;
// on a device with clusters, one block only up to shape.mask_cluster.block_max
// threads, then the most lanes (32, 16) that keep it in one cluster (8 lanes
// in a cluster was slower than the grid at 512 requests); past
// that, a warp a request up to shape.mask_wide_max requests, half a warp up
// to shape.mask_half_max, and 8 lanes beyond: more lanes a request queue
// more instructions than the SMs issue in time, fewer make a long prompt
// take more turns. Measured with benchmarks/graph_probe.cu (docs/performance.md).
int auto_mask_lanes(int64_t bsz, const LaunchShape& shape) {
  int dev = 0;
  const ClusterShape& c = shape.mask_cluster;
  const bool clusters = c.blocks >= 2 && cudaGetDevice(&dev) == cudaSuccess && dev >= 0 &&
                        dev < kMaxDevices && has_clusters(dev);
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

// Calls f(std::integral_constant<int, lanes>) with the lanes a request that
// shape.mask_lanes asks for (0: auto_mask_lanes).
template <typename F>
cudaError_t with_mask_lanes(int64_t bsz, const LaunchShape& shape, F f) {
  switch (shape.mask_lanes != 0 ? shape.mask_lanes : auto_mask_lanes(bsz, shape)) {
    case 32: return f(std::integral_constant<int, 32>{});
    case 16: return f(std::integral_constant<int, 16>{});
    case 8: return f(std::integral_constant<int, 8>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 2: return f(std::integral_constant<int, 2>{});
    default: return cudaErrorInvalidValue;
  }
}

// Calls f(std::bool_constant<shares_prompts(t)>), false where `shape` says
// never.
template <typename F>
cudaError_t with_prompt_sharing(const MaskTensors& t, const LaunchShape& shape, F f) {
  if (shape.share_long_prompts && shares_prompts(t)) return f(std::true_type{});
  return f(std::false_type{});
}

}  // namespace
}  // namespace mtp
