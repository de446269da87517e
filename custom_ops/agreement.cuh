// How a kernel's threads agree on a batch before any write: the verdict (the
// first failing request, and whether any request runs), agreed in a warp, a
// block, one thread-block cluster or a cooperative grid (the scopes OneBlock,
// Cluster and WholeGrid), and the leader's report of it. Part of
// mtp_kernels.cu (included there only).
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

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

// How a kernel's threads share out the batch and agree on it: one block...
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
// (grids of up to 256 blocks); a loop of dependent reads cost a round trip to
// L2 per 32 blocks (measured: 8 of them at 256 blocks).
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
// A cluster of more than the portable 8 blocks (up to 16 on sm_90) needs the
// kernel's leave (allow_big_clusters); cluster_fits asks the device whether it
// has room for one.
constexpr int kPortableClusterBlocks = 8;
constexpr int kMaxClusterBlocks = 16;

struct Cluster {
  __device__ void start() const {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  }
  __device__ int64_t first() const { return blockIdx.x * (int64_t)blockDim.x + threadIdx.x; }
  __device__ int64_t stride() const { return (int64_t)gridDim.x * blockDim.x; }
  __device__ bool leader() const { return blockIdx.x == 0 && threadIdx.x == 0; }
  __device__ Verdict agree(Verdict v) const { return agree_blocks(block_agree(v)); }
  // The same, from a verdict every thread of the block already holds.
  __device__ Verdict agree_blocks(Verdict v) const {
    __shared__ unsigned long long slots[kMaxClusterBlocks];
    cg::cluster_group cluster = cg::this_cluster();
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // every block runs
    const unsigned blocks = cluster.num_blocks();
    if (threadIdx.x < blocks)
      *cluster.map_shared_rank(slots + cluster.block_rank(), threadIdx.x) = slot_of(v);
    cluster.sync();
    const unsigned lane = threadIdx.x % 32;
    return warp_agree(lane < blocks ? verdict_in(slots[lane]) : Verdict{kNone, 0});
  }
  // After the writes: true in the leader once every block of the cluster has
  // written (the barrier orders their writes before the report).
  __device__ bool reporter() const {
    __syncthreads();
    cg::this_cluster().sync();
    return leader();
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
template <typename Scope, typename CheckRequest>
__device__ Verdict report_verdict(const Scope& scope, OpId op, const Reporting& out, Verdict v,
                                  CheckRequest check) {
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
