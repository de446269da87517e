// Host code: the CUDA side of the launch plan. launch_rules.h decides each
// launch's shape from the batch and the device's facts; this file asks the
// device those facts (once per device, kernel and size, cached), among them
// whether the kernels' code loaded there has clusters and programmatic
// dependent launches, picks the kernel the plan names and launches it. Part
// of mtp_kernels.cu (included there only).
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "agreement.cuh"
#include "launch_rules.h"
#include "mask_kernel.cuh"
#include "mtp_kernels.h"
#include "preprocess_kernel.cuh"

namespace mtp {
namespace {

constexpr int kDevices = 64;  // device ids the caches below hold

// Thread-block clusters and programmatic dependent launches: the arch, as
// major * 10 + minor, from which both the device and the kernels' code have
// them (agreement.cuh and early_start.cuh compile their code where
// __CUDA_ARCH__ >= 900).
constexpr int kClusterArch = 90;

// The arch (major * 10 + minor) that the kernels' code running on the current
// device was compiled for, as the CUDA runtime loaded it: the lower of its
// PTX arch (the __CUDA_ARCH__ the device code was compiled with) and its
// binary's; -1 when unknown. The device's own arch does not tell: a build of
// compute_80 PTX alone runs on an sm_90 device, JIT-compiled there, without
// the cluster code and without the wait for the previous kernel. The kernels
// of one build share one image a device (one translation unit's fat binary,
// of which the runtime loads the SASS for the device's arch, else the PTX it
// JIT-compiles), so one kernel answers for all.
int kernel_image_arch() {
  cudaFuncAttributes a;
  if (cudaFuncGetAttributes(&a, preprocess_kernel<Form::kRollback, WholeGrid>) != cudaSuccess) {
    (void)cudaGetLastError();  // unknown: no clusters, and nothing left to report
    return -1;
  }
  return a.ptxVersion < a.binaryVersion ? a.ptxVersion : a.binaryVersion;
}

// Whether launches on device `dev` (the current one) may be thread-block
// clusters and programmatic dependent launches: the device has them and so
// does the kernels' image that runs there. Asked once per device.
bool cluster_launches(int dev) {
  static std::atomic<int> cached[kDevices];  // 0: not asked; 1: yes; 2: no
  int c = cached[dev].load(std::memory_order_relaxed);
  if (c == 0) {
    int major = 0;
    const bool device = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) ==
                        cudaSuccess;
    if (!device) (void)cudaGetLastError();
    c = device && major * 10 >= kClusterArch && kernel_image_arch() >= kClusterArch ? 1 : 2;
    cached[dev].store(c, std::memory_order_relaxed);
  }
  return c == 1;
}

// How many blocks of kKernel of `grid_threads` threads fit at once; -1 where
// the device has no cooperative launches. Cached per kernel (kKernel: the
// function itself) and device for the block size last asked about: the block
// size in the high half, the count in the low half, so that one atomic holds
// both.
template <auto kKernel>
int resident_blocks(int dev, int grid_threads) {
  static std::atomic<uint64_t> cached_resident[kDevices];
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
  return resident;
}

// Lets kKernel run in clusters of more than the portable size, once per
// kernel and device (the launch, and the occupancy query, refuse them
// otherwise).
template <auto kKernel>
bool allow_big_clusters(int dev) {
  static std::atomic<int> allowed[kDevices];  // 0: not asked; 1: yes; 2: no
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
bool cluster_fits_on(int dev, int blocks, int threads) {
  static std::atomic<uint32_t> cached[kDevices][kMaxClusterBlocks + 1];
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

// Calls f(lanes, share) (std::integral_constant and std::bool_constant) for
// the mask kernel `k`; `otherwise` for lanes it is not built for.
template <typename R, typename F>
R with_mask_kernel(KernelId k, R otherwise, F f) {
  auto with_share = [&](auto lanes) -> R {
    if (k.share) return f(lanes, std::true_type{});
    return f(lanes, std::false_type{});
  };
  switch (k.lanes) {
    case 32: return with_share(std::integral_constant<int, 32>{});
    case 16: return with_share(std::integral_constant<int, 16>{});
    case 8: return with_share(std::integral_constant<int, 8>{});
    default: return otherwise;
  }
}

// The thread's current device (the bindings made it the tensors'); -1 if unknown.
int current_device() {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess || d < 0 || d >= kDevices) d = -1;
  return d;
}

// The device a launch goes to, as launch_rules.h asks about it, for the
// kernels of form F (whose occupancy is their own).
template <Form F>
struct CudaDevice {
  int dev;  // -1: unknown, which plans the one block without overlap

  static CudaDevice current() { return CudaDevice{current_device()}; }
  bool clusters() const { return dev >= 0 && cluster_launches(dev); }
  int resident(KernelId k, int threads) const {
    if (dev < 0) return -1;
    if (k.lanes == 0) return resident_blocks<preprocess_kernel<F, WholeGrid>>(dev, threads);
    return with_mask_kernel(k, -1, [&](auto lanes, auto share) {
      return resident_blocks<mask_kernel<mask_form(F), decltype(lanes)::value, decltype(share)::value,
                                         WholeGrid>>(dev, threads);
    });
  }
  bool cluster_fits(KernelId k, int blocks, int threads) const {
    if (dev < 0) return false;
    if (k.lanes == 0) return cluster_fits_on<preprocess_kernel<F, Cluster>>(dev, blocks, threads);
    return with_mask_kernel(k, false, [&](auto lanes, auto share) {
      constexpr int kLanes = decltype(lanes)::value;
      if constexpr (!cluster_lanes(kLanes)) {
        return false;
      } else {
        return cluster_fits_on<mask_kernel<mask_form(F), kLanes, decltype(share)::value, Cluster>>(dev, blocks,
                                                                                  threads);
      }
    });
  }
};

// Launches kKernel with its own parameter types, as one cluster (past the
// portable size, with the kernel's leave) or cooperatively for a grid, and as
// a programmatic dependent launch where the plan says so. A cluster or a
// programmatic launch where the device or the kernels' image lacks them
// (which no plan asks for) is refused: the kernel would trap, or start
// before the previous kernel's writes are done.
template <auto kKernel, typename... Args>
cudaError_t launch(const Launch& l, cudaStream_t stream, Args&&... args) {
  if (l.threads <= 0) return cudaErrorInvalidConfiguration;
  if (l.scope == Scope::kCluster || l.overlap) {
    const int dev = current_device();
    if (dev < 0 || !cluster_launches(dev)) return cudaErrorInvalidConfiguration;
    if (l.scope == Scope::kCluster && l.blocks > kPortableClusterBlocks &&
        !allow_big_clusters<kKernel>(dev))
      return cudaErrorInvalidConfiguration;
  }
  cudaLaunchAttribute attrs[2];
  unsigned n = 0;
  if (l.scope == Scope::kCluster) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = l.blocks;
    attrs[n].val.clusterDim.y = 1;
    attrs[n].val.clusterDim.z = 1;
    ++n;
  } else if (l.scope == Scope::kGrid) {
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
  config.gridDim = dim3(l.scope == Scope::kOneBlock ? 1 : l.blocks);
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
  if (l.scope == Scope::kCluster) return f(Cluster{});
  if (l.scope == Scope::kGrid) return f(WholeGrid{scratch});
  return f(OneBlock{});
}

// Launches the mask kernel of `kLanes` lanes, kShare, in `scope`: the
// kernels a plan can name (no cluster of 8 lanes; launch_rules.h).
template <Form F, int kLanes, bool kShare, typename Scope, typename... Args>
cudaError_t launch_mask_kernel(const Launch& l, cudaStream_t stream, Scope scope,
                               Args&&... args) {
  if constexpr (std::is_same<Scope, Cluster>::value && !cluster_lanes(kLanes)) {
    return cudaErrorInvalidConfiguration;
  } else {
    return launch<mask_kernel<F, kLanes, kShare, Scope>>(l, stream, std::forward<Args>(args)...,
                                                      scope);
  }
}

}  // namespace
}  // namespace mtp
