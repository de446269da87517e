// Host-side wording of the per-request checks in mtp_bookkeeping.h.
#pragma once

#include <string>

#include "mtp_bookkeeping.h"
#include "op_error.h"

namespace mtp {

// `op` is the op being called; the record names the op that failed, which
// differs when an earlier asynchronous call's error surfaces here.
inline std::string describe_failure(const char* op, const ErrorRecord& r) {
  std::string s;
  const int64_t failed = r.origin & (kDeferred - 1);
  const char* failed_name = failed == kPreprocessOp ? "draft_model_preprocess"
                            : failed == kMaskOp     ? "update_attn_mask_offsets"
                                                    : op;
  s += join(op, ": ");
  if (r.origin & kDeferred) {
    s += join("nothing was changed: an earlier asynchronous call of ", failed_name,
              " on this device failed and was not reported yet: ", failed_name, ": ");
  }
  s += join("request ", r.request, ": ");
  const int64_t* v = r.v;
  switch (r.code) {
    case kFirstTokenOutsideInputIds:
      s += join("input_ids: the first token goes to column ", v[0], ", outside input_ids' ", v[1],
                " columns (seq_lens_encoder = ", v[2], ")");
      break;
    case kNoAcceptTokensColumn:
      s += join("accept_tokens: the first token is read from column 0, but accept_tokens has ",
                v[0], " columns");
      break;
    case kNoPreIdsColumn:
      s += join("pre_ids: the first token is written to column 0, but pre_ids has ", v[0],
                " columns");
      break;
    case kAcceptNumOutOfRange:
      s += join("accept_num: ", v[0], " is outside [0, min(accept_tokens columns ", v[1],
                ", draft_tokens columns ", v[2], ")]");
      break;
    case kPreIdsWindowOutside:
      s += join("pre_ids: the ", v[1], " accepted tokens (accept_num) go to the columns before "
                "base_model_step_idx = ", v[0], ", outside pre_ids' ", v[2], " columns");
      break;
    case kNegativeSeqLensDecoder:
      s += join("seq_lens_decoder: the new value ", v[0], " is negative (seq_lens_decoder = ",
                v[1], ", base_model_seq_lens_decoder = ", v[2], ", accept_num = ", v[3], ")");
      break;
    case kNegativeSeqLensEncoder:
      s += join("seq_lens_encoder: ", v[0], " is negative for a running request");
      break;
    case kNegativeSeqLensThisTime:
      s += join("seq_lens_this_time: ", v[0], " is negative");
      break;
    case kTokensOutsideIds:
      s += join("cu_seqlens_q: tokens [", v[0], ", ", v[0] + v[1], ") (cu_seqlens_q = ", v[0],
                ", seq_lens_this_time = ", v[1], ") lie outside the ", v[2],
                " tokens of ids_remove_padding");
      break;
    case kTokensPastMaskFull:
      s += join("attn_mask_offsets_full: seq_lens_this_time = ", v[0],
                " prompt tokens, but it has ", v[1], " columns");
      break;
    case kTokensPastDecodeStates:
      s += join("decode_states: seq_lens_this_time = ", v[0], " tokens, but it has ", v[1],
                " columns");
      break;
    case kNegativeLength:
      s += join("seq_lens_encoder / seq_lens_decoder: ", v[0], " / ", v[1],
                ", lengths must not be negative");
      break;
    case kNegativeStepIdx:
      s += join("step_idx: the new value ", v[2] ? "base_model_step_idx - accept_num"
                                                 : "step_idx - (num_model_step - 1)",
                " = ", v[0], " - ", v[1], " is negative");
      break;
    case kMaskRollbackOutOfRange:
      s += join("mask_rollback: ", v[0], " + (seq_lens_decoder ", v[1], " - new seq_lens_decoder ",
                v[2], ") leaves the int32 range");
      break;
    case kMaskFullOutOfRange:
      s += join("attn_mask_offsets_full: column ", v[0], " holds ", v[1],
                ", outside [0, 2147483647)");
      break;
    case kNegativeMaskCursor:
      s += join("attn_mask_offsets_decoder: the cursor ", v[0], " - mask_rollback ", v[1],
                " is negative");
      break;
    case kMaskCursorOverflow:
      s += join("attn_mask_offsets: the offsets would reach ", v[0], " + seq_lens_this_time ", v[1],
                ", past the int32 range");
      break;
    default:
      s += join("unknown check ", r.code);
  }
  return s;
}

// A call of `op` raises what its batch run reported, if that was a failure.
inline void raise_if_failed(const char* op, const ErrorRecord& r) {
  if (r.code != kOk) raise(describe_failure(op, r));
}

}  // namespace mtp
