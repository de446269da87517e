// The per-request rules of docs/contract.md, written once.
//
// Plain C++ with no Paddle in it: the CPU loop (mtp_cpu.h) and the CUDA
// kernels (mtp_kernels.cu) both call these functions, so the CPU tests
// exercise exactly the code the GPU runs.
//
// Each op is split into three steps per request:
//   plan  - read the request's state and decide everything (no writes). Every
//           per-request value any branch needs is read first, in one go, so
//           that a GPU thread has all its loads in flight at once instead of
//           one branch's loads after another's;
//   check - validate the plan against the tensor bounds (no writes);
//   apply - write the plan.
// The callers run plan+check over the whole batch first and apply only if no
// request failed, which is what makes the ops all-or-nothing.
//
// Overflow: any input value may be hostile (INT64_MIN, INT32_MAX, ...). Plan
// and check compare before they subtract or add, or work in 64 bits where the
// operands are 32-bit, so no arithmetic here wraps and every value apply
// writes or indexes with has been range-checked (docs/contract.md, "Valid
// ranges").
#pragma once

#include <stdint.h>

#include "forms.h"

// Forced inline on the host too: the CPU drivers call plan_preprocess twice a
// request, and g++ does not inline a function of the plan's size on its own;
// a call a request then costs more than the request's work.
#if defined(__CUDACC__)
#define MTP_HD __host__ __device__ __forceinline__
#define MTP_UNROLL _Pragma("unroll")
#else
#define MTP_UNROLL
#define MTP_HD inline __attribute__((always_inline))
#endif

