// Whether the launcher takes thread-block clusters and programmatic dependent
// launches exactly where the kernel code running on the GPU has them, for
// tests/test_arch_probe.py (GPU only). Built with plain nvcc for the archs
// under test, beside custom_ops/bench/bench_kernels.cu built for sm_90 (its
// late writer lets the next kernel launch early wherever the device can).
//
//   arch_probe          the checks below; prints what it saw, then "ok"
//   arch_probe cluster  one agreement kernel launched as a cluster behind the
//                       launcher's back: "cluster ran" where the code has
//                       clusters; elsewhere the launch or the kernel fails
//
// It includes the kernels' source (through the agreement floor, which
// includes mtp_kernels.cu), so it asks the same questions as the op library
// and launches the same kernels, compiled for the same archs.
//
// Checks:
//  - the device facts: clusters and programmatic launches exactly where the
//    device and the kernel image loaded on it are both sm_90 or later;
//  - the plans of both ops at every scope's sizes: no cluster and no
//    programmatic launch without them; with them, every launch overlaps and
//    the middle sizes are clusters;
//  - every such launch runs (a cluster launch of code without clusters
//    traps);
//  - the mask op reads what the kernel before it wrote, where that kernel
//    lets it launch early: code without the wait must not be launched early.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/agreement_floor.cu"
#include "bench/bench_kernels.h"
#include "scope_name.h"

