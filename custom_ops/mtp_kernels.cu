// CUDA drivers of the per-request rules in mtp_bookkeeping.h.
//
// Each op is one launch that validates the whole batch before it writes
// anything: the threads stride over the batch, agree on the first failing
// request, and only then write. Up to kMaxThreads requests that is one block
// (a shared-memory agreement, one request a thread). Past it, where one block
// would take each thread through several requests one after another, the
// kernel runs as a cooperative grid, every block resident at once, and the
// blocks agree through per-block slots and grid barriers, also inside a CUDA
// graph capture (where the stream's scratch was made by a warm-up call).
#include <cooperative_groups.h>

#include <atomic>
#include <climits>
#include <cstdint>

#include "mtp_kernels.h"

namespace mtp {
namespace {

namespace cg = cooperative_groups;

constexpr int kMaxThreads = 1024;  // the single-block path: one block, up to this many
constexpr int kGridThreads = 256;  // threads per block of the grid path
constexpr long long kNone = LLONG_MAX;
constexpr int kMaxDevices = 64;

int threads_for(int64_t work) {
  const int64_t warps = (work + 31) / 32;
  const int64_t threads = (warps < 1 ? 1 : warps) * 32;
  return threads > kMaxThreads ? kMaxThreads : (int)threads;
}

// Block-wide minimum, returned to every thread of the block.
__device__ long long block_min(long long v) {
  __shared__ long long m;
  if (threadIdx.x == 0) m = kNone;
  __syncthreads();
  if (v != kNone) atomicMin(&m, v);
  __syncthreads();
  const long long r = m;
  __syncthreads();  // everyone has read m before a later call resets it
  return r;
}

// How a kernel's threads share out the batch and agree on it: one block...
struct OneBlock {
  __device__ int64_t first() const { return threadIdx.x; }
  __device__ int64_t stride() const { return blockDim.x; }
  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ long long min_all(long long v) const { return block_min(v); }
  __device__ int or_all(int v) const { return __syncthreads_or(v); }
};

// ...or a cooperative grid. Each block puts its own result in its slot; after
// the grid barrier (which also orders every write before it) each block reads
// all the slots, so all blocks reach the same answer.
struct WholeGrid {
  GridScratch scratch;
  __device__ int64_t first() const { return blockIdx.x * (int64_t)blockDim.x + threadIdx.x; }
  __device__ int64_t stride() const { return (int64_t)gridDim.x * blockDim.x; }
  __device__ bool leader() const { return blockIdx.x == 0 && threadIdx.x == 0; }
  __device__ long long min_all(long long v) const {
    const long long b = block_min(v);
    if (threadIdx.x == 0) scratch.min_slots[blockIdx.x] = b;
    cg::this_grid().sync();
    long long g = kNone;
    // __ldcg: from L2, where the other blocks' slots are (L1 is per SM).
    for (unsigned k = threadIdx.x; k < gridDim.x; k += blockDim.x) {
      const long long v = __ldcg(scratch.min_slots + k);
      g = v < g ? v : g;
    }
    return block_min(g);
  }
  __device__ int or_all(int v) const {
    const int b = __syncthreads_or(v);
    if (threadIdx.x == 0) scratch.or_slots[blockIdx.x] = b;
    cg::this_grid().sync();
    int g = 0;
    for (unsigned k = threadIdx.x; k < gridDim.x; k += blockDim.x) g |= __ldcg(scratch.or_slots + k);
    return __syncthreads_or(g);
  }
};

// Writes a report into the host's mapped memory: every field but `code`, a
// system-wide fence, then `code`. The host polls `code` (gpu_record.h), so when
// it sees a value there the rest is already there too.
__device__ void publish(BatchResult* dst, const BatchResult& r) {
  dst->any_running = r.any_running;
  dst->request = r.request;
  for (int k = 0; k < 4; ++k) dst->v[k] = r.v[k];
  dst->origin = r.origin;
  __threadfence_system();
  *reinterpret_cast<volatile int64_t*>(&dst->code) = r.code;
}

// The leader only: a batch's result. A synchronous call reports every result
// on the host; an asynchronous one keeps only a failure, on the device.
__device__ void deliver(const Reporting& out, const BatchResult& r) {
  if (out.report != nullptr) {
    publish(out.report, r);
  } else if (r.code != kOk) {
    *out.pending = r;
  }
}

// The whole-batch agreement both kernels start with: `first_bad()` gives the
// earliest failing request among this thread's share (kNone if none), all
// agree on the earliest overall, and the leader reports it, worded by the
// serial `check(i)`. Returns whether the batch may be written. An error an
// earlier asynchronous call left pending also stops the batch: it is marked
// deferred, and handed to the host (and cleared) if this call is synchronous.
template <typename Scope, typename FirstBad, typename CheckRequest>
__device__ bool batch_is_valid(const Scope& scope, OpId op, const Reporting& out,
                               FirstBad first_bad, CheckRequest check) {
  constexpr long long kPendingError = -1;
  // Read while the batch is checked, not before: it is a global load.
  const int64_t pending_code = scope.leader() ? out.pending->code : kOk;
  long long mine = first_bad();
  if (pending_code != kOk) mine = kPendingError;
  const long long bad = scope.min_all(mine);
  if (bad == kNone) return true;
  if (scope.leader()) {
    if (bad == kPendingError) {
      BatchResult r = *out.pending;
      r.origin |= kDeferred;
      if (out.report != nullptr) {
        out.pending->code = kOk;
        publish(out.report, r);
      } else {
        out.pending->origin = r.origin;
      }
    } else {
      deliver(out, batch_failure(op, bad, check(bad)));
    }
  }
  return false;
}

template <typename Scope>
__global__ void preprocess_kernel(PreprocessTensors t, PreprocessAttrs a, int64_t bsz,
                                  bool* not_need_stop, Reporting out, Scope scope) {
  // One request a thread.
  auto check = [&](int64_t i) { return check_preprocess(t, plan_preprocess(t, a, i), i); };
  auto first_bad = [&]() {
    long long mine = kNone;
    // Unrolled so that each thread has several requests' loads in flight.
#pragma unroll 4
    for (int64_t i = scope.first(); i < bsz; i += scope.stride()) {
      if (mine == kNone && check(i).code != kOk) mine = i;
    }
    return mine;
  };
  if (!batch_is_valid(scope, kPreprocessOp, out, first_bad, check)) return;
  int any = 0;
#pragma unroll 4
  for (int64_t i = scope.first(); i < bsz; i += scope.stride())
    any |= apply_preprocess(t, plan_preprocess(t, a, i), i) ? 1 : 0;
  any = scope.or_all(any);
  if (scope.leader()) {
    deliver(out, batch_ok(any != 0));
    if (not_need_stop != nullptr) *not_need_stop = any != 0;
  }
}

// Zeroes out[0, n), 16 bytes a store where the buffer allows.
template <typename Scope>
__device__ void zero(const Scope& scope, int32_t* out, int64_t n) {
  int64_t done = 0;
  if ((reinterpret_cast<uintptr_t>(out) & 15) == 0) {
    int4* v = reinterpret_cast<int4*>(out);
    for (int64_t k = scope.first(); k < n / 4; k += scope.stride()) v[k] = make_int4(0, 0, 0, 0);
    done = n / 4 * 4;
  }
  for (int64_t k = done + scope.first(); k < n; k += scope.stride()) out[k] = 0;
}

constexpr unsigned kFullWarp = 0xffffffffu;

// One request a warp: its lanes share the request's tokens, so a prompt's
// per-token reads and every output write are coalesced (a thread walking a
// request alone touched one cache line per token). Block sizes are multiples
// of 32, so every warp is whole.
template <typename Scope>
__global__ void mask_kernel(MaskTensors t, int64_t bsz, Reporting out, Scope scope) {
  // Every entry is written: zeros, then each request's odd entries. The output
  // is a fresh tensor, so it may be zeroed before the batch is validated (the
  // barriers in batch_is_valid order it before the writes below).
  zero(scope, t.out, 2 * t.num_tokens);
  const int lane = threadIdx.x % 32;
  const int64_t warp = scope.first() / 32, warps = scope.stride() / 32;
  auto check = [&](int64_t i) { return check_mask(t, plan_mask(t, i), i); };
  auto first_bad = [&]() {
    for (int64_t i = warp; i < bsz; i += warps) {  // warp-uniform
      const MaskPlan p = plan_mask(t, i);
      bool bad = check_mask_request(t, p, i).code != kOk;
      if (!bad && checks_tokens(p)) {
        for (int32_t j = lane; j < p.n; j += 32) bad |= check_mask_token(t, i, j).code != kOk;
        bad = __any_sync(kFullWarp, bad);
      }
      if (bad) return (long long)i;
    }
    return kNone;
  };
  if (!batch_is_valid(scope, kMaskOp, out, first_bad, check)) return;
  for (int64_t i = warp; i < bsz; i += warps) {
    const MaskPlan p = plan_mask(t, i);
    if (p.branch == kSkip) continue;
    const int32_t cursor = p.branch == kDecode ? mask_cursor(t, i) : 0;
    __syncwarp();  // every lane has read the request before any lane writes it
    int32_t* o = t.out + 2 * (int64_t)p.q;
    for (int32_t j = lane; j < p.n; j += 32) o[2 * j + 1] = mask_token_end(t, p, i, j, cursor);
    if (writes_decode_states(p)) {
      for (int64_t j = lane; j < t.decode_states_cols; j += 32) write_decode_state(t, p, i, j);
    }
    if (lane == 0) finish_mask_request(t, p, i, cursor);
  }
  if (scope.leader()) deliver(out, batch_ok(false));
}

// Blocks of the grid path for `work` items, or 0 when the single block is the
// one to use: small work, no scratch (a stream first seen inside a capture has
// none), or a device without cooperative launches. Never more blocks than can
// be resident at once (a cooperative launch needs that) nor than the scratch
// has slots for. A cooperative launch is captured into a CUDA graph as a
// cooperative kernel node, so a captured step keeps the grid too.
template <typename Kernel>
int grid_blocks(Kernel kernel, int64_t work, const GridScratch& scratch) {
  if (work <= kMaxThreads || scratch.min_slots == nullptr) return 0;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return 0;
  // Per device and kernel: how many blocks fit at once (0: not asked yet; -1:
  // no cooperative launches here).
  static std::atomic<int> resident_blocks[kMaxDevices];
  int resident = resident_blocks[dev].load(std::memory_order_relaxed);
  if (resident == 0) {
    int cooperative = 0, sms = 0, per_sm = 0;
    const bool ok =
        cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGridThreads, 0) ==
            cudaSuccess;
    resident = ok && cooperative && sms * per_sm > 0 ? sms * per_sm : -1;
    resident_blocks[dev].store(resident, std::memory_order_relaxed);
  }
  if (resident < 0) return 0;
  int64_t blocks = (work + kGridThreads - 1) / kGridThreads;
  if (blocks > resident) blocks = resident;
  if (blocks > kGridSlots) blocks = kGridSlots;
  return blocks >= 2 ? (int)blocks : 0;
}

template <typename T>
struct Same {
  using type = T;
};

// A cooperative launch of `kernel` with its own parameter types (the pack is
// deduced from the kernel alone, so the arguments convert to it).
template <typename... Params>
cudaError_t launch_grid(void (*kernel)(Params...), int blocks, cudaStream_t stream,
                        typename Same<Params>::type... args) {
  void* params[] = {&args...};
  return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), blocks, kGridThreads,
                                     params, 0, stream);
}

}  // namespace

