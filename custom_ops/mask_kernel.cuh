// update_attn_mask_offsets's kernel: a group of lanes a request, long prompts
// shared out among their block's threads, one agreement before the writes.
// Part of mtp_kernels.cu (included there only).
#pragma once

#include <cstdint>
#include <type_traits>

#include "agreement.cuh"
#include "early_start.cuh"
#include "mtp_bookkeeping.h"
#include "mtp_kernels.h"

namespace mtp {
namespace {

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
// 16 or 8) that share its tokens, so a warp serves 32 / kLanes requests
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

// A prompt of more than kShareTokens tokens (launch_rules.h) is not walked by
// its group alone: every thread of its block checks and writes a share of its
// tokens (SharedPrompts). A real engine's prompts run to thousands of tokens
// (chunked prefill: attn_mask_offsets_full has max_model_len columns), and a
// warp that walks one 32 tokens a turn, a load a turn, leaves the rest of the
// batch waiting at the agreement. Only the kernels of launches whose prompts
// may be that long (shares_prompts) have the block's barrier; the others have
// none of its cost.

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
// check waits for its condition. In a cluster or a grid, many warps share
// each SM and hide those waits, and computing every check costs more than it
// saves, so there the checks stop at the first failing one.
template <bool kBranchFree, typename G>
__device__ GroupCheck group_checks_mask(const MaskTensors& t, const MaskPlan& p, int64_t i,
                                        int32_t offset, const G& g, bool sharing) {
  const bool request_ok =
      kBranchFree ? mask_request_failures(t, p) == 0 : check_mask_request(t, p, i).code == kOk;
  const bool shared = sharing && request_ok && checks_tokens(p) && p.n > kShareTokens;
  bool bad = false;
  if (request_ok && checks_tokens(p) && !shared) {
    bad = g.sub < p.n && !mask_offset_ok(offset);
    // Counting down the tokens left keeps every sum below n: counting j up,
    // j + lanes would wrap int32 for a request near 2^31 tokens (unsigned or
    // 64-bit counters would avoid that too, at more instructions a token).
    // request_ok has refused a negative n.
    for (int32_t left = p.n - g.sub - g.lanes; left > 0; left -= g.lanes)
      bad |= check_mask_token(t, i, p.n - left).code != kOk;
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
// with one barrier, as a kernel that shares nothing does, instead of a barrier
// of its own for the listing.
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
        const int32_t rq = q[group];
        const int32_t* row = t.mask_full + i * t.mask_full_cols;
        // Counting down the tokens left, as group_checks_mask does: token
        // j0 + u * step is read only while u * step < left, so it is below n.
        const int32_t step = blockDim.x, rn = n[group];
        for (int32_t left = rn - (int32_t)threadIdx.x; left > 0; left -= kAtOnce * step) {
          const int32_t j0 = rn - left;
          int32_t offsets[kAtOnce];
#pragma unroll
          for (int u = 0; u < kAtOnce; ++u)
            offsets[u] = u * step < left ? row[j0 + u * step] : 0;
#pragma unroll
          for (int u = 0; u < kAtOnce; ++u)
            if (u * step < left) f(i, rq, j0 + u * step, offsets[u]);
        }
      }
    }
  }
};

// Request i's writes by the lanes of its group. A shared prompt's tokens are
// the block's (SharedPrompts), and a prompt has nothing else to write.
template <Form F, typename G>
__device__ void group_writes_mask(const MaskTensors& t, const MaskPlan& p, int64_t i,
                                  int32_t offset, const G& g, bool shared) {
  if (p.branch == kSkip || shared) return;
  int32_t* o = t.out + 2 * (int64_t)p.q;
  if (g.sub < p.n)
    o[end_entry(g.sub)] =
        p.branch == kPrompt ? prompt_end(offset) : mask_token_end(t, p, i, g.sub);
  for (int32_t left = p.n - g.sub - g.lanes; left > 0; left -= g.lanes) {  // as group_checks_mask's
    const int32_t j = p.n - left;
    o[end_entry(j)] = mask_token_end(t, p, i, j);
  }
  if (writes_decode_states<F>(p)) {
    for (int64_t j = g.sub; j < t.decode_states_cols; j += g.lanes)
      write_decode_state<F>(t, p, i, j);
  }
  if (g.sub == 0) finish_mask_request<F>(t, p, i);
}