namespace {

int failures = 0;

#define PROBE_CUDA(call)                                                              \
  do {                                                                                \
    const cudaError_t e_ = (call);                                                    \
    if (e_ != cudaSuccess) {                                                          \
      std::printf("FAILED: %s: %s (line %d)\n", #call, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

void expect(bool ok, const char* what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    ++failures;
  }
}

// Every plan either op makes at these sizes: one block, a cluster (on sm_90
// code and devices) and a grid.
const int64_t kPreprocessSizes[] = {1, 128, 129, 1024, 2048, 4096};
const int64_t kMaskSizes[] = {1, 16, 64, 512, 4096};

template <typename T>
T* device_copy(const std::vector<T>& host) {
  T* p = nullptr;
  PROBE_CUDA(cudaMalloc(&p, host.size() * sizeof(T) + 16));
  PROBE_CUDA(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

template <typename T>
std::vector<T> host_copy(const T* p, size_t n) {
  std::vector<T> h(n);
  PROBE_CUDA(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

// bsz decode requests of one token each, request i's mask cursor at
// `cursor0` + i; the op writes each token's offsets and moves the cursor.
struct MaskBatch {
  int64_t bsz;
  mtp::MaskTensors t;
  int32_t* mask_decoder;
  int32_t* out;

  MaskBatch(int64_t n, int32_t cursor0) : bsz(n) {
    std::vector<int32_t> ones(n, 1), zeros(n, 0), decoder(n, 5), cu(n + 1), cursor(n);
    for (int64_t i = 0; i <= n; ++i) cu[i] = (int32_t)i;
    for (int64_t i = 0; i < n; ++i) cursor[i] = cursor0 + (int32_t)i;
    std::vector<unsigned char> no_block_step(n, 0);
    std::memset(&t, 0, sizeof(t));
    t.num_tokens = n;
    t.seq_lens_this_time = device_copy(ones);
    t.seq_lens_encoder = device_copy(zeros);
    t.seq_lens_decoder = device_copy(decoder);
    t.cu_seqlens_q = device_copy(cu);
    t.cu_entries = n + 1;
    t.mask_full = device_copy(zeros);
    t.mask_full_cols = 1;
    mask_decoder = device_copy(cursor);
    t.mask_decoder = mask_decoder;
    t.is_block_step = reinterpret_cast<const bool*>(device_copy(no_block_step));
    t.decode_states = device_copy(zeros);
    t.decode_states_cols = 1;
    t.mask_rollback = device_copy(zeros);
    out = device_copy(std::vector<int32_t>(2 * n, -7));
    t.out = out;
  }
  std::vector<int32_t> result() const {
    std::vector<int32_t> r = host_copy(out, 2 * bsz);
    const std::vector<int32_t> c = host_copy(mask_decoder, bsz);
    r.insert(r.end(), c.begin(), c.end());
    return r;
  }
};

struct Device {
  mtp::GridScratch scratch{nullptr, nullptr};
  mtp::BatchResult* pending = nullptr;
  unsigned* sink = nullptr;
  cudaStream_t stream = nullptr;

  Device() {
    PROBE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    PROBE_CUDA(cudaMalloc(&scratch.slots, mtp::kGridSlots * sizeof(unsigned long long)));
    PROBE_CUDA(cudaMalloc(&scratch.finished, sizeof(unsigned)));
    PROBE_CUDA(cudaMemset(scratch.finished, 0, sizeof(unsigned)));
    PROBE_CUDA(cudaMalloc(&pending, sizeof(mtp::BatchResult)));
    PROBE_CUDA(cudaMemset(pending, 0, sizeof(mtp::BatchResult)));
    PROBE_CUDA(cudaMalloc(&sink, sizeof(unsigned)));
  }
  mtp::Reporting asynchronous() const { return mtp::Reporting{pending, nullptr}; }
  int64_t pending_code() const { return host_copy(pending, 1)[0].code; }
};

int cluster_probe() {
  Device d;
  mtp::Launch l{mtp::Scope::kCluster, 2, 64, false};
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = 2;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(l.blocks);
  config.blockDim = dim3(l.threads);
  config.stream = d.stream;
  config.attrs = &attr;
  config.numAttrs = 1;
  cudaError_t e = cudaLaunchKernelEx(&config, mtp::agreement_kernel<mtp::Cluster>, d.sink,
                                     mtp::Cluster{});
  if (e == cudaSuccess) e = cudaStreamSynchronize(d.stream);
  std::printf(e == cudaSuccess ? "cluster ran\n" : "cluster failed: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  PROBE_CUDA(cudaSetDevice(0));
  if (argc > 1 && std::strcmp(argv[1], "cluster") == 0) return cluster_probe();
  Device d;
  int major = 0, minor = 0;
  PROBE_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  PROBE_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
  cudaFuncAttributes a;
  PROBE_CUDA(cudaFuncGetAttributes(&a, mtp::preprocess_kernel<mtp::Form::kRollback, mtp::WholeGrid>));
  const mtp::CudaDevice<mtp::Form::kRollback> dev =
      mtp::CudaDevice<mtp::Form::kRollback>::current();
  const bool clusters = dev.clusters();
  std::printf("device sm_%d%d; kernel image: PTX %d, binary %d; clusters and programmatic "
              "launches: %d\n", major, minor, a.ptxVersion, a.binaryVersion, clusters ? 1 : 0);
  const int image = a.ptxVersion < a.binaryVersion ? a.ptxVersion : a.binaryVersion;
  expect(clusters == (major >= 9 && image >= 90),
         "clusters and programmatic launches exactly where the device and the image are sm_90+");

  bool any_cluster = false;
  for (int64_t bsz : kPreprocessSizes) {
    const mtp::Launch l = mtp::plan_preprocess_launch(dev, bsz, true, mtp::LaunchShape{});
    std::printf("preprocess %lld: %s %d x %d, overlap %d\n", (long long)bsz, scope_name(l.scope),
                l.blocks, l.threads, l.overlap ? 1 : 0);
    any_cluster |= l.scope == mtp::Scope::kCluster;
    expect(l.overlap == clusters, "a programmatic launch exactly where the code has the wait");
    expect(clusters || l.scope != mtp::Scope::kCluster, "no cluster where the code has none");
    PROBE_CUDA(mtp::launch_preprocess_agreement(bsz, d.sink, d.scratch, d.stream));
    PROBE_CUDA(cudaStreamSynchronize(d.stream));
  }
  for (int64_t bsz : kMaskSizes) {
    const mtp::MaskLaunch p = mtp::plan_mask_op(dev, bsz, 1, bsz, true, mtp::LaunchShape{});
    std::printf("mask %lld: %d lanes, %s %d x %d, overlap %d\n", (long long)bsz, p.kernel.lanes,
                scope_name(p.launch.scope), p.launch.blocks, p.launch.threads,
                p.launch.overlap ? 1 : 0);
    any_cluster |= p.launch.scope == mtp::Scope::kCluster;
    expect(p.launch.overlap == clusters, "a programmatic launch exactly where the code has the wait");
    expect(clusters || p.launch.scope != mtp::Scope::kCluster, "no cluster where the code has none");

    // The op after a writer that lets it launch at once and bumps every
    // cursor 10 ms later, against the op on cursors bumped beforehand.
    MaskBatch late(bsz, 100), early(bsz, 101);
    PROBE_CUDA(mtp::launch_mask<mtp::Form::kRollback>(early.t, bsz, d.asynchronous(), d.scratch, d.stream));
    PROBE_CUDA(mtp_bench::launch_late_bump(late.mask_decoder, bsz, d.stream));
    PROBE_CUDA(mtp::launch_mask<mtp::Form::kRollback>(late.t, bsz, d.asynchronous(), d.scratch, d.stream));
    PROBE_CUDA(cudaStreamSynchronize(d.stream));
    expect(d.pending_code() == mtp::kOk, "the op accepted the batch");
    expect(late.result() == early.result(),
           "the op launched after the late writer read what that writer wrote");
  }
  expect(!clusters || any_cluster, "with clusters, the middle sizes run as one");
  PROBE_CUDA(cudaDeviceSynchronize());
  if (failures != 0) return 1;
  std::printf("ok\n");
  return 0;
}