namespace mtp {

// A per-request value read where the code says, before any branch on it. A
// plain load the compiler sinks into the one branch that uses it, where it
// waits for the loads that decided the branch: a decode request of
// draft_model_preprocess then cost two round trips to memory instead of one
// (seen in the SASS). On the host it is a plain read.
#if defined(__CUDA_ARCH__)
__device__ __forceinline__ int32_t load_now(const int32_t* p) {
  int32_t v;
  asm volatile("ld.global.b32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ int64_t load_now(const int64_t* p) {
  int64_t v;
  asm volatile("ld.global.b64 %0, [%1];" : "=l"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ bool load_now(const bool* p) {
  uint16_t v;
  asm volatile("ld.global.u8 %0, [%1];" : "=h"(v) : "l"(p));
  return v != 0;
}
#else
template <typename T>
inline T load_now(const T* p) {
  return *p;
}
#endif

// Every reason a request is refused, once: its name, its code (it travels
// from the GPU to the host in the batch result) and the words the host fills
// with the four values a failure carries ({0}..{3}). The enum below and the
// messages (failure_messages.h) both expand this table.
#define MTP_CHECKS(X)                                                                            \
  /* draft_model_preprocess */                                                                  \
  X(kFirstTokenOutsideInputIds, 1,                                                              \
    "input_ids: the first token goes to column {0}, outside input_ids' {1} columns "            \
    "(seq_lens_encoder = {2})")                                                                 \
  X(kNoAcceptTokensColumn, 2,                                                                   \
    "accept_tokens: the first token is read from column 0, but accept_tokens has {0} columns")  \
  X(kNoPreIdsColumn, 3,                                                                         \
    "pre_ids: the first token is written to column 0, but pre_ids has {0} columns")             \
  X(kAcceptNumOutOfRange, 4,                                                                    \
    "accept_num: {0} is outside [0, min(accept_tokens columns {1}, draft_tokens columns {2})]")  \
  X(kPreIdsWindowOutside, 5,                                                                    \
    "pre_ids: the {1} accepted tokens (accept_num) go to the columns before "                   \
    "base_model_step_idx = {0}, outside pre_ids' {2} columns")                                  \
  X(kSeqLensDecoderOutOfRange, 6,                                                               \
    "seq_lens_decoder: the new value {0} leaves the int32 range (seq_lens_decoder = {1}, "      \
    "base_model_seq_lens_decoder = {2}, accept_num = {3})")                                     \
  X(kNegativeSeqLensEncoder, 7, "seq_lens_encoder: {0} is negative for a running request")      \
  X(kStepIdxOverflow, 13,                                                                       \
    "step_idx: the new value step_idx - (num_model_step - 1) = {0} - {1} leaves the int64 "     \
    "range")                                                                                    \
  X(kMaskRollbackOutOfRange, 14,                                                                \
    "mask_rollback: {0} + (seq_lens_decoder {1} - new seq_lens_decoder {2}) leaves the int32 "  \
    "range")                                                                                    \
  X(kRecomputeStepIdxOverflow, 20,                                                              \
    "step_idx: the new value step_idx - recomputed tokens = {0} - {1} leaves the int64 range")  \
  X(kRecomputeRollbackOutOfRange, 21,                                                           \
    "mask_rollback: {0} + recomputed tokens {1} leaves the int32 range")                        \
  X(kShadowStepIdxOverflow, 22,                                                                 \
    "step_idx: the new value base_model_step_idx - {1} = {0} - {1} leaves the int64 range")     \
  X(kResyncDecoderOutOfRange, 23,                                                               \
    "seq_lens_decoder: the re-synced value base_model_seq_lens_decoder - "                      \
    "base_model_seq_lens_this_time = {1} - {2} = {0} leaves the int32 range")                  \
  X(kResyncStepIdxOverflow, 24,                                                                 \
    "step_idx: the re-synced value base_model_step_idx - base_model_seq_lens_this_time = "      \
    "{0} - {1} leaves the int64 range")                                                         \
  X(kRollbackDecoderOutOfRange, 25,                                                             \
    "seq_lens_decoder: the rolled-back value seq_lens_decoder - (num_model_step - 1) = "        \
    "{1} - {2} = {0} leaves the int32 range")                                                   \
  X(kRecomputeDecoderOutOfRange, 26,                                                            \
    "seq_lens_decoder: the rolled-back value seq_lens_decoder - recomputed tokens = {1} - {2} " \
    "= {0} leaves the int32 range")                                                             \
  /* update_attn_mask_offsets */                                                                \
  X(kNegativeSeqLensThisTime, 8, "seq_lens_this_time: {0} is negative")                         \
  X(kTokensOutsideIds, 9,                                                                       \
    "cu_seqlens_q: the {1} tokens from {0} (cu_seqlens_q = {0}, seq_lens_this_time = {1}) lie " \
    "outside the {2} tokens of ids_remove_padding")                                             \
  X(kTokensPastNextRequest, 19,                                                                 \
    "cu_seqlens_q: the {1} tokens from {0} run past the next request's first token {2} "        \
    "(cu_seqlens_q[i+1], or the token total after its last entry); cu_seqlens_q must not "      \
    "decrease and requests' tokens must not overlap")                                           \
  X(kTokensPastMaskFull, 10,                                                                    \
    "attn_mask_offsets_full: seq_lens_this_time = {0} prompt tokens, but it has {1} columns")    \
  X(kMaskFullOutOfRange, 15,                                                                    \
    "attn_mask_offsets_full: column {0} holds {1}, outside [0, 2147483647)")                    \
  X(kNegativeMaskCursor, 16,                                                                    \
    "attn_mask_offsets_decoder: the cursor {0} - mask_rollback {1} is negative")                \
  X(kMaskCursorOverflow, 17,                                                                    \
    "attn_mask_offsets: the offsets would reach {0} + seq_lens_this_time {1}, past the int32 "  \
    "range")

enum Check : int32_t {
  kOk = 0,
#define MTP_CHECK_ENUM(name, code, words) name = code,
  MTP_CHECKS(MTP_CHECK_ENUM)
#undef MTP_CHECK_ENUM
};

constexpr int64_t kInt32Max = 2147483647;
constexpr int64_t kInt32Min = -kInt32Max - 1;
constexpr int64_t kInt64Min = -9223372036854775807LL - 1;
constexpr int64_t kInt64Max = 9223372036854775807LL;

struct Failure {
  int32_t code;
  int64_t v[4];
};

MTP_HD Failure ok() { return Failure{kOk, {0, 0, 0, 0}}; }
MTP_HD Failure fail(int32_t code, int64_t a, int64_t b = 0, int64_t c = 0, int64_t d = 0) {
  return Failure{code, {a, b, c, d}};
}

// ---------------------------------------------------------------------------
// draft_model_preprocess
// ---------------------------------------------------------------------------

// Raw views of the op's tensors. Per-request vectors are indexed [i]; 2-D
// tensors are row-major with the given number of columns.
struct PreprocessTensors {
  int64_t* draft_tokens;  int64_t draft_cols;
  int64_t* input_ids;     int64_t input_cols;
  bool* stop_flags;
  int32_t* seq_lens_this_time;
  int32_t* seq_lens_encoder;
  int32_t* seq_lens_decoder;
  int64_t* step_idx;
  bool* is_block_step;
  bool* batch_drop;
  int64_t* pre_ids;       int64_t pre_cols;
  int32_t* mask_rollback;
  const int64_t* accept_tokens;  int64_t accept_cols;
  const int32_t* accept_num;
  const int32_t* base_seq_lens_decoder;
  const int64_t* base_step_idx;
  const bool* base_stop_flags;
  const bool* base_is_block_step;
  int64_t* base_draft_tokens;    int64_t base_draft_cols;
  // The 22-tensor forms only (recompute, pr5738); null in the others: the
  // rollback form never reads the base model's this-time lengths.
  int32_t* recompute_token_num;
  const int32_t* base_seq_lens_this_time;
  // The shadow form only (FastDeploy's 17-tensor op), which has no
  // is_block_step, batch_drop, mask_rollback or base_is_block_step (those
  // are null in it): each request's length limit.
  const int64_t* max_dec_len;
};

// The form (forms.h, from the signature table) is a template parameter of
// every function whose rules differ by form, so that each form's code holds
// only its own branches (a branch on the form between the loads would hold a
// load back until the one before it returns: see load_now). A form's views
// leave the fields of the tensors it has not null.

struct PreprocessAttrs {
  int32_t num_model_step;
  bool truncate_first_token;
  bool splitwise_prefill;
  bool kvcache_scheduler_v1;
};

// Everything request i will become. Scalars hold the new values.
struct PreprocessPlan {
  bool running;           // counts towards not_need_stop
  bool prefill;           // running with E > 0: the first token is placed
  bool stop_flag;
  bool is_block_step;
  bool batch_drop;
  bool write_pre_ids0;    // pre_ids[i, 0] = t (normal-mode prefill)
  bool clear_base_draft;  // base_model_draft_tokens[i, 1:] = -1 (normal mode)
  int32_t this_time;
  int32_t encoder;
  int64_t decoder;        // 64-bit so a rollback below zero is seen, not wrapped
  int64_t first_token_col;  // input_ids column for t when prefill
  int32_t accepted;         // tokens copied into draft_tokens and pre_ids (decode)
  int64_t pre_ids_end;      // base_model_step_idx: accepted tokens go to [end - accepted, end)
  int32_t old_decoder;
  // What this step's change of seq_lens_decoder is added to: mask_rollback as
  // it was, but 0 for a prefill (plan_first_token).
  int32_t old_rollback;
  // step_idx becomes step_from - step_minus: the old value minus 0 but for a
  // decode plan, whose subtraction check_preprocess has seen stays an int64.
  int64_t step_from;
  int64_t step_minus;
  // The recompute form: mask_rollback becomes old_rollback + recomputed (a
  // decode plan's tokens to recompute, 0 otherwise), and a decode plan sets
  // recompute_token_num to num_model_step - 1 (write_recompute).
  bool recompute;
  bool write_recompute;
  int32_t recomputed;
  int32_t next_recompute;
  // The shadow form: no mask_rollback, is_block_step or batch_drop to write.
  bool shadow;
  // Whether the form has mask_rollback (not the shadow and pr5245 forms).
  bool rollback_tensor;
  // FastDeploy's own kernel (the pr5245 and pr5738 forms): its rules
  // (merged), and a stopped draft re-synced from base_model_seq_lens_this_time
  // (merged_resync).
  bool merged;
  bool merged_resync;
  // A running decode rolled back by step_minus (k - 1, or the recomputed
  // tokens), not re-synced: its refusals name that subtraction.
  bool rolled_back;
};

// Normal mode forgets the base model's drafts past column 0 for every request
// of the batch, running or not; the prefill node keeps them, but in the
// shadow form, which forgets them on every node.
MTP_HD bool clears_base_draft(bool shadow, const PreprocessAttrs& a) {
  return shadow || !a.splitwise_prefill;
}

// In 64 bits, so E + 1 cannot wrap; the narrowing to int32 is used only once
// check_preprocess has seen the column below INT32_MAX.
//
// A prefill starts the request's mask history afresh: the insert set its
// cursor from the prompt, so a rollback left in the slot belongs to an earlier
// request (one that finished with its KV positions pending) and is dropped.
// FastDeploy's own inserts of a new prompt never write mask_rollback. For the
// same reason a running prefill is never parked: a draft that was parked when
// its request finished would otherwise leave is_block_step set, and the mask
// op would skip the next request's prompt. The forms of FastDeploy's versions
// are drop-ins for its own ops, which do neither: their prefill keeps both.
// (The shadow form has neither.)
MTP_HD void plan_first_token(PreprocessPlan& p, int32_t E, bool truncate) {
  p.prefill = true;
  if (!p.recompute & !p.shadow & !p.merged) {
    p.old_rollback = 0;
    p.is_block_step = false;
  }
  p.first_token_col = truncate ? (int64_t)E - 1 : (int64_t)E;
  p.this_time = (int32_t)(p.first_token_col + 1);
}

MTP_HD void plan_not_running(PreprocessPlan& p) {
  p.running = false;
  p.stop_flag = true;
  p.this_time = 0;
  p.decoder = 0;
  p.encoder = 0;
}

// Request i's values, all of them, read before any is looked at.
struct PreprocessRequest {
  int32_t encoder, decoder, this_time, rollback, accept_num, base_decoder;
  int32_t recompute;       // the 22-tensor forms'; 0 in the others
  int32_t base_this_time;  // the 22-tensor and pr5245 forms'; 0 in the others
  int64_t step_idx, base_step_idx;
  int64_t max_dec_len;  // the shadow form's; 0 in the others
  bool stop_flag, is_block_step, batch_drop, base_stop, base_block;
  // What form F has and does (the form_* functions below).
  bool recompute_form, merged_form, shadow_form, rollback_tensor, resync_form;
};

// What a form's preprocess has and does (docs/contract.md, "The forms").
// recompute_token_num: the two 22-tensor forms (the pr6403 form runs
// pr5738's kernel, forms.h's preprocess_form).
MTP_HD constexpr bool form_recomputes(Form f) {
  return f == Form::kRecompute || f == Form::kPr5738;
}
// FastDeploy's own kernel of ba915e03e and 9018ccf74: a re-sync from
// base_model_seq_lens_this_time, and what that kernel runs that the other
// forms refuse (a negative accept_num, a decode of negative
// seq_lens_encoder).
MTP_HD constexpr bool form_is_fastdeploy_kernel(Form f) {
  return f == Form::kPr5245 || f == Form::kPr5738;
}
MTP_HD constexpr bool form_has_mask_rollback(Form f) {
  return f != Form::kShadow && f != Form::kPr5245 && f != Form::kCorrectedPr5245;
}
// The corrected forms: every running decode takes its KV positions and step
// from the base model less accept_num, as the shadow form's does, whatever
// the draft's own state holds. FastDeploy's runners differ by version in
// what their inserts preset and when a draft stops; the base model's lengths
// mean the same in all of them.
MTP_HD constexpr bool form_resyncs_every_decode(Form f) {
  return f == Form::kCorrectedPr5245 || f == Form::kCorrectedPr5738;
}

template <Form F>
MTP_HD PreprocessRequest read_preprocess_request(const PreprocessTensors& t, int64_t i) {
  PreprocessRequest r;
  r.encoder = load_now(t.seq_lens_encoder + i);
  r.decoder = load_now(t.seq_lens_decoder + i);
  r.this_time = load_now(t.seq_lens_this_time + i);
  r.accept_num = load_now(t.accept_num + i);
  r.base_decoder = load_now(t.base_seq_lens_decoder + i);
  r.step_idx = load_now(t.step_idx + i);
  r.base_step_idx = load_now(t.base_step_idx + i);
  r.stop_flag = load_now(t.stop_flags + i);
  r.base_stop = load_now(t.base_stop_flags + i);
  r.recompute = 0;
  r.base_this_time = 0;
  r.max_dec_len = 0;
  r.rollback = 0;
  r.is_block_step = r.batch_drop = r.base_block = false;
  r.recompute_form = form_recomputes(F);
  r.merged_form = form_is_fastdeploy_kernel(F);
  r.shadow_form = F == Form::kShadow;
  r.rollback_tensor = form_has_mask_rollback(F);
  r.resync_form = form_resyncs_every_decode(F);
  if constexpr (F == Form::kShadow) {
    r.max_dec_len = load_now(t.max_dec_len + i);
  } else {
    r.is_block_step = load_now(t.is_block_step + i);
    r.batch_drop = load_now(t.batch_drop + i);
    r.base_block = load_now(t.base_is_block_step + i);
  }
  if constexpr (form_has_mask_rollback(F)) r.rollback = load_now(t.mask_rollback + i);
  if constexpr (form_recomputes(F)) r.recompute = load_now(t.recompute_token_num + i);
  if constexpr (form_recomputes(F) || form_is_fastdeploy_kernel(F)) {
    r.base_this_time = load_now(t.base_seq_lens_this_time + i);
  }
  return r;
}

// Whether the shadow form skips a request: its target model stopped or, off
// a prefill node, target_model_step_idx + num_model_step reaches its
// max_dec_len. The sum saturates at INT64_MAX (a sum past int64 is past any
// limit) rather than being formed where it would leave int64: a select, not
// a branch, and no signed overflow on either side of it.
MTP_HD bool shadow_skips(const PreprocessRequest& r, const PreprocessAttrs& a) {
  const int64_t k = a.num_model_step;
  const int64_t end = r.base_step_idx > kInt64Max - k ? kInt64Max : r.base_step_idx + k;
  const bool near_end = !a.splitwise_prefill & (end >= r.max_dec_len);
  return r.base_stop | near_end;
}

// A decode that takes its KV positions and step from the base model, less
// the accepted tokens it feeds again: the rollback form's re-sync of a
// stopped draft, and every decode of the shadow form.
MTP_HD void plan_resync(PreprocessPlan& p, const PreprocessRequest& r) {
  p.decoder = (int64_t)r.base_decoder - r.accept_num;  // 32-bit operands: cannot wrap
  p.step_from = r.base_step_idx;
  p.step_minus = r.accept_num;
}

// A decode feeds its accepted tokens again: into draft_tokens, and pre_ids'
// columns before base_model_step_idx.
// FastDeploy 9018ccf74 (draft_model_preprocess.cu lines 242-249) copies no
// token for a negative accept_num and writes it as seq_lens_this_time; the
// other forms refuse it (check_preprocess).
MTP_HD void plan_refeed(PreprocessPlan& p, const PreprocessRequest& r) {
  p.accepted = r.merged_form & (r.accept_num < 0) ? 0 : r.accept_num;
  p.pre_ids_end = r.base_step_idx;
  p.this_time = r.accept_num;
}

// FastDeploy's shadow form: nothing of the draft's own state carries over
// from the step before but its seq_lens_encoder. A skipped request stops with
// its lengths and step_idx 0; a prefill places the first token at E - 1 and
// takes step_idx = target_model_step_idx - 1; a decode takes seq_lens_decoder
// and step_idx from the target model less accept_num and re-feeds the
// accepted tokens: the rollback form's re-sync branch, every step.
MTP_HD void plan_shadow(PreprocessPlan& p, const PreprocessRequest& r, const PreprocessAttrs& a) {
  if (shadow_skips(r, a)) {
    plan_not_running(p);
    p.step_from = 0;
    return;
  }
  p.running = true;
  p.stop_flag = false;
  if (r.encoder > 0) {
    p.write_pre_ids0 = true;
    plan_first_token(p, r.encoder, /*truncate=*/true);
    p.step_from = r.base_step_idx;  // less 1
    p.step_minus = 1;
    return;
  }
  plan_resync(p, r);
  plan_refeed(p, r);
}

MTP_HD PreprocessPlan plan_preprocess(const PreprocessRequest& r, const PreprocessAttrs& a) {
  PreprocessPlan p;
  const int32_t E = r.encoder;
  const int32_t S = r.decoder;
  p.running = false;
  p.prefill = false;
  p.stop_flag = r.stop_flag;
  p.is_block_step = r.is_block_step;
  p.batch_drop = r.batch_drop;
  p.write_pre_ids0 = false;
  p.clear_base_draft = clears_base_draft(r.shadow_form, a);
  p.this_time = r.this_time;
  p.encoder = E;
  p.decoder = S;
  p.old_decoder = S;
  p.old_rollback = r.rollback;
  p.first_token_col = -1;
  p.accepted = 0;
  p.pre_ids_end = 0;
  p.step_from = r.step_idx;
  p.step_minus = 0;
  p.recompute = r.recompute_form;
  p.write_recompute = false;
  p.recomputed = 0;
  p.next_recompute = 0;
  p.shadow = r.shadow_form;
  p.rollback_tensor = r.rollback_tensor;
  p.merged = r.merged_form;
  p.merged_resync = false;
  p.rolled_back = false;

  if (p.shadow) {
    plan_shadow(p, r, a);
    return p;
  }
  if (a.splitwise_prefill) {
    if (E > 0) {
      p.running = true;
      p.stop_flag = false;
      plan_first_token(p, E, a.truncate_first_token);
    } else {
      plan_not_running(p);
    }
    return p;
  }

  const bool base_block = r.base_block;
  if (r.base_stop && base_block) {
    p.stop_flag = true;
    if (a.kvcache_scheduler_v1) {
      p.is_block_step = true;  // parked: it resumes later
    } else {
      p.batch_drop = true;
    }
  }
  if (r.base_stop || p.batch_drop) {
    plan_not_running(p);
    return p;
  }
  p.running = true;
  if (E > 0) {
    p.stop_flag = false;
    p.write_pre_ids0 = true;
    plan_first_token(p, E, a.truncate_first_token);
    return p;
  }
  // Decode (E <= 0; check_preprocess refuses a negative E but in the pr5738 form).
  if (a.kvcache_scheduler_v1 && !base_block && p.is_block_step) p.is_block_step = false;
  if (r.resync_form) {
    p.stop_flag = false;
    plan_resync(p, r);
    plan_refeed(p, r);
    return p;
  }
  // The recompute form (FastDeploy 0956b09a): a decode rolls back only the
  // tokens it recomputes, n = min(recompute_token_num,
  // max(base_model_seq_lens_this_time - 2, 0)), adds n (not the change of
  // seq_lens_decoder) to mask_rollback on either branch, and the next step
  // recomputes num_model_step - 1. PR #5738 as merged (9018ccf74,
  // draft_model_preprocess.cu lines 225-241): n = recompute_token_num,
  // unclamped, on a running decode only; a re-sync takes the base model's
  // lengths less base_model_seq_lens_this_time and leaves mask_rollback and
  // recompute_token_num as they are. PR #5245 (ba915e03e, the same file's
  // lines 221-230) is that kernel with a running decode rolling back
  // num_model_step - 1 and no mask_rollback.
  if (p.recompute) {
    const int32_t limit = r.base_this_time > 2 ? r.base_this_time - 2 : 0;
    p.recomputed = r.merged_form || r.recompute < limit ? r.recompute : limit;
    p.write_recompute = true;
    p.next_recompute = a.num_model_step - 1;
  }
  // 32-bit operands in 64-bit arithmetic: these cannot wrap.
  if (p.stop_flag & r.merged_form) {
    p.stop_flag = false;
    p.merged_resync = true;
    p.decoder = (int64_t)r.base_decoder - r.base_this_time;
    p.step_from = r.base_step_idx;
    p.step_minus = r.base_this_time;
    p.recomputed = 0;
    p.write_recompute = false;
  } else if (p.stop_flag) {
    // The draft stopped while the base model went on: re-sync from the base.
    p.stop_flag = false;
    plan_resync(p, r);
  } else if (p.recompute) {
    p.rolled_back = true;
    p.decoder = (int64_t)S - p.recomputed;
    p.step_minus = p.recomputed;
  } else {
    // Roll back the positions the extra substeps wrote.
    p.rolled_back = true;
    p.decoder = (int64_t)S - (a.num_model_step - 1);
    p.step_minus = (int64_t)a.num_model_step - 1;
  }
  plan_refeed(p, r);
  return p;
}

template <Form F>
MTP_HD PreprocessPlan plan_preprocess(const PreprocessTensors& t, const PreprocessAttrs& a,
                                      int64_t i) {
  return plan_preprocess(read_preprocess_request<F>(t, i), a);
}

// Every branch adds the change of seq_lens_decoder to mask_rollback (the
// 22-tensor forms: a decode's recomputed tokens); the sum must stay an int32.
MTP_HD int64_t new_rollback(const PreprocessPlan& p) {
  return (int64_t)p.old_rollback + (p.recompute ? (int64_t)p.recomputed
                                                : (int64_t)p.old_decoder - p.decoder);
}

// The checks of a request, each a bit (below, in the order they are
// reported). Every check is computed, each false where it does not apply, and
// none depends on another's outcome, combined with & and | (the compiler
// makes && and || into branches): a GPU kernel that only needs "passes or
// not" tests the bits without a branch waiting on each condition in turn
// (a small batch's kernel is one chain of such waits), and
// check_preprocess / check_mask_request name the first failing one. All the
// arithmetic is 64-bit over 32-bit values: computed unconditionally, none of
// it can wrap.
MTP_HD uint32_t bit(bool fails, uint32_t which) { return fails ? which : 0u; }

enum PreprocessCheck : uint32_t {
  kPrefillAcceptColumn = 1u << 0,
  kPrefillTokenColumn = 1u << 1,
  kPrefillPreIdsColumn = 1u << 2,
  kDecodeEncoder = 1u << 3,
  kDecodeAcceptNum = 1u << 4,
  kDecodePreIdsWindow = 1u << 5,
  kDecodeDecoder = 1u << 6,
  kDecodeStepIdx = 1u << 7,
  kRollbackRange = 1u << 8,
};

MTP_HD uint32_t preprocess_failures(const PreprocessTensors& t, const PreprocessPlan& p) {
  const bool prefill = p.running & p.prefill;
  const bool decode = p.running & !p.prefill;
  const int32_t acc = p.accepted;
  const int64_t max_acc = t.accept_cols < t.draft_cols ? t.accept_cols : t.draft_cols;
  const int64_t r = new_rollback(p);
  return
      // A prefill reads accept_tokens[i, 0] and writes input_ids[i, col] (and
      // pre_ids[i, 0]); seq_lens_this_time becomes col + 1, an int32.
      bit(prefill & (t.accept_cols < 1), kPrefillAcceptColumn) |
      bit(prefill & ((p.first_token_col >= t.input_cols) | (p.first_token_col >= kInt32Max)),
          kPrefillTokenColumn) |
      bit(prefill & p.write_pre_ids0 & (t.pre_cols < 1), kPrefillPreIdsColumn) |
      // A decode plan keeps seq_lens_encoder as it was (E <= 0).
      // (FastDeploy 9018ccf74 runs such a request as a decode, line 218: so
      // does its form here.)
      bit(decode & (p.encoder < 0) & !p.merged, kDecodeEncoder) |
      bit(decode & ((acc < 0) | (acc > max_acc)), kDecodeAcceptNum) |
      // The window [end - acc, end) inside [0, pre_cols), compared without
      // forming end - acc.
      bit(decode & (acc > 0) & ((p.pre_ids_end < acc) | (p.pre_ids_end > t.pre_cols)),
          kDecodePreIdsWindow) |
      // The new lengths and steps only need to be representable: a negative
      // one (FastDeploy's decode-node preset for k >= 3 gives a transient
      // negative step_idx) is written as it is, and is the business of the
      // op that reads it next. step_minus is k-1 or accept_num; a negative
      // accept_num is refused above, and so is one past base_model_step_idx;
      // clamped here at 0 all the same, since this sum is computed for every
      // plan and INT64_MIN + a negative one would overflow.
      bit(decode & ((p.decoder < kInt32Min) | (p.decoder > kInt32Max)), kDecodeDecoder) |
      // (A negative step_minus, the recompute form's negative recompute_token_num,
      // steps up: then the bound is INT64_MAX.) A plan that is no decode
      // subtracts nothing, but the shadow form's prefill subtracts 1.
      bit((decode | p.shadow) & (p.step_minus >= 0 ? p.step_from < kInt64Min + p.step_minus
                                                   : p.step_from > kInt64Max + p.step_minus),
          kDecodeStepIdx) |
      // Every plan of a form with a mask_rollback: it stays an int32 (one compare).
      bit(p.rollback_tensor & ((uint64_t)(r - kInt32Min) > (uint64_t)(kInt32Max - kInt32Min)),
          kRollbackRange);
}

MTP_HD Failure check_preprocess(const PreprocessTensors& t, const PreprocessPlan& p, int64_t i) {
  const uint32_t f = preprocess_failures(t, p);
  const int32_t acc = p.accepted;
  if (f & kPrefillAcceptColumn) return fail(kNoAcceptTokensColumn, t.accept_cols);
  if (f & kPrefillTokenColumn)
    return fail(kFirstTokenOutsideInputIds, p.first_token_col, t.input_cols, p.encoder);
  if (f & kPrefillPreIdsColumn) return fail(kNoPreIdsColumn, t.pre_cols);
  if (f & kDecodeEncoder) return fail(kNegativeSeqLensEncoder, p.encoder);
  if (f & kDecodeAcceptNum) return fail(kAcceptNumOutOfRange, acc, t.accept_cols, t.draft_cols);
  if (f & kDecodePreIdsWindow) return fail(kPreIdsWindowOutside, p.pre_ids_end, acc, t.pre_cols);
  if ((f & kDecodeDecoder) && p.merged_resync)
    return fail(kResyncDecoderOutOfRange, p.decoder, t.base_seq_lens_decoder[i],
                t.base_seq_lens_this_time[i]);
  if ((f & kDecodeDecoder) && p.rolled_back)
    return fail(p.recompute ? kRecomputeDecoderOutOfRange : kRollbackDecoderOutOfRange, p.decoder,
                p.old_decoder, p.step_minus);
  if (f & kDecodeDecoder)
    return fail(kSeqLensDecoderOutOfRange, p.decoder, p.old_decoder, t.base_seq_lens_decoder[i], acc);
  if (f & kDecodeStepIdx)
    return fail(p.merged_resync ? kResyncStepIdxOverflow
                : p.shadow        ? kShadowStepIdxOverflow
                : p.recompute     ? kRecomputeStepIdxOverflow
                                  : kStepIdxOverflow,
                p.step_from, p.step_minus);
  if (f & kRollbackRange) {
    if (p.recompute) return fail(kRecomputeRollbackOutOfRange, p.old_rollback, p.recomputed);
    return fail(kMaskRollbackOutOfRange, p.old_rollback, p.old_decoder, p.decoder);
  }
  return ok();
}

// base_model_draft_tokens[i, 1:] = -1 (where the plan's clear_base_draft).
MTP_HD void clear_base_draft_row(const PreprocessTensors& t, int64_t i) {
  int64_t* row = t.base_draft_tokens + i * t.base_draft_cols;
  for (int64_t j = 1; j < t.base_draft_cols; ++j) row[j] = -1;
}

// Request i's first accepted tokens (accept_tokens[i, 0:4]), read with its
// other values, so that a GPU thread does not wait for them after the
// agreement. accept_tokens is only read, so any row's first columns may be.
constexpr int kKeptTokens = 4;
struct KeptTokens {
  int64_t v[kKeptTokens];
};

MTP_HD KeptTokens read_kept_tokens(const PreprocessTensors& t, int64_t i) {
  KeptTokens k;
  MTP_UNROLL for (int j = 0; j < kKeptTokens; ++j)
    k.v[j] = j < t.accept_cols ? t.accept_tokens[i * t.accept_cols + j] : 0;
  return k;
}

// Writes request i's plan but for the base draft row, its first accepted
// tokens from `kept`. Returns whether it runs.
MTP_HD bool apply_plan(const PreprocessTensors& t, const PreprocessPlan& p, int64_t i,
                       const KeptTokens& kept) {
  if (p.prefill) {
    const int64_t tok = kept.v[0];  // check_preprocess: accept_tokens has a column
    t.input_ids[i * t.input_cols + p.first_token_col] = tok;
    if (p.write_pre_ids0) t.pre_ids[i * t.pre_cols] = tok;
  }
  int64_t* draft = t.draft_tokens + i * t.draft_cols;
  int64_t* pre = t.pre_ids + i * t.pre_cols + (p.pre_ids_end - p.accepted);
  MTP_UNROLL for (int j = 0; j < kKeptTokens; ++j) {
    if (j < p.accepted) {
      draft[j] = kept.v[j];
      pre[j] = kept.v[j];
    }
  }
  for (int32_t j = kKeptTokens; j < p.accepted; ++j) {
    const int64_t tok = t.accept_tokens[i * t.accept_cols + j];
    draft[j] = tok;
    pre[j] = tok;
  }
  t.stop_flags[i] = p.stop_flag;
  t.seq_lens_this_time[i] = p.this_time;
  t.seq_lens_encoder[i] = p.encoder;
  t.seq_lens_decoder[i] = (int32_t)p.decoder;
  t.step_idx[i] = p.step_from - p.step_minus;
  if (!p.shadow) {
    t.is_block_step[i] = p.is_block_step;
    t.batch_drop[i] = p.batch_drop;
  }
  // The one rule that keeps the mask cursor aligned with the KV positions
  // (in range: kRollbackRange, preprocess_failures).
  if (p.rollback_tensor) t.mask_rollback[i] = (int32_t)new_rollback(p);
  if (p.write_recompute) t.recompute_token_num[i] = p.next_recompute;
  return p.running;
}

MTP_HD bool apply_plan(const PreprocessTensors& t, const PreprocessPlan& p, int64_t i) {
  return apply_plan(t, p, i, read_kept_tokens(t, i));
}

// Writes request i's plan. Returns whether it is running.
MTP_HD bool apply_preprocess(const PreprocessTensors& t, const PreprocessPlan& p, int64_t i,
                             const KeptTokens& kept) {
  if (p.clear_base_draft) clear_base_draft_row(t, i);
  return apply_plan(t, p, i, kept);
}
MTP_HD bool apply_preprocess(const PreprocessTensors& t, const PreprocessPlan& p, int64_t i) {
  return apply_preprocess(t, p, i, read_kept_tokens(t, i));
}

// ---------------------------------------------------------------------------
// update_attn_mask_offsets
// ---------------------------------------------------------------------------

struct MaskTensors {
  int64_t num_tokens;  // T: length of ids_remove_padding
  const int32_t* seq_lens_this_time;
  const int32_t* seq_lens_encoder;
  const int32_t* seq_lens_decoder;
  const int32_t* cu_seqlens_q;
  // cu_seqlens_q's entries: bsz + 1 (prefix sums with the total last) or bsz
  // (FastDeploy's own tests pass those); past the last, the next request's
  // first token is num_tokens.
  int64_t cu_entries;
  const int32_t* mask_full;  int64_t mask_full_cols;
  // The mask cursor and its pending rollback: both null in the shadow form,
  // whose decode tokens are numbered from seq_lens_decoder.
  int32_t* mask_decoder;
  const bool* is_block_step;
  int32_t* decode_states;    int64_t decode_states_cols;
  int32_t* mask_rollback;
  int32_t* out;  // [2 * T]
};

enum MaskBranch : int32_t { kSkip = 0, kPrompt = 1, kVisionGeneration = 2, kDecode = 3 };

// Request i's branch and every per-request value its checks and writes use,
// all read at once (decode_states has at least one column).
struct MaskPlan {
  int32_t branch;
  int32_t q;     // first token of the request in the packed batch
  int32_t n;     // its tokens this substep
  int64_t next;  // the next request's first token: cu_seqlens_q[i + 1], or T past the last entry
  int32_t encoder, decoder;  // seq_lens_encoder, seq_lens_decoder
  int32_t cursor, rollback;  // attn_mask_offsets_decoder, mask_rollback
};

// The mask ops that number a decode's tokens from its KV positions
// (seq_lens_decoder + 1 + j): the shadow form's, which has no cursor, and the
// corrected forms', which write theirs after (finish_mask_request) so that it
// stays true.
MTP_HD constexpr bool form_numbers_decode_from_kv(Form f) {
  return f == Form::kShadow || f == Form::kCorrectedPr5738 || f == Form::kCorrectedPr6403;
}

template <Form F>
MTP_HD MaskPlan plan_mask(const MaskTensors& t, int64_t i) {
  MaskPlan p;
  const int32_t E = load_now(t.seq_lens_encoder + i);
  const int32_t S = load_now(t.seq_lens_decoder + i);
  const int32_t state0 = load_now(t.decode_states + i * t.decode_states_cols);
  const bool block_step = load_now(t.is_block_step + i);
  p.q = load_now(t.cu_seqlens_q + i);
  p.next = i + 1 < t.cu_entries ? (int64_t)load_now(t.cu_seqlens_q + i + 1) : t.num_tokens;
  p.n = load_now(t.seq_lens_this_time + i);
  p.encoder = E;
  p.decoder = S;
  if constexpr (form_numbers_decode_from_kv(F)) {
    // The cursor is the request's KV positions, with nothing to roll back.
    p.cursor = S;
    p.rollback = 0;
  } else {
    p.cursor = load_now(t.mask_decoder + i);
    p.rollback = load_now(t.mask_rollback + i);
  }
  // Selects, not branches: the GPU compiler moved the read of state0 into the
  // branch that uses it, after the reads that decide the branch had returned
  // (a second round trip to memory for a prompt request, seen in the SASS).
  // FastDeploy's branches: a prompt if E > 0, else a decode if S > 0, else
  // nothing (E == S == 0 is a stopped request; a negative length, which a
  // transient rollback can leave, writes nothing either).
  const bool skip = block_step || (E <= 0 && S <= 0);
  const int32_t open = E > 0 ? (state0 == 2 && S > 0 ? kVisionGeneration : kPrompt) : kDecode;
  p.branch = skip ? kSkip : open;
  return p;
}

// The per-request half of the mask checks: everything but a prompt's
// per-token values (check_mask_token), so that a GPU warp can share those.
// Bits as preprocess_failures' (computed unconditionally, reported in this
// order).
enum MaskRequestCheck : uint32_t {
  kTokensThisTime = 1u << 1,
  kTokensInIds = 1u << 2,
  kPromptColumns = 1u << 3,
  kVisionEnd = 1u << 4,
  kDecodeCursor = 1u << 6,
  kDecodeEnd = 1u << 7,
  kTokensBeforeNext = 1u << 8,
};

// Where a decode request's cursor starts: its mask cursor less the rollback
// it consumes, 64-bit (before the checks it may be out of range).
MTP_HD int64_t wide_cursor(const MaskPlan& p) { return (int64_t)p.cursor - p.rollback; }

// The tokens a request writes: none if it is skipped (its seq_lens_this_time
// is not read, and may hold anything).
MTP_HD int32_t tokens_written(const MaskPlan& p) { return p.branch == kSkip ? 0 : p.n; }

MTP_HD uint32_t mask_request_failures(const MaskTensors& t, const MaskPlan& p) {
  const bool runs = p.branch != kSkip;
  const int64_t cursor = wide_cursor(p);
  const bool decode = p.branch == kDecode;
  return bit(runs & (p.n < 0), kTokensThisTime) |
         bit(runs & ((p.q < 0) | ((int64_t)p.q + p.n > t.num_tokens)), kTokensInIds) |
         // Every request, skipped or not: with cu_seqlens_q never decreasing,
         // each request's tokens lie in [cu[i], cu[i+1]), so no two requests
         // write one token (the GPU's result would depend on thread timing).
         bit((int64_t)p.q + tokens_written(p) > p.next, kTokensBeforeNext) |
         bit((p.branch == kPrompt) & (p.n > t.mask_full_cols), kPromptColumns) |
         bit((p.branch == kVisionGeneration) & ((int64_t)p.decoder + p.n > kInt32Max), kVisionEnd) |
         bit(decode & (cursor < 0), kDecodeCursor) |
         bit(decode & (cursor + p.n > kInt32Max), kDecodeEnd);
}

MTP_HD Failure check_mask_request(const MaskTensors& t, const MaskPlan& p, int64_t i) {
  const uint32_t f = mask_request_failures(t, p);
  if (f & kTokensThisTime) return fail(kNegativeSeqLensThisTime, p.n);
  if (f & kTokensInIds) return fail(kTokensOutsideIds, p.q, p.n, t.num_tokens);
  if (f & kTokensBeforeNext) return fail(kTokensPastNextRequest, p.q, tokens_written(p), p.next);
  if (f & kPromptColumns) return fail(kTokensPastMaskFull, p.n, t.mask_full_cols);
  if (f & kVisionEnd) return fail(kMaskCursorOverflow, p.decoder, p.n);
  if (f & kDecodeCursor) return fail(kNegativeMaskCursor, p.cursor, p.rollback);
  if (f & kDecodeEnd) return fail(kMaskCursorOverflow, wide_cursor(p), p.n);
  return ok();
}

// Whether the request's tokens have checks of their own (a prompt's offsets).
MTP_HD bool checks_tokens(const MaskPlan& p) { return p.branch == kPrompt; }

// A prompt's mask offset is written as offset + 1, the end of a key range, so
// it must lie in [0, INT32_MAX).
MTP_HD bool mask_offset_ok(int32_t v) { return v >= 0 && v != kInt32Max; }

// Token j of a prompt request, after check_mask_request passed.
MTP_HD Failure check_mask_token(const MaskTensors& t, int64_t i, int32_t j) {
  const int32_t* full = t.mask_full + i * t.mask_full_cols;
  if (!mask_offset_ok(full[j])) return fail(kMaskFullOutOfRange, j, full[j]);
  return ok();
}

MTP_HD Failure check_mask(const MaskTensors& t, const MaskPlan& p, int64_t i) {
  const Failure f = check_mask_request(t, p, i);
  if (f.code != kOk || !checks_tokens(p)) return f;
  // Every offset is in range exactly when the smallest and the largest are: a
  // reduction without early exit, which the compiler vectorises. Only a bad
  // request walks its tokens to name the first bad one.
  const int32_t* full = t.mask_full + i * t.mask_full_cols;
  int32_t lo = 0, hi = 0;
  if (p.n > 0) lo = hi = full[0];
  for (int32_t j = 1; j < p.n; ++j) {
    lo = full[j] < lo ? full[j] : lo;
    hi = full[j] > hi ? full[j] : hi;
  }
  if (mask_offset_ok(lo) && mask_offset_ok(hi)) return ok();
  for (int32_t j = 0; j < p.n; ++j) {
    const Failure g = check_mask_token(t, i, j);
    if (g.code != kOk) return g;
  }
  return ok();
}

// A decode request's cursor after consuming its rollback (checked: in range,
// so the narrowing keeps its value).
MTP_HD int32_t mask_cursor(const MaskPlan& p) { return (int32_t)wide_cursor(p); }

// The odd entry of token j, per branch. check_mask has bounded every value,
// so the int32 sums cannot wrap.
MTP_HD int32_t prompt_end(int32_t offset) { return offset + 1; }
MTP_HD int32_t prompt_token_end(const int32_t* full, int32_t j) { return prompt_end(full[j]); }
MTP_HD int32_t vision_token_end(const MaskPlan& p) {
  const int32_t v = p.decoder + p.n;
  return v;
}
MTP_HD int32_t decode_token_end(int32_t cursor, int32_t j) { return cursor + 1 + j; }

// Where the odd (end) entry of a request's token j lies in its slice of
// attn_mask_offsets, 64-bit: a request may feed up to 2^31 - 1 tokens, and
// 2 * j in int32 wraps from j = 2^30 on (the write then lands before the
// tensor).
MTP_HD int64_t end_entry(int32_t j) { return 2 * (int64_t)j + 1; }

// The same for any branch but kSkip. (apply_mask's loops call the per-branch
// forms directly, so that the branch is decided once per request, not per
// token.)
MTP_HD int32_t mask_token_end(const MaskTensors& t, const MaskPlan& p, int64_t i, int32_t j) {
  if (p.branch == kPrompt) return prompt_token_end(t.mask_full + i * t.mask_full_cols, j);
  if (p.branch == kVisionGeneration) return vision_token_end(p);
  return decode_token_end(mask_cursor(p), j);
}

// A decode request's row of decode_states, by the rule of FastDeploy's mask op
// of the form's date. The ten-tensor op (FastDeploy 9018ccf74,
// custom_ops/gpu_ops/update_attn_mask_offsets.cu lines 68-77) rewrites the row
// only for a decode of more than one token: 0 for its tokens' columns, -1
// after. The eight-tensor op of the shadow form (7a6c28781, the same file's
// decode branch) rewrites it for every decode, and a column of one of its
// tokens that holds 1 becomes -1 instead of 0; so does the ten-tensor op from
// FastDeploy's PR #6403 on (2178f2829, lines 68-75). Only the row's own
// columns are written, so n may exceed them.
MTP_HD constexpr bool form_rewrites_every_decode(Form f) {
  return f == Form::kShadow || f == Form::kPr6403 || f == Form::kCorrectedPr6403;
}
template <Form F>
MTP_HD bool writes_decode_states(const MaskPlan& p) {
  if constexpr (form_rewrites_every_decode(F)) return p.branch == kDecode;
  return p.branch == kDecode && p.n > 1;
}
MTP_HD int32_t decode_state(int64_t j, int32_t n) { return j < n ? 0 : -1; }
MTP_HD int32_t shadow_decode_state(int32_t old, int64_t j, int32_t n) {
  return j < n && old != 1 ? 0 : -1;
}
template <Form F>
MTP_HD void write_decode_state(const MaskTensors& t, const MaskPlan& p, int64_t i, int64_t j) {
  int32_t* states = t.decode_states + i * t.decode_states_cols;
  if constexpr (form_rewrites_every_decode(F)) {
    states[j] = shadow_decode_state(states[j], j, p.n);
  } else {
    states[j] = decode_state(j, p.n);
  }
}

// After its tokens: a decode request's cursor has consumed the rollback and
// advances past them.
template <Form F>
MTP_HD void finish_mask_request(const MaskTensors& t, const MaskPlan& p, int64_t i) {
  if constexpr (F != Form::kShadow) {
    if (p.branch != kDecode) return;
    t.mask_rollback[i] = 0;
    t.mask_decoder[i] = mask_cursor(p) + p.n;
  }
}

// All of request i, one thread (the CPU driver); the caller has zeroed `out`.
template <Form F>
MTP_HD void apply_mask(const MaskTensors& t, const MaskPlan& p, int64_t i) {
  if (p.branch == kSkip) return;
  int32_t* out = t.out + 2 * (int64_t)p.q;
  if (p.branch == kPrompt) {
    const int32_t* full = t.mask_full + i * t.mask_full_cols;
    for (int32_t j = 0; j < p.n; ++j) out[end_entry(j)] = prompt_token_end(full, j);
  } else if (p.branch == kVisionGeneration) {
    const int32_t v = vision_token_end(p);
    for (int32_t j = 0; j < p.n; ++j) out[end_entry(j)] = v;
  } else {
    const int32_t cursor = mask_cursor(p);
    for (int32_t j = 0; j < p.n; ++j) out[end_entry(j)] = decode_token_end(cursor, j);
  }
  if (writes_decode_states<F>(p)) {
    for (int64_t j = 0; j < t.decode_states_cols; ++j) write_decode_state<F>(t, p, i, j);
  }
  finish_mask_request<F>(t, p, i);
}

// What a whole-batch run reports back (a success or the first failure): from the CPU loop (mtp_cpu.h) directly,
// from the GPU written by the kernel into host-mapped memory (gpu_record.h), or
// left on the device by an asynchronous call.
enum OpId : int64_t { kPreprocessOp = 1, kMaskOp = 2 };
// A failing call's origin: its op in the low two bits, its form above them
// (so that an error reported by a later call of another form is still worded
// as the failing form names its tensors).
constexpr int kOpBits = 2;
static_assert(kForms <= 1 << (8 - kOpBits), "a failure's origin holds the form in six bits");
MTP_HD constexpr OpId op_of(OpId op, Form f) { return (OpId)(op | (int64_t)f << kOpBits); }
MTP_HD OpId origin_op(int64_t origin) { return (OpId)(origin & ((1 << kOpBits) - 1)); }
MTP_HD Form origin_form(int64_t origin) { return (Form)((origin & 0xff) >> kOpBits); }
// Set in `origin` when a kernel found an unreported error from an earlier
// asynchronous call and therefore changed nothing.
constexpr int64_t kDeferred = 1 << 8;
// `code` of a report the host armed and no kernel has written yet.
constexpr int64_t kUnreported = -1;

struct BatchResult {
  int64_t any_running;  // becomes not_need_stop
  int64_t code;         // Check; kOk when the batch was applied
  int64_t request;      // first failing request index
  int64_t v[4];
  int64_t origin;       // op_of the failing call, | kDeferred
};
static_assert(sizeof(BatchResult) == 64, "the record is copied as raw bytes");

MTP_HD BatchResult batch_ok(bool any_running) {
  return BatchResult{any_running ? 1 : 0, kOk, -1, {0, 0, 0, 0}, 0};
}
MTP_HD BatchResult batch_failure(OpId op, int64_t i, const Failure& f) {
  return BatchResult{0, f.code, i, {f.v[0], f.v[1], f.v[2], f.v[3]}, op};
}

}  // namespace mtp
