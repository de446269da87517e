// Host-side wording of the per-request checks: the words of MTP_CHECKS
// (mtp_bookkeeping.h), filled with a failure's values.
#pragma once

#include <string>

#include "mtp_bookkeeping.h"
#include "raise.h"

namespace mtp {

// The words of check `code` in MTP_CHECKS, or null for an unknown code.
inline const char* failure_words(int64_t code) {
  switch (code) {
#define MTP_CHECK_WORDS(name, value, words) \
  case value:                                \
    return words;
    MTP_CHECKS(MTP_CHECK_WORDS)
#undef MTP_CHECK_WORDS
    default:
      return nullptr;
  }
}

// `words` with each {k} (k in 0..3) replaced by v[k].
inline std::string fill(const char* words, const int64_t* v) {
  std::string s;
  for (const char* c = words; *c != '\0'; ++c) {
    if (c[0] == '{' && c[1] >= '0' && c[1] <= '3' && c[2] == '}') {
      s += std::to_string(v[c[1] - '0']);
      c += 2;
    } else {
      s += *c;
    }
  }
  return s;
}

// The shadow form names the base model the target model (its tensors are
// target_model_*); the words name the tensors as the failing call's form does.
inline const char* base_model_prefix(Form f) {
  return f == Form::kShadow ? "target_model_" : "base_model_";
}

inline std::string with_form_names(std::string s, Form f) {
  const std::string from = "base_model_", to = base_model_prefix(f);
  if (from == to) return s;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// `op` is the op being called; the record names the op that failed, which
// differs when an earlier asynchronous call's error surfaces here.
inline std::string describe_failure(const char* op, const BatchResult& r) {
  std::string s;
  const OpId failed = origin_op(r.origin);
  const char* failed_name = failed == kPreprocessOp ? "draft_model_preprocess"
                            : failed == kMaskOp     ? "update_attn_mask_offsets"
                                                    : op;
  s += join(op, ": ");
  if (r.origin & kDeferred) {
    s += join("nothing was changed: an earlier asynchronous call of ", failed_name,
              " on this device failed and was not reported yet: ", failed_name, ": ");
  }
  s += join("request ", r.request, ": ");
  const char* words = failure_words(r.code);
  s += words != nullptr ? with_form_names(fill(words, r.v), origin_form(r.origin)) : join("unknown check ", r.code);
  return s;
}

// A call of `op` raises what its batch run reported, if that was a failure.
inline void raise_if_failed(const char* op, const BatchResult& r) {
  if (r.code != kOk) raise(describe_failure(op, r));
}

}  // namespace mtp
