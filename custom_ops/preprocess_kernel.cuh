// draft_model_preprocess's kernel: a thread a request, the rules of
// mtp_bookkeeping.h, one agreement before the writes. Part of mtp_kernels.cu
// (included there only).
#pragma once

#include <cstdint>

#include "agreement.cuh"
#include "early_start.cuh"
#include "mtp_bookkeeping.h"
#include "mtp_kernels.h"

namespace mtp {
namespace {

template <Form F, typename Scope>
__global__ void __launch_bounds__(kPreprocessMaxThreads, 1)
    preprocess_kernel(PreprocessTensors t, PreprocessAttrs a, int64_t bsz, bool* not_need_stop,
                      Reporting out, Scope scope) {
  scope.start();
  // Requests first, first + stride, ...: the first one's plan and first
  // accepted tokens are kept for the write (with enough threads it is the
  // only one); any others are read again then. The first one's rows are
  // computed before the wait (`own`).
  const int64_t first = scope.first(), stride = scope.stride();
  const PreprocessTensors own = rows_now<F>(t, first, first < bsz);
  const int64_t* pending_code = pending_code_now(scope, out);
  wait_for_previous_kernel();
  let_next_kernel_launch();
  const int64_t pending = read_pending_code(scope, pending_code);
  Verdict mine{kNone, 0};
  PreprocessPlan kept;
  KeptTokens kept_tokens;
  if (first < bsz) {
    kept_tokens = read_kept_tokens(own, first);
    kept = plan_preprocess<F>(own, a, first);
    if (preprocess_failures(own, kept) != 0) mine.bad = verdict_of(first);
    mine.any = kept.running;
  }
  for (int64_t i = first + stride; i < bsz; i += stride) {
    const PreprocessPlan p = plan_preprocess<F>(t, a, i);
    if (mine.bad == kNone && preprocess_failures(t, p) != 0) mine.bad = verdict_of(i);
    mine.any |= p.running;
  }
  auto check = [&](int64_t i) { return check_preprocess(t, plan_preprocess<F>(t, a, i), i); };
  const Verdict v = agree_on_batch(scope, op_of(kPreprocessOp, F), out, pending, mine, check);
  if (v.bad != kNone) return;
  if (not_need_stop != nullptr && scope.leader()) *not_need_stop = v.any != 0;
  if (first < bsz) apply_preprocess(own, kept, first, kept_tokens);
  for (int64_t i = first + stride; i < bsz; i += stride)
    apply_preprocess(t, plan_preprocess<F>(t, a, i), i);
  finish(scope, out, v.any != 0);
}

}  // namespace
}  // namespace mtp
