// How a kernel's threads agree on a batch before any write: the verdict (the
// first failing request, and whether any request runs), agreed in a warp, a
// block, one thread-block cluster or a cooperative grid (the scopes OneBlock,
// Cluster and WholeGrid), and the leader's report of it. Part of
// mtp_kernels.cu (included there only).
#pragma once

#include <cooperative_groups.h>

#include <cstdint>
#include <type_traits>

#include "early_start.cuh"
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
constexpr unsigned kFullWarp = 0xffffffffu;

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

// A scope: how the threads of one launch share out the batch and agree on it.
// OneBlock, Cluster and WholeGrid (below) are the scopes, the launch plan's
// Scope (launch_rules.h) names which one a launch runs in, and every scope
// has these members, which a kernel calls in this order:
//   start()          first, in every thread, before anything else;
//   first(), stride() the thread's requests (or groups) are first,
//                    first + stride, ... up to the batch: together the
//                    threads of the launch cover each exactly once;
//   leader()         true in exactly one thread of the launch (it reads the
//                    pending error and writes a failure's report);
//   agree(v)         once, in every thread, after the checks and before any
//                    write: the launch's verdict (combine() over every
//                    thread's v), the same in every thread. agree_blocks(v)
//                    instead where each block's threads already hold one
//                    verdict for their block;
//   reporter()       once, in every thread, after all its writes: true in one
//                    thread, once every thread of the launch has written.
// agree, agree_blocks and reporter hold barriers of the scope, so no thread
// may return before them (a kernel that stops on a failure returns after
// agree, in every thread alike). Launches share nothing but WholeGrid's
// scratch, which the launches of one stream take in turn (its reporter
// leaves the scratch as it found it).
//
// The scope of one block...
struct OneBlock {
  __device__ void start() const {}
  __device__ int64_t first() const { return threadIdx.x; }
  __device__ int64_t stride() const { return blockDim.x; }
  __device__ bool leader() const { return threadIdx.x == 0; }
  // A block of one warp (up to 32 preprocess requests, one mask request)
  // agrees in its lanes: no shared memory, no barrier.
  __device__ Verdict agree(Verdict v) const {
    return blockDim.x == 32 ? warp_agree(v) : block_agree(v);
  }
  // The same, from a verdict the block already agrees on.
  __device__ Verdict agree_blocks(Verdict block) const { return block; }
  // After the writes: true in one thread, once every thread has written.
  __device__ bool reporter() const {
    __syncthreads();
    return threadIdx.x == 0;
  }
};

// ...or a cooperative grid. Each block puts its verdict in its slot; after the
// grid barrier (which also orders every write before it) the first warp of
// each block reads all the slots, so every thread reaches the same verdict.
//
// A lane reads up to kSlotsAtOnce slots with every load in flight at once
// (grids of up to 256 blocks); a loop of dependent reads would cost a round
// trip to L2 per 32 blocks.
constexpr int kSlotsAtOnce = 8;

__device__ unsigned long long slot_of(Verdict v) {
  return (unsigned long long)v.bad << 32 | v.any;
}
__device__ Verdict verdict_in(unsigned long long slot) {
  return Verdict{(unsigned)(slot >> 32), (unsigned)slot};
}

