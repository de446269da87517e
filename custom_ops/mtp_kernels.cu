// CUDA drivers of the per-request rules in mtp_bookkeeping.h.
//
// Each op is one launch that validates the whole batch before it writes
// anything: each thread plans and checks its requests, all threads agree on
// the first failing request (and on whether any request runs), and only then
// do they write, the first request of each thread from the plan it already
// holds (draft_model_preprocess: a thread a request; update_attn_mask_offsets:
// a group of lanes a request, see Group). Up to LaunchShape::one_block_max
// threads of work (preprocess_one_block_max requests) that is one block
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
#include <type_traits>
#include <utility>

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

// `p`, computed now: before the wait, while the previous kernel still runs.
// It is prefetched into L2 where it `exists` (a hint: L2 is where every SM's
// reads and writes meet, so nothing stale can come of it), a memory access
// that keeps the address and the kernel parameters it needs above the wait;
// and it is made opaque, so that the compiler keeps it in a register instead
// of computing it again next to the load, after the wait. A request's address
// arithmetic and the parameter reads were most of what a small batch's kernel
// did between the wait and its first load (seen in the SASS).
template <typename T>
__device__ __forceinline__ T* address_now(T* p, bool exists) {
  if (exists) asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
  asm("" : "+l"(p));
  return p;
}
// `base` such that base + i * cols is request i's row, that row computed now
// (a row of no columns is not touched: its tensor may have no memory).
template <typename T>
__device__ __forceinline__ T* row_now(T* base, int64_t i, int64_t cols, bool exists) {
  return address_now(base + i * cols, exists && cols > 0) - i * cols;
}