// Requests first, first + groups, ... a group: the first one keeps its plan
// and offsets from the check to the write (with enough groups it is the only
// one); any further ones are read again. The loops are warp-uniform (every
// group of a warp turns together), as the checks' ballots need. Block sizes
// are multiples of 32, so every warp is whole.
template <Form F, int kLanes, bool kShare, typename Scope>
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
  // a warp's groups too would make each of its loads of the requests' values
  // as many sectors). At 16 lanes in one block or a cluster a run would keep
  // a block's long prompts together, which is what spreading is for, so
  // there groups stay spread.
  constexpr bool kGrid = std::is_same<Scope, WholeGrid>::value;
  constexpr int kRun = kLanes >= 32 || (kLanes == 16 && !kGrid) ? 1 : 32 / kLanes;
  const int64_t k = threadIdx.x / kLanes;
  const int64_t first = kShare ? ((k / kRun) * gridDim.x + blockIdx.x) * kRun + k % kRun
                               : scope.first() / kLanes,
                groups = scope.stride() / kLanes;
  // The first request's rows, computed before the wait.
  const MaskTensors own = rows_now<F>(t, first, first < bsz);
  const int64_t* pending_code = pending_code_now(scope, out);
  wait_for_previous_kernel();
  let_next_kernel_launch();
  const int64_t pending = read_pending_code(scope, pending_code);
  // This warp's first request, less its own: i - behind is the same in every
  // lane of the warp.
  const int64_t behind =
      (int64_t)((threadIdx.x % 32) / kLanes) * (kShare && kRun == 1 ? gridDim.x : 1);
  const MaskPlan kept = first < bsz ? plan_mask<F>(own, first) : kNoRequest;
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
  // agreement. Not in a grid: there the grid barrier follows anyway, and
  // carrying the verdict with the listing, or skipping the walks where a
  // block lists nothing, only adds work before it; so a grid keeps the
  // listing apart, and walks.
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
    const MaskPlan p = mine_too ? plan_mask<F>(t, i) : kNoRequest;
    const int32_t offset = mine_too ? first_offsets(t, i, g) : 0;
    // A group's later requests come after its failing one: the first stays.
    if (!group_checks_mask<kOneBlock>(t, p, i, offset, g, false).ok && mine.bad == kNone)
      mine.bad = verdict_of(i);
  }
  auto check = [&](int64_t i) { return check_mask(t, plan_mask<F>(t, i), i); };
  // Spelled with `if constexpr`, so that the kernels that share nothing have
  // no trace of the other path: as one conditional expression the compiler
  // may reorder their code around it.
  Verdict v;
  if constexpr (kShare) {
    v = agreed ? report_verdict(scope, op_of(kMaskOp, F), out, scope.agree_blocks(block), check)
               : agree_on_batch(scope, op_of(kMaskOp, F), out, pending, mine, check);
  } else {
    v = agree_on_batch(scope, op_of(kMaskOp, F), out, pending, mine, check);
  }
  if (v.bad != kNone) return;
  if (first < bsz) group_writes_mask<F>(own, kept, first, kept_offset, g, kept_check.shared);
  if (walks) {
    shared.for_my_tokens(t, [&](int64_t, int32_t q, int32_t j, int32_t offset) {
      t.out[2 * (int64_t)q + end_entry(j)] = prompt_end(offset);
    });
  }
  for (int64_t i = first + groups; i < bsz; i += groups)
    group_writes_mask<F>(t, plan_mask<F>(t, i), i, first_offsets(t, i, g), g, false);
  finish(scope, out, false);
}

}  // namespace
}  // namespace mtp
