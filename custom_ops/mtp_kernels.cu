// CUDA drivers of the per-request rules in mtp_bookkeeping.h.
//
// Each op is one launch that validates the whole batch before it writes
// anything: each thread plans and checks its requests, all threads agree on
// the first failing request (and on whether any request runs), and only then
// do they write, the first request of each thread from the plan it already
// holds. Up to LaunchShape::one_block_max threads of work that is one block
// (an agreement in shared memory). Past it, the kernel runs as a cooperative
// grid, every block resident at once, and the blocks agree through per-block
// slots and one grid barrier, also inside a CUDA graph capture (where the
// stream's scratch was made by a warm-up call).
//
// A captured step is a chain of short kernels, so what costs is latency: each
// kernel has one agreement, and on sm_90 each is launched as a programmatic
// dependent launch, so that its launch overlaps the previous kernel and it
// waits for that kernel's writes only at its first memory access.
#include <cooperative_groups.h>

#include <atomic>
#include <climits>
#include <cstdint>

#include "mtp_kernels.h"

namespace mtp {
namespace {

namespace cg = cooperative_groups;

// The agreement's request numbers are 32-bit, so that a warp agrees in one
// instruction: request i is i + 1, with 0 below every request (an earlier
// call's pending error wins) and kNone above. The launchers refuse batches
// past kMaxBatch.
constexpr unsigned kNone = 0xffffffffu;
constexpr unsigned kPendingError = 0;
constexpr int64_t kMaxBatch = 0xfffffffdll;
__device__ unsigned verdict_of(int64_t i) { return (unsigned)(i + 1); }
__device__ int64_t request_of(unsigned v) { return (int64_t)v - 1; }
constexpr int kMaxDevices = 64;
constexpr unsigned kFullWarp = 0xffffffffu;
// Blocks of the preprocess kernel hold at most this many threads: a request's
// plan, kept in registers from the check to the write, needs more than the 64
// registers a thread of a 1024-thread block can have.
constexpr int kPreprocessMaxThreads = 512;
constexpr int kMaskMaxThreads = 1024;

int threads_for(int64_t work, int max_threads) {
  const int64_t warps = (work + 31) / 32;
  const int64_t threads = (warps < 1 ? 1 : warps) * 32;
  return threads > max_threads ? max_threads : (int)threads;
}

// Programmatic dependent launch. The wait returns once the kernels this one
// depends on have finished and their writes are visible; without such a
// dependency it returns at once. Every kernel here waits before its first
// memory access, so an early launch never reads or writes ahead of the
// previous kernel, ours or not. Letting the next kernel launch early only
// lets it reach its own wait sooner.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void let_next_kernel_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Asks for the line at `p` in this SM's L1 without waiting for it.
__device__ __forceinline__ void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

// What the threads agree on: the first failing request (kNone if none, or
// kPendingError) and whether any request runs (not_need_stop).
struct Verdict {
  unsigned bad;
  unsigned any;
};

__device__ Verdict combine(Verdict a, Verdict b) {
  return Verdict{b.bad < a.bad ? b.bad : a.bad, a.any | b.any};
}

// Warp-wide, to every lane. Blocks are whole warps (threads_for).
__device__ Verdict warp_agree(Verdict v) {
  return Verdict{__reduce_min_sync(kFullWarp, v.bad), __reduce_or_sync(kFullWarp, v.any)};
}

// Block-wide, to every thread, with one barrier. Called once per kernel
// before any grid barrier, so its shared slots are never reused.
__device__ Verdict block_agree(Verdict v) {
  __shared__ unsigned bads[32];
  __shared__ unsigned anys[32];
  v = warp_agree(v);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    bads[warp] = v.bad;
    anys[warp] = v.any;
  }
  __syncthreads();
  Verdict r{kNone, 0};
  if (lane < blockDim.x / 32) r = Verdict{bads[lane], anys[lane]};
  return warp_agree(r);
}

// How a kernel's threads share out the batch and agree on it: one block...
struct OneBlock {
  __device__ int64_t first() const { return threadIdx.x; }
  __device__ int64_t stride() const { return blockDim.x; }
  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ Verdict agree(Verdict v) const { return block_agree(v); }
  // After the writes: true in one thread, once every thread has written.
  __device__ bool reporter() const {
    __syncthreads();
    return threadIdx.x == 0;
  }
};

// ...or a cooperative grid. Each block puts its verdict in its slot; after the
// grid barrier (which also orders every write before it) each warp reads all
// the slots, so every thread reaches the same verdict.
struct WholeGrid {
  GridScratch scratch;
  __device__ int64_t first() const { return blockIdx.x * (int64_t)blockDim.x + threadIdx.x; }
  __device__ int64_t stride() const { return (int64_t)gridDim.x * blockDim.x; }
  __device__ bool leader() const { return blockIdx.x == 0 && threadIdx.x == 0; }
  __device__ Verdict agree(Verdict v) const {
    v = block_agree(v);
    if (threadIdx.x == 0) {
      scratch.bad_slots[blockIdx.x] = v.bad;
      scratch.any_slots[blockIdx.x] = v.any;
    }
    cg::this_grid().sync();
    Verdict g{kNone, 0};
    // __ldcg: from L2, where the other blocks' slots are (L1 is per SM).
    for (unsigned k = threadIdx.x % 32; k < gridDim.x; k += 32)
      g = combine(g, Verdict{__ldcg(scratch.bad_slots + k), __ldcg(scratch.any_slots + k)});
    return warp_agree(g);
  }
  // After the writes: true in one thread of the last block to finish (the
  // blocks count themselves in; the last one resets the count for the next
  // launch on this stream). No block waits for another.
  __device__ bool reporter() const {
    __syncthreads();
    if (threadIdx.x != 0) return false;
    __threadfence();  // this block's writes before its count
    if (atomicAdd(scratch.finished, 1u) != gridDim.x - 1) return false;
    *scratch.finished = 0;
    __threadfence();  // every block's writes before the report
    return true;
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

// The whole-batch agreement both kernels make once: every thread's verdict on
// its share (the earliest failing request, kNone if none) becomes the
// batch's. An error an earlier asynchronous call left pending (`pending_code`,
// read by the leader) also stops the batch: it is marked deferred, and handed
// to the host (and cleared) if this call is synchronous. On a failure the
// leader reports it, worded by the serial `check(i)`, and the caller returns
// without writing; on success a synchronous caller reports once it has
// written (finish).
template <typename Scope, typename CheckRequest>
__device__ Verdict agree_on_batch(const Scope& scope, OpId op, const Reporting& out,
                                  int64_t pending_code, Verdict mine, CheckRequest check) {
  if (pending_code != kOk) mine.bad = kPendingError;
  const Verdict v = scope.agree(mine);
  if (v.bad == kNone || !scope.leader()) return v;
  if (v.bad == kPendingError) {
    BatchResult r = *out.pending;
    r.origin |= kDeferred;
    if (out.report != nullptr) {
      out.pending->code = kOk;
      publish(out.report, r);
    } else {
      out.pending->origin = r.origin;
    }
  } else {
    const int64_t i = request_of(v.bad);
    const BatchResult r = batch_failure(op, i, check(i));
    if (out.report != nullptr) {
      publish(out.report, r);
    } else {
      *out.pending = r;
    }
  }
  return v;
}

// After a successful batch's writes: a synchronous call reports (an
// asynchronous one has nothing to say).
template <typename Scope>
__device__ void finish(const Scope& scope, const Reporting& out, bool any_running) {
  if (out.report != nullptr && scope.reporter()) publish(out.report, batch_ok(any_running));
}

// The leader reads the pending error alongside the batch's first loads.
template <typename Scope>
__device__ int64_t read_pending_code(const Scope& scope, const Reporting& out) {
  return scope.leader() ? out.pending->code : kOk;
}

template <typename Scope>
__global__ void __launch_bounds__(kPreprocessMaxThreads)
    preprocess_kernel(PreprocessTensors t, PreprocessAttrs a, int64_t bsz, bool* not_need_stop,
                      Reporting out, Scope scope) {
  wait_for_previous_kernel();
  let_next_kernel_launch();
  const int64_t pending = read_pending_code(scope, out);
  // Requests first, first + stride, ...: the first one's plan is kept for the
  // write (with enough threads it is the only one); any others are planned
  // again then.
  const int64_t first = scope.first(), stride = scope.stride();
  // The accepted tokens are read only after the agreement: have them near.
  if (first < bsz && t.accept_cols > 0) prefetch_l1(t.accept_tokens + first * t.accept_cols);
  Verdict mine{kNone, 0};
  PreprocessPlan kept;
  if (first < bsz) {
    kept = plan_preprocess(t, a, first);
    if (check_preprocess(t, kept, first).code != kOk) mine.bad = verdict_of(first);
    mine.any = kept.running;
  }
#pragma unroll 4
  for (int64_t i = first + stride; i < bsz; i += stride) {
    const PreprocessPlan p = plan_preprocess(t, a, i);
    if (mine.bad == kNone && check_preprocess(t, p, i).code != kOk) mine.bad = verdict_of(i);
    mine.any |= p.running;
  }
  auto check = [&](int64_t i) { return check_preprocess(t, plan_preprocess(t, a, i), i); };
  const Verdict v = agree_on_batch(scope, kPreprocessOp, out, pending, mine, check);
  if (v.bad != kNone) return;
  if (not_need_stop != nullptr && scope.leader()) *not_need_stop = v.any != 0;
  if (first < bsz) apply_preprocess(t, kept, first);
#pragma unroll 4
  for (int64_t i = first + stride; i < bsz; i += stride)
    apply_preprocess(t, plan_preprocess(t, a, i), i);
  finish(scope, out, v.any != 0);
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

constexpr MaskPlan kNoRequest{kSkip, 0, 0, 0, 0, 0, 0};

// A request's first 32 prompt offsets, one a lane, read with the request's
// other values (before its branch is known: any row's first columns may be
// read), so that neither the check nor the write waits for them again.
__device__ int32_t first_offsets(const MaskTensors& t, int64_t i, int lane) {
  return lane < t.mask_full_cols ? t.mask_full[i * t.mask_full_cols + lane] : 0;
}

// Whether request i (planned as `p`, `offset` its lane's first_offsets) passes
// every check; the warp's lanes share its tokens.
__device__ bool warp_checks_mask(const MaskTensors& t, const MaskPlan& p, int64_t i,
                                 int32_t offset, int lane) {
  if (check_mask_request(t, p, i).code != kOk) return false;
  if (!checks_tokens(p)) return true;
  bool bad = lane < p.n && !mask_offset_ok(offset);
  for (int32_t j = lane + 32; j < p.n; j += 32) bad |= check_mask_token(t, i, j).code != kOk;
  return !__any_sync(kFullWarp, bad);
}

// Request i's writes by the lanes of one warp.
__device__ void warp_writes_mask(const MaskTensors& t, const MaskPlan& p, int64_t i,
                                 int32_t offset, int lane) {
  if (p.branch == kSkip) return;
  int32_t* o = t.out + 2 * (int64_t)p.q;
  if (lane < p.n)
    o[2 * lane + 1] = p.branch == kPrompt ? prompt_end(offset) : mask_token_end(t, p, i, lane);
  for (int32_t j = lane + 32; j < p.n; j += 32) o[2 * j + 1] = mask_token_end(t, p, i, j);
  if (writes_decode_states(p)) {
    for (int64_t j = lane; j < t.decode_states_cols; j += 32) write_decode_state(t, p, i, j);
  }
  if (lane == 0) finish_mask_request(t, p, i);
}

// One request a warp at a time: its lanes share the request's tokens, so a
// prompt's reads and every output write are coalesced. Block sizes are
// multiples of 32, so every warp is whole. The warp's first request keeps its
// plan and offsets from the check to the write; any further ones (more
// requests than warps) are read again. (Keeping four a warp, all read at
// once, measured slower below 4096 requests and no faster above.)
template <typename Scope>
__global__ void __launch_bounds__(kMaskMaxThreads) mask_kernel(MaskTensors t, int64_t bsz,
                                                               Reporting out, Scope scope) {
  wait_for_previous_kernel();
  let_next_kernel_launch();
  const int64_t pending = read_pending_code(scope, out);
  const int lane = threadIdx.x % 32;
  const int64_t warp = scope.first() / 32, warps = scope.stride() / 32;
  const MaskPlan kept = warp < bsz ? plan_mask(t, warp) : kNoRequest;
  const int32_t kept_offset = warp < bsz ? first_offsets(t, warp, lane) : 0;
  // Every entry is written: zeros, then each request's odd entries. The output
  // is a fresh tensor, so it may be zeroed before the batch is validated (the
  // agreement's barrier orders it before the writes below).
  zero(scope, t.out, 2 * t.num_tokens);
  Verdict mine{kNone, 0};
  if (warp < bsz && !warp_checks_mask(t, kept, warp, kept_offset, lane)) {
    mine.bad = verdict_of(warp);
  } else {
    for (int64_t i = warp + warps; i < bsz; i += warps) {  // warp-uniform
      if (!warp_checks_mask(t, plan_mask(t, i), i, first_offsets(t, i, lane), lane)) {
        mine.bad = verdict_of(i);
        break;
      }
    }
  }
  auto check = [&](int64_t i) { return check_mask(t, plan_mask(t, i), i); };
  const Verdict v = agree_on_batch(scope, kMaskOp, out, pending, mine, check);
  if (v.bad != kNone) return;
  if (warp < bsz) warp_writes_mask(t, kept, warp, kept_offset, lane);
  for (int64_t i = warp + warps; i < bsz; i += warps)
    warp_writes_mask(t, plan_mask(t, i), i, first_offsets(t, i, lane), lane);
  finish(scope, out, false);
}

// Per device, asked once: how many blocks of each grid kernel fit at once
// with the default shape (0: not asked yet; -1: no cooperative launches), and
// whether the device has programmatic dependent launches.
struct DeviceFacts {
  int resident;
  bool overlap;
};

template <typename Kernel>
DeviceFacts device_facts(Kernel kernel, int dev, int grid_threads) {
  static std::atomic<int> cached_resident[kMaxDevices];
  static std::atomic<int> cached_major[kMaxDevices];
  const bool default_shape = grid_threads == LaunchShape{}.grid_threads;
  int resident = default_shape ? cached_resident[dev].load(std::memory_order_relaxed) : 0;
  int major = cached_major[dev].load(std::memory_order_relaxed);
  if (resident == 0) {
    int cooperative = 0, sms = 0, per_sm = 0;
    const bool ok =
        cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, grid_threads, 0) ==
            cudaSuccess;
    resident = ok && cooperative && sms * per_sm > 0 ? sms * per_sm : -1;
    if (default_shape) cached_resident[dev].store(resident, std::memory_order_relaxed);
  }
  if (major == 0) {
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
      major = -1;
    cached_major[dev].store(major, std::memory_order_relaxed);
  }
  return DeviceFacts{resident, major >= 9};
}

// A launch: its grid, and the device facts it was sized with.
struct Launch {
  int blocks;  // 0: the single block
  int threads;
  bool overlap;
};

// The grid path for `work` threads' worth of items, or the single block when
// the work is small, there is no scratch (a stream first seen inside a
// capture has none), or the device has no cooperative launches. Never more
// blocks than can be resident at once (a cooperative launch needs that) nor
// than the scratch has slots for. A cooperative launch is captured into a CUDA
// graph as a cooperative kernel node, so a captured step keeps the grid too.
// `max_threads`: the kernel's own bound on its blocks.
template <typename GridKernel>
Launch plan_launch(GridKernel kernel, int max_threads, int64_t work, const GridScratch& scratch,
                   const LaunchShape& shape) {
  const int one_block_max = shape.one_block_max < max_threads ? shape.one_block_max : max_threads;
  const int grid_threads = shape.grid_threads < max_threads ? shape.grid_threads : max_threads;
  int dev = 0;
  DeviceFacts facts{-1, false};
  if (cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < kMaxDevices)
    facts = device_facts(kernel, dev, grid_threads);
  const bool overlap = shape.overlap_launch && facts.overlap;
  Launch one{0, threads_for(work, one_block_max), overlap};
  if (work <= one_block_max || scratch.bad_slots == nullptr || facts.resident < 0) return one;
  int64_t blocks = (work + grid_threads - 1) / grid_threads;
  if (blocks > facts.resident) blocks = facts.resident;
  if (blocks > kGridSlots) blocks = kGridSlots;
  if (blocks < 2) return one;
  return Launch{(int)blocks, grid_threads, overlap};
}

// Launches `kernel` with its own parameter types, cooperatively for a grid,
// and as a programmatic dependent launch where the device has it.
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), const Launch& l, cudaStream_t stream,
                   Args&&... args) {
  cudaLaunchAttribute attrs[2];
  unsigned n = 0;
  if (l.blocks > 0) {
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
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace

cudaError_t launch_preprocess(const PreprocessTensors& t, const PreprocessAttrs& a, int64_t bsz,
                              bool* not_need_stop, Reporting out, GridScratch scratch,
                              cudaStream_t stream, const LaunchShape& shape) {
  if (bsz > kMaxBatch) return cudaErrorInvalidValue;
  const Launch l =
      plan_launch(preprocess_kernel<WholeGrid>, kPreprocessMaxThreads, bsz, scratch, shape);
  if (l.blocks > 0)
    return launch(preprocess_kernel<WholeGrid>, l, stream, t, a, bsz, not_need_stop, out,
                  WholeGrid{scratch});
  return launch(preprocess_kernel<OneBlock>, l, stream, t, a, bsz, not_need_stop, out,
                OneBlock{});
}

cudaError_t launch_mask(const MaskTensors& t, int64_t bsz, Reporting out, GridScratch scratch,
                        cudaStream_t stream, const LaunchShape& shape) {
  if (bsz > kMaxBatch) return cudaErrorInvalidValue;
  // A warp for every request up to shape.mask_max_warps of them (past that, a
  // warp takes several in turn: a bigger grid would cost more in its barrier
  // than it saves, measured with tests/graph_probe.cu), or enough threads for
  // the zeroing (16-byte stores), whichever is more.
  const int64_t max_warps = shape.mask_max_warps;
  const int64_t zeroing = (2 * t.num_tokens + 3) / 4;
  const int64_t warps_work = (bsz < max_warps ? bsz : max_warps) * 32;
  const int64_t work = warps_work > zeroing ? warps_work : zeroing;
  const Launch l = plan_launch(mask_kernel<WholeGrid>, kMaskMaxThreads, work, scratch, shape);
  if (l.blocks > 0)
    return launch(mask_kernel<WholeGrid>, l, stream, t, bsz, out, WholeGrid{scratch});
  return launch(mask_kernel<OneBlock>, l, stream, t, bsz, out, OneBlock{});
}

}  // namespace mtp