cudaError_t launch_preprocess(const PreprocessTensors& t, const PreprocessAttrs& a, int64_t bsz,
                              bool* not_need_stop, Reporting out, GridScratch scratch,
                              cudaStream_t stream) {
  const int blocks = grid_blocks(preprocess_kernel<WholeGrid>, bsz, scratch);
  if (blocks > 0) {
    return launch_grid(preprocess_kernel<WholeGrid>, blocks, stream, t, a, bsz, not_need_stop,
                       out, WholeGrid{scratch});
  }
  preprocess_kernel<<<1, threads_for(bsz), 0, stream>>>(t, a, bsz, not_need_stop, out,
                                                        OneBlock{});
  return cudaGetLastError();
}

cudaError_t launch_mask(const MaskTensors& t, int64_t bsz, Reporting out, GridScratch scratch,
                        cudaStream_t stream) {
  // A warp for every kMaskRequestsPerWarp requests: one block up to
  // 32 * kMaskRequestsPerWarp of them, a grid past that (or past the zeroing).
  constexpr int64_t kMaskRequestsPerWarp = 4;
  const int64_t zeroing = (2 * t.num_tokens + 3) / 4;  // 16-byte stores
  const int64_t warps_work = (bsz + kMaskRequestsPerWarp - 1) / kMaskRequestsPerWarp * 32;
  const int64_t work = warps_work > zeroing ? warps_work : zeroing;
  const int blocks = grid_blocks(mask_kernel<WholeGrid>, work, scratch);
  if (blocks > 0) {
    return launch_grid(mask_kernel<WholeGrid>, blocks, stream, t, bsz, out, WholeGrid{scratch});
  }
  mask_kernel<<<1, threads_for(work), 0, stream>>>(t, bsz, out, OneBlock{});
  return cudaGetLastError();
}

}  // namespace mtp