// The op's tensors with request i's rows computed now (row_now; `exists`:
// request i is in the batch, else nothing is touched).
__device__ PreprocessTensors rows_now(PreprocessTensors t, int64_t i, bool exists) {
  t.draft_tokens = row_now(t.draft_tokens, i, t.draft_cols, exists);
  t.input_ids = row_now(t.input_ids, i, t.input_cols, exists);
  t.stop_flags = row_now(t.stop_flags, i, 1, exists);
  t.seq_lens_this_time = row_now(t.seq_lens_this_time, i, 1, exists);
  t.seq_lens_encoder = row_now(t.seq_lens_encoder, i, 1, exists);
  t.seq_lens_decoder = row_now(t.seq_lens_decoder, i, 1, exists);
  t.step_idx = row_now(t.step_idx, i, 1, exists);
  t.is_block_step = row_now(t.is_block_step, i, 1, exists);
  t.batch_drop = row_now(t.batch_drop, i, 1, exists);
  t.pre_ids = row_now(t.pre_ids, i, t.pre_cols, exists);
  t.mask_rollback = row_now(t.mask_rollback, i, 1, exists);
  t.accept_tokens = row_now(t.accept_tokens, i, t.accept_cols, exists);
  t.accept_num = row_now(t.accept_num, i, 1, exists);
  t.base_seq_lens_decoder = row_now(t.base_seq_lens_decoder, i, 1, exists);
  t.base_step_idx = row_now(t.base_step_idx, i, 1, exists);
  t.base_stop_flags = row_now(t.base_stop_flags, i, 1, exists);
  t.base_is_block_step = row_now(t.base_is_block_step, i, 1, exists);
  t.base_draft_tokens = row_now(t.base_draft_tokens, i, t.base_draft_cols, exists);
  return t;
}
__device__ MaskTensors rows_now(MaskTensors t, int64_t i, bool exists) {
  t.seq_lens_this_time = row_now(t.seq_lens_this_time, i, 1, exists);
  t.seq_lens_encoder = row_now(t.seq_lens_encoder, i, 1, exists);
  t.seq_lens_decoder = row_now(t.seq_lens_decoder, i, 1, exists);
  t.cu_seqlens_q = row_now(t.cu_seqlens_q, i, 1, exists);
  t.mask_full = row_now(t.mask_full, i, t.mask_full_cols, exists);
  t.mask_decoder = row_now(t.mask_decoder, i, 1, exists);
  t.is_block_step = row_now(t.is_block_step, i, 1, exists);
  t.decode_states = row_now(t.decode_states, i, t.decode_states_cols, exists);
  t.mask_rollback = row_now(t.mask_rollback, i, 1, exists);
  return t;
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

template <typename Scope>
__global__ void __launch_bounds__(kPreprocessMaxThreads, 1)
    preprocess_kernel(PreprocessTensors t, PreprocessAttrs a, int64_t bsz, bool* not_need_stop,
                      Reporting out, Scope scope) {
  scope.start();
  // Requests first, first + stride, ...: the first one's plan and first
  // accepted tokens are kept for the write (with enough threads it is the
  // only one); any others are read again then. The first one's rows are
  // computed before the wait (`own`).
  const int64_t first = scope.first(), stride = scope.stride();
  const PreprocessTensors own = rows_now(t, first, first < bsz);
  const int64_t* pending_code = pending_code_now(scope, out);
  wait_for_previous_kernel();
  let_next_kernel_launch();
  const int64_t pending = read_pending_code(scope, pending_code);
  Verdict mine{kNone, 0};
  PreprocessPlan kept;
  KeptTokens kept_tokens;
  if (first < bsz) {
    kept_tokens = read_kept_tokens(own, first);
    kept = plan_preprocess(own, a, first);
    if (preprocess_failures(own, kept) != 0) mine.bad = verdict_of(first);
    mine.any = kept.running;
  }
  for (int64_t i = first + stride; i < bsz; i += stride) {
    const PreprocessPlan p = plan_preprocess(t, a, i);
    if (mine.bad == kNone && preprocess_failures(t, p) != 0) mine.bad = verdict_of(i);
    mine.any |= p.running;
  }
  auto check = [&](int64_t i) { return check_preprocess(t, plan_preprocess(t, a, i), i); };
  const Verdict v = agree_on_batch(scope, kPreprocessOp, out, pending, mine, check);
  if (v.bad != kNone) return;
  if (not_need_stop != nullptr && scope.leader()) *not_need_stop = v.any != 0;
  if (first < bsz) apply_preprocess(own, kept, first, kept_tokens);
  for (int64_t i = first + stride; i < bsz; i += stride)
    apply_preprocess(t, plan_preprocess(t, a, i), i);
  finish(scope, out, v.any != 0);
}

// Zeroes out[0, n), 16 bytes a store where the buffer allows. Not unrolled:
// an unrolled loop of runtime stride first divides for its trip count, a
// chain of some 40 instructions before the first store (seen in the SASS).
template <typename Scope>
__device__ void zero(const Scope& scope, int32_t* out, int64_t n) {
  int64_t done = 0;
  if ((reinterpret_cast<uintptr_t>(out) & 15) == 0) {
    int4* v = reinterpret_cast<int4*>(out);
#pragma unroll 1
    for (int64_t k = scope.first(); k < n / 4; k += scope.stride()) v[k] = make_int4(0, 0, 0, 0);
    done = n / 4 * 4;
  }
#pragma unroll 1
  for (int64_t k = done + scope.first(); k < n; k += scope.stride()) out[k] = 0;
}

constexpr MaskPlan kNoRequest{kSkip, 0, 0, 0, 0, 0, 0, 0};

// update_attn_mask_offsets gives each request a group of kLanes lanes (32,
// 16, 8, 4 or 2) that share its tokens, so a warp serves 32 / kLanes requests
// side by side. Fewer lanes a request mean fewer warps and blocks for a batch
// (a cheaper agreement, fewer instructions in all) but a longer walk for each
// warp (its requests' branches one after another); more lanes, fewer turns of
// a long request's token loop. The launcher picks (LaunchShape::mask_lanes).
template <int kLanes>
struct Group {
  static_assert(kLanes >= 1 && kLanes <= 32 && 32 % kLanes == 0, "lanes: a power of two");
  static constexpr int lanes = kLanes;
  int sub;        // this lane's place in its group
  unsigned mask;  // the group's lanes in the warp
  __device__ Group() {
    const int lane = threadIdx.x % 32;
    sub = lane % kLanes;
    mask = (kLanes == 32 ? kFullWarp : (1u << kLanes) - 1u) << (lane - sub);
  }
  // Whether any lane of the group says so. Every lane of the warp calls it.
  __device__ bool any(bool v) const { return (__ballot_sync(kFullWarp, v) & mask) != 0; }
};

// A request's first prompt offsets, one a lane of its group, read with the
// request's other values (before its branch is known: any row's first columns
// may be read), so that neither the check nor the write waits for them again.
template <typename G>
__device__ int32_t first_offsets(const MaskTensors& t, int64_t i, const G& g) {
  return g.sub < t.mask_full_cols ? t.mask_full[i * t.mask_full_cols + g.sub] : 0;
}

// A prompt of more than kShareTokens tokens is not walked by its group
// alone: every thread of its block checks and writes a share of its tokens
// (SharedPrompts). A real engine's prompts run to thousands of tokens (chunked
// prefill: attn_mask_offsets_full has max_model_len columns), and a warp that
// walked one 32 tokens a turn, a load a turn, made a step of 16 requests with
// prompts of up to 4096 tokens cost 70 us (graph probe). Only the kernels of
// launches whose prompts may be that long (shares_prompts) have the block's
// barrier: the others are the kernels of before, instruction for instruction.
constexpr int32_t kShareTokens = 64;
bool shares_prompts(const MaskTensors& t) {
  return t.mask_full_cols > kShareTokens && t.num_tokens > kShareTokens;
}

// What the checks of one request (one group) found: whether it passes, and
// whether its tokens are left to the block (they are checked there).
struct GroupCheck {
  bool ok;
  bool shared;
};

// Whether request i (planned as `p`, `offset` its lane's first_offsets)
// passes every check; its group's lanes share its tokens, or, where
// `sharing` and the request is a long prompt that passes its request checks,
// the tokens are left to the whole block (GroupCheck::shared). Every lane of
// the warp calls it, whatever its request.
//
// kBranchFree: test the request's check bits at once, with no branch. In one
// block a request's checks are a single warp's chain, and a branch on each
// check, waiting for its condition, cost about 0.1 us a call (graph probe,
// bsz 1). In a cluster or a grid, many warps share each SM and hide those
// waits, and computing every check cost more than it saved (0.6-0.9 us a step
// at 1024-8192 requests), so there the checks stop at the first failing one.
template <bool kBranchFree, typename G>
__device__ GroupCheck group_checks_mask(const MaskTensors& t, const MaskPlan& p, int64_t i,
                                        int32_t offset, const G& g, bool sharing) {
  const bool request_ok =
      kBranchFree ? mask_request_failures(t, p) == 0 : check_mask_request(t, p, i).code == kOk;
  const bool shared = sharing && request_ok && checks_tokens(p) && p.n > kShareTokens;
  bool bad = false;
  if (request_ok && checks_tokens(p) && !shared) {
    bad = g.sub < p.n && !mask_offset_ok(offset);
    for (int32_t j = g.sub + g.lanes; j < p.n; j += g.lanes)
      bad |= check_mask_token(t, i, j).code != kOk;
  }
  // Every lane of the warp takes part in the ballot, whatever its request's
  // verdict (a lane that skipped it would leave the others waiting).
  const bool tokens_bad = g.any(bad);
  return GroupCheck{request_ok && !tokens_bad, shared};
}

// The long prompts of a block's groups' first requests (group_checks_mask's
// `shared`), which every thread of the block walks: a group puts its request
// in its own entry, each warp a bit a group in `warps`, then one block
// barrier. No entry needs clearing: only the bits set by this launch are read.
//
// In one block or a cluster, the same barrier carries the block's verdict on
// its other checks, so that a block with no long prompt (a batch of decodes,
// in an engine whose attn_mask_offsets_full has max_model_len columns) agrees
// with one barrier, as a kernel that shares nothing does: a barrier of its own
// for the listing cost 0.5 us a step at 64 and at 512 requests (graph probe,
// 1024 columns).
template <int kLanes>
struct SharedPrompts {
  static constexpr int kGroups = kMaskMaxThreads / kLanes;
  static constexpr int kWarps = kMaskMaxThreads / 32;
  int64_t request[kGroups];
  int32_t q[kGroups];
  int32_t n[kGroups];
  unsigned warps[kWarps];
  unsigned bads[kWarps], anys[kWarps];  // each warp's verdict

  struct Listed {
    Verdict block;  // kWithVerdict: the block's verdict, from every thread's `mine`
    bool any;       // whether the block may have a prompt to walk
  };
  // Every thread of the block calls it once, `shared` from its group and
  // `mine` its verdict on its requests but for the listed prompts' tokens.
  // Without kWithVerdict, only the listing: `block` is `mine` and `any` true.
  template <bool kWithVerdict>
  __device__ Listed publish(int64_t i, const MaskPlan& p, bool shared, int sub, Verdict mine) {
    const int group = threadIdx.x / kLanes;
    const bool leads = shared && sub == 0;
    if (leads) {
      request[group] = i;
      q[group] = p.q;
      n[group] = p.n;
    }
    const unsigned bits = __ballot_sync(kFullWarp, leads);
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (!kWithVerdict) {
      if (lane == 0) warps[warp] = bits;
      __syncthreads();
      return Listed{mine, true};
    }
    const Verdict w = warp_agree(mine);
    if (lane == 0) {
      warps[warp] = bits;
      bads[warp] = w.bad;
      anys[warp] = w.any;
    }
    __syncthreads();
    const bool has = lane < blockDim.x / 32;
    const unsigned listed = __reduce_or_sync(kFullWarp, has ? warps[lane] : 0u);
    return Listed{warp_agree(has ? Verdict{bads[lane], anys[lane]} : Verdict{kNone, 0}),
                  listed != 0};
  }
  // f(i, q, j, offset) for the tokens j of each listed request that are this
  // thread's share (j = threadIdx.x, + blockDim.x, ...), `offset` its column
  // of attn_mask_offsets_full, requests in the order of their groups. Every
  // thread of the block calls it. kAtOnce offsets are loaded before f sees
  // any: f may store, and the compiler cannot move a load above a store that
  // might alias it (a round trip a token, else).
  template <typename F>
  __device__ void for_my_tokens(const MaskTensors& t, F f) const {
    constexpr int kAtOnce = 8;
    const unsigned lane = threadIdx.x % 32;
    const unsigned mine = lane < blockDim.x / 32 ? warps[lane] : 0u;
    for (unsigned ws = __ballot_sync(kFullWarp, mine != 0); ws != 0; ws &= ws - 1) {
      const int w = __ffs(ws) - 1;
      for (unsigned bits = __shfl_sync(kFullWarp, mine, w); bits != 0; bits &= bits - 1) {
        const int group = (32 * w + __ffs(bits) - 1) / kLanes;
        const int64_t i = request[group];
        const int32_t rq = q[group], rn = n[group];
        const int32_t* row = t.mask_full + i * t.mask_full_cols;
        const int32_t step = blockDim.x;
        for (int32_t j0 = threadIdx.x; j0 < rn; j0 += kAtOnce * step) {
          int32_t offsets[kAtOnce];
#pragma unroll
          for (int u = 0; u < kAtOnce; ++u)
            offsets[u] = j0 + u * step < rn ? row[j0 + u * step] : 0;
#pragma unroll
          for (int u = 0; u < kAtOnce; ++u)
            if (j0 + u * step < rn) f(i, rq, j0 + u * step, offsets[u]);
        }
      }
    }
  }
};

// Request i's writes by the lanes of its group. A shared prompt's tokens are
// the block's (SharedPrompts), and a prompt has nothing else to write.
template <typename G>
__device__ void group_writes_mask(const MaskTensors& t, const MaskPlan& p, int64_t i,
                                  int32_t offset, const G& g, bool shared) {
  if (p.branch == kSkip || shared) return;
  int32_t* o = t.out + 2 * (int64_t)p.q;
  if (g.sub < p.n)
    o[2 * g.sub + 1] = p.branch == kPrompt ? prompt_end(offset) : mask_token_end(t, p, i, g.sub);
  for (int32_t j = g.sub + g.lanes; j < p.n; j += g.lanes) o[2 * j + 1] = mask_token_end(t, p, i, j);
  if (writes_decode_states(p)) {
    for (int64_t j = g.sub; j < t.decode_states_cols; j += g.lanes) write_decode_state(t, p, i, j);
  }
  if (g.sub == 0) finish_mask_request(t, p, i);
}

// Requests first, first + groups, ... a group: the first one keeps its plan
// and offsets from the check to the write (with enough groups it is the only
// one); any further ones are read again. The loops are warp-uniform (every
// group of a warp turns together), as the checks' ballots need. Block sizes
// are multiples of 32, so every warp is whole.
template <int kLanes, bool kShare, typename Scope>
__global__ void __launch_bounds__(kMaskMaxThreads, 1) mask_kernel(MaskTensors t, int64_t bsz,
                                                               Reporting out, Scope scope) {
  constexpr bool kOneBlock = std::is_same<Scope, OneBlock>::value;
  scope.start();
  const Group<kLanes> g;
  // A group's first request: the groups of a block take consecutive requests,
  // or, where long prompts are shared out in their block, requests spread
  // over the blocks, so that a batch's few long prompts land in different
  // blocks: every gridDim.x-th one a group, or, with 8 lanes a request or
  // fewer, or 16 in a grid, a run of kRun consecutive ones a warp (spreading
  // a warp's groups too made each of its loads of the requests' values as
  // many sectors; attn_mask_offsets_full 1024 columns wide, graph probe: 4096
  // decodes 1.5 us a step, 2048 0.65). Runs at 16 lanes in one block or a
  // cluster cost long prompts 6% (32 and 512 requests), so there groups stay
  // spread.
  constexpr bool kGrid = std::is_same<Scope, WholeGrid>::value;
  constexpr int kRun = kLanes >= 32 || (kLanes == 16 && !kGrid) ? 1 : 32 / kLanes;
  const int64_t k = threadIdx.x / kLanes;
  const int64_t first = kShare ? ((k / kRun) * gridDim.x + blockIdx.x) * kRun + k % kRun
                               : scope.first() / kLanes,
                groups = scope.stride() / kLanes;
  // The first request's rows, computed before the wait.
  const MaskTensors own = rows_now(t, first, first < bsz);
  const int64_t* pending_code = pending_code_now(scope, out);
  wait_for_previous_kernel();
  let_next_kernel_launch();
  const int64_t pending = read_pending_code(scope, pending_code);
  // This warp's first request, less its own: i - behind is the same in every
  // lane of the warp.
  const int64_t behind =
      (int64_t)((threadIdx.x % 32) / kLanes) * (kShare && kRun == 1 ? gridDim.x : 1);
  const MaskPlan kept = first < bsz ? plan_mask(own, first) : kNoRequest;
  const int32_t kept_offset = first < bsz ? first_offsets(own, first, g) : 0;
  // Every entry is written: zeros, then each request's odd entries. The output
  // is a fresh tensor, so it may be zeroed before the batch is validated (the
  // agreement's barrier orders it before the writes below).
  zero(scope, t.out, 2 * t.num_tokens);
  Verdict mine{kNone, 0};
  const GroupCheck kept_check =
      group_checks_mask<kOneBlock>(own, kept, first, kept_offset, g, kShare);
  if (!kept_check.ok) mine.bad = verdict_of(first);
  // Without kShare it is never touched: sized for one group, its least.
  __shared__ SharedPrompts<kShare ? kLanes : kMaskMaxThreads> shared;
  // Where the block's verdict is agreed on with the listing (no prompt to
  // walk, no group with a later request), it goes straight to the blocks'
  // agreement. Not in a grid: there it made a step slower (widened states,
  // 1024 requests: 12.9 -> 13.7 us), and so did skipping the walks where a
  // block lists nothing (__syncthreads_or: 12.8 -> 13.3), with no spills;
  // so a grid keeps the listing apart, and walks.
  constexpr bool kVerdictWithListing = kShare && !kGrid;
  bool walks = false, agreed = false;
  Verdict block{kNone, 0};
  if constexpr (kShare) {
    if (kVerdictWithListing) add_pending(mine, pending);
    const auto listed = shared.template publish<kVerdictWithListing>(first, kept,
                                                                      kept_check.shared, g.sub, mine);
    walks = listed.any;
    agreed = kVerdictWithListing && !walks && groups >= bsz;
    block = listed.block;
    if (walks) {
      // A bad token fails its request (the earliest such request wins).
      shared.for_my_tokens(t, [&](int64_t i, int32_t, int32_t, int32_t offset) {
        if (!mask_offset_ok(offset) && verdict_of(i) < mine.bad) mine.bad = verdict_of(i);
      });
    }
  }
  for (int64_t i = first + groups; i - behind < bsz; i += groups) {
    const bool mine_too = i < bsz;
    const MaskPlan p = mine_too ? plan_mask(t, i) : kNoRequest;
    const int32_t offset = mine_too ? first_offsets(t, i, g) : 0;
    // A group's later requests come after its failing one: the first stays.
    if (!group_checks_mask<kOneBlock>(t, p, i, offset, g, false).ok && mine.bad == kNone)
      mine.bad = verdict_of(i);
  }
  auto check = [&](int64_t i) { return check_mask(t, plan_mask(t, i), i); };
  // Spelled with `if constexpr`: as one conditional expression, the compiler
  // reordered the one-block kernels that share nothing (their SASS is kept
  // as it was measured).
  Verdict v;
  if constexpr (kShare) {
    v = agreed ? report_verdict(scope, kMaskOp, out, scope.agree_blocks(block), check)
               : agree_on_batch(scope, kMaskOp, out, pending, mine, check);
  } else {
    v = agree_on_batch(scope, kMaskOp, out, pending, mine, check);
  }
  if (v.bad != kNone) return;
  if (first < bsz) group_writes_mask(own, kept, first, kept_offset, g, kept_check.shared);
  if (walks) {
    shared.for_my_tokens(t, [&](int64_t, int32_t q, int32_t j, int32_t offset) {
      t.out[2 * ((int64_t)q + j) + 1] = prompt_end(offset);
    });
  }
  for (int64_t i = first + groups; i < bsz; i += groups)
    group_writes_mask(t, plan_mask(t, i), i, first_offsets(t, i, g), g, false);
  finish(scope, out, false);
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
// saves, measured with tests/graph_probe.cu), or enough threads for the
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
// take more turns. Measured with tests/graph_probe.cu (docs/performance.md).
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

cudaError_t launch_preprocess(const PreprocessTensors& t, const PreprocessAttrs& a, int64_t bsz,
                              bool* not_need_stop, Reporting out, GridScratch scratch,
                              cudaStream_t stream, const LaunchShape& shape) {
  if (bsz > kMaxBatch) return cudaErrorInvalidValue;
  const Launch l = plan_preprocess_launch(bsz, scratch, shape);
  return with_scope(l, scratch, [&](auto scope) {
    return launch<preprocess_kernel<decltype(scope)>>(l, stream, t, a, bsz, not_need_stop, out,
                                                      scope);
  });
}

cudaError_t launch_mask(const MaskTensors& t, int64_t bsz, Reporting out, GridScratch scratch,
                        cudaStream_t stream, const LaunchShape& shape) {
  if (bsz > kMaxBatch) return cudaErrorInvalidValue;
  return with_mask_lanes(bsz, shape, [&](auto lanes) {
    constexpr int kLanes = decltype(lanes)::value;
    return with_prompt_sharing(t, shape, [&](auto share) {
      constexpr bool kShare = decltype(share)::value;
      const Launch l = plan_mask_launch<kLanes, kShare>(t.num_tokens, bsz, scratch, shape);
      return with_scope(l, scratch, [&](auto scope) {
        return launch<mask_kernel<kLanes, kShare, decltype(scope)>>(l, stream, t, bsz, out, scope);
      });
    });
  });
}

}  // namespace mtp
