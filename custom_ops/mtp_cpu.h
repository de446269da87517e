// The CPU drivers of the per-request rules: check the whole batch, then apply.
#pragma once

#include <cstring>

#include "mtp_bookkeeping.h"

namespace mtp {

// The views are taken by value: a local copy cannot alias the tensors, so the
// compiler keeps the pointers and column counts in registers across stores.
// F: the form (mtp_bookkeeping.h), whose rules the loop applies.
template <Form F>
inline BatchResult preprocess_batch(const PreprocessTensors t, const PreprocessAttrs a,
                                    int64_t bsz) {
  static_assert(F == preprocess_form(F), "a form that runs another's preprocess has none");
  for (int64_t i = 0; i < bsz; ++i) {
    const Failure f = check_preprocess(t, plan_preprocess<F>(t, a, i), i);
    if (f.code != kOk) return batch_failure(op_of(kPreprocessOp, F), i, f);
  }
  // apply_preprocess, with the base draft rows cleared in a pass of their own:
  // the row-clearing loop then streams through one tensor instead of
  // interleaving with every other write (docs/performance.md).
  if (clears_base_draft(F == Form::kShadow, a)) {
    for (int64_t i = 0; i < bsz; ++i) clear_base_draft_row(t, i);
  }
  bool any = false;
  for (int64_t i = 0; i < bsz; ++i) any |= apply_plan(t, plan_preprocess<F>(t, a, i), i);
  return batch_ok(any);
}

// F: the mask op's form (mask_form).
template <Form F>
inline BatchResult mask_batch(const MaskTensors t, int64_t bsz) {
  static_assert(F == mask_form(F), "a form whose mask op runs another's has no mask rules");
  for (int64_t i = 0; i < bsz; ++i) {
    const Failure f = check_mask(t, plan_mask<F>(t, i), i);
    if (f.code != kOk) return batch_failure(op_of(kMaskOp, F), i, f);
  }
  // One memset: the build turns off g++'s loop-to-memset rewriting (_build.py).
  // Not with no tokens: the output then may have no memory (a null pointer,
  // which memset must not be given even for 0 bytes).
  if (t.num_tokens > 0) std::memset(t.out, 0, sizeof(int32_t) * 2 * t.num_tokens);
  for (int64_t i = 0; i < bsz; ++i) apply_mask<F>(t, plan_mask<F>(t, i), i);
  return batch_ok(false);
}

}  // namespace mtp