struct WholeGrid {
  GridScratch scratch;
  __device__ void start() const {}
  __device__ int64_t first() const { return blockIdx.x * (int64_t)blockDim.x + threadIdx.x; }
  __device__ int64_t stride() const { return (int64_t)gridDim.x * blockDim.x; }
  __device__ bool leader() const { return blockIdx.x == 0 && threadIdx.x == 0; }
  // The first warp of each block reads the slots and hands the verdict on
  // through shared memory: every warp of the grid reading every slot at once
  // (1024 warps x 128 slots at 8192 mask requests) queued at the few L2 lines
  // that hold them (Nsight Compute: a quarter of the mask kernel's stalls).
  __device__ Verdict agree(Verdict v) const { return agree_blocks(block_agree(v)); }
  // The same, from a verdict every thread of the block already holds.
  __device__ Verdict agree_blocks(Verdict v) const {
    __shared__ unsigned long long grid_verdict;
    if (threadIdx.x == 0) scratch.slots[blockIdx.x] = slot_of(v);
    cg::this_grid().sync();
    if (threadIdx.x < 32) {
      Verdict g{kNone, 0};
      const unsigned lane = threadIdx.x;
#pragma unroll
      for (int r = 0; r < kSlotsAtOnce; ++r) {
        const unsigned k = lane + 32 * r;
        if (k < gridDim.x) g = combine(g, slot(k));
      }
      for (unsigned k = lane + 32 * kSlotsAtOnce; k < gridDim.x; k += 32) g = combine(g, slot(k));
      g = warp_agree(g);
      if (lane == 0) grid_verdict = slot_of(g);
    }
    __syncthreads();
    return verdict_in(grid_verdict);
  }
  // Block k's verdict, from L2, where the other blocks wrote it (L1 is per SM).
  __device__ Verdict slot(unsigned k) const { return verdict_in(__ldcg(scratch.slots + k)); }
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

// ...or one thread-block cluster (sm_90): up to 16 blocks on neighbouring SMs
// that agree through each other's shared memory and the hardware cluster
// barrier, with no global memory and no grid barrier. It is for middle
// batches: too many for one SM's issue slots (the mask op at 64 requests was
// 32 warps queued on one SM), too few to pay for a grid barrier
// (docs/performance.md). The grid is the cluster.
//
// Each block pushes its verdict into every block's slots, then one cluster
// barrier (release/acquire) makes them visible; after it no block touches
// another's shared memory, so any block may exit. A block's shared memory
// exists only once the block runs: start() arrives at a first barrier phase
// and agree() waits on it before the first remote write.
// A cluster of more than the portable kPortableClusterBlocks (up to
// kMaxClusterBlocks on sm_90, launch_rules.h) needs the kernel's leave
// (allow_big_clusters); cluster_fits asks the device whether it has room for
// one.
//
// Clusters exist from sm_90 on, so code compiled for an older arch has no
// cluster code: there every member that would touch the cluster traps, and
// start(), the first thing every kernel does, makes the rest of a kernel in
// this scope unreachable. The launcher never launches a cluster from such
// code: it takes clusters only where the kernel image that runs on the
// device was compiled for sm_90 or later (launch_plan.cuh, CudaDevice), which
// a build of older PTX, JIT-compiled on an sm_90 device, is not.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define MTP_CLUSTER_CODE 1
#else
#define MTP_CLUSTER_CODE 0
#endif

#if !MTP_CLUSTER_CODE
// Stops a kernel launched in a scope its code was not compiled for.
__device__ __forceinline__ void no_cluster_code() {
  __trap();
  __builtin_unreachable();
}
#endif

struct Cluster {
  __device__ void start() const {
#if MTP_CLUSTER_CODE
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#else
    no_cluster_code();
#endif
  }
  __device__ int64_t first() const { return blockIdx.x * (int64_t)blockDim.x + threadIdx.x; }
  __device__ int64_t stride() const { return (int64_t)gridDim.x * blockDim.x; }
  __device__ bool leader() const { return blockIdx.x == 0 && threadIdx.x == 0; }
  __device__ Verdict agree(Verdict v) const { return agree_blocks(block_agree(v)); }
  // The same, from a verdict every thread of the block already holds.
  __device__ Verdict agree_blocks(Verdict v) const {
#if MTP_CLUSTER_CODE
    __shared__ unsigned long long slots[kMaxClusterBlocks];
    cg::cluster_group cluster = cg::this_cluster();
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // every block runs
    const unsigned blocks = cluster.num_blocks();
    if (threadIdx.x < blocks)
      *cluster.map_shared_rank(slots + cluster.block_rank(), threadIdx.x) = slot_of(v);
    cluster.sync();
    const unsigned lane = threadIdx.x % 32;
    return warp_agree(lane < blocks ? verdict_in(slots[lane]) : Verdict{kNone, 0});
#else
    no_cluster_code();
    return v;
#endif
  }
  // After the writes: true in the leader once every block of the cluster has
  // written (the barrier orders their writes before the report).
  __device__ bool reporter() const {
#if MTP_CLUSTER_CODE
    __syncthreads();
    cg::this_cluster().sync();
    return leader();
#else
    no_cluster_code();
    return false;
#endif
  }
};

// Every scope has the members above, of these types.
template <typename S>
constexpr bool is_scope() {
  const S* s = nullptr;
  return std::is_same<decltype(s->start()), void>::value &&
         std::is_same<decltype(s->first()), int64_t>::value &&
         std::is_same<decltype(s->stride()), int64_t>::value &&
         std::is_same<decltype(s->leader()), bool>::value &&
         std::is_same<decltype(s->agree(Verdict{})), Verdict>::value &&
         std::is_same<decltype(s->agree_blocks(Verdict{})), Verdict>::value &&
         std::is_same<decltype(s->reporter()), bool>::value;
}
static_assert(is_scope<OneBlock>() && is_scope<Cluster>() && is_scope<WholeGrid>(),
              "a scope lacks a member of the interface above");

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

// The whole-batch agreement both kernels make once (agree_on_batch): every
// thread's verdict on its share (the earliest failing request, kNone if none)
// becomes the batch's. An error an earlier asynchronous call left pending
// (`pending_code`, read by the leader) also stops the batch: it is marked
// deferred, and handed to the host (and cleared) if this call is synchronous.
// On a failure the leader reports it, worded by the serial `check(i)`, and the
// caller returns without writing; on success a synchronous caller reports
// once it has written (finish).
//
// Puts the pending error in `mine`, before any thread agrees on it (only the
// leader reads the error).
__device__ void add_pending(Verdict& mine, int64_t pending_code) {
  if (pending_code != kOk) mine.bad = kPendingError;
}
// The leader's report of the batch's verdict `v`, which every thread holds.
// The pending record (mtp_kernels.h, Reporting): read whole once no writer
// holds a claim on it. A claim lasts a few stores of a kernel that is running
// (it made the claim), so the wait is short.
__device__ BatchResult read_pending(BatchResult* pending) {
  const volatile int64_t* code = &pending->code;
  int64_t c = *code;
  while (c == kClaimed) c = *code;
  __threadfence();  // the writer's fields, published before its code
  const volatile BatchResult* p = pending;
  BatchResult r;
  r.any_running = p->any_running;
  r.request = p->request;
  for (int k = 0; k < 4; ++k) r.v[k] = p->v[k];
  r.origin = p->origin;
  r.code = c;
  return r;
}
__device__ unsigned long long* code_word(BatchResult* r) {
  return reinterpret_cast<unsigned long long*>(&r->code);
}
// Takes `seen` off the pending record if it is still the error there.
__device__ void clear_pending(BatchResult* pending, const BatchResult& seen) {
  if (seen.code != kOk)
    atomicCAS(code_word(pending), (unsigned long long)seen.code, (unsigned long long)kOk);
}
// Leaves `r` pending, unless an error is pending already (that one stays).
__device__ void leave_pending(BatchResult* pending, const BatchResult& r) {
  if (atomicCAS(code_word(pending), (unsigned long long)kOk, (unsigned long long)kClaimed) !=
      (unsigned long long)kOk)
    return;
  pending->any_running = r.any_running;
  pending->request = r.request;
  for (int k = 0; k < 4; ++k) pending->v[k] = r.v[k];
  pending->origin = r.origin;
  __threadfence();
  atomicExch(code_word(pending), (unsigned long long)r.code);
}

// The leader's report of the batch's verdict `v`, which every thread holds.
template <typename Scope, typename CheckRequest>
__device__ Verdict report_verdict(const Scope& scope, OpId op, const Reporting& out, Verdict v,
                                  CheckRequest check) {
  if (v.bad == kNone || !scope.leader()) return v;
  if (v.bad == kPendingError) {
    BatchResult r = read_pending(out.pending);
    r.origin |= kDeferred;
    if (out.report != nullptr) {
      clear_pending(out.pending, r);
      publish(out.report, r);
    }
    // An asynchronous call leaves the error where it is, for a synchronous
    // call or raise_pending_errors to take.
  } else {
    const int64_t i = request_of(v.bad);
    const BatchResult r = batch_failure(op, i, check(i));
    if (out.report != nullptr) {
      publish(out.report, r);
    } else {
      leave_pending(out.pending, r);
    }
  }
  return v;
}
template <typename Scope, typename CheckRequest>
__device__ Verdict agree_on_batch(const Scope& scope, OpId op, const Reporting& out,
                                  int64_t pending_code, Verdict mine, CheckRequest check) {
  add_pending(mine, pending_code);
  const Verdict v = scope.agree(mine);
  return report_verdict(scope, op, out, v, check);
}

// After a successful batch's writes: a synchronous call reports (an
// asynchronous one has nothing to say).
template <typename Scope>
__device__ void finish(const Scope& scope, const Reporting& out, bool any_running) {
  if (out.report != nullptr && scope.reporter()) publish(out.report, batch_ok(any_running));
}

// Where the leader reads the pending error, computed before the wait: it
// reads it alongside the batch's first loads (read_pending_code).
template <typename Scope>
__device__ const int64_t* pending_code_now(const Scope& scope, const Reporting& out) {
  return address_now(&out.pending->code, scope.leader());
}
template <typename Scope>
__device__ int64_t read_pending_code(const Scope& scope, const int64_t* code) {
  return scope.leader() ? *code : kOk;
}

}  // namespace
}  // namespace mtp
