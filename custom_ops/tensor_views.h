// Raw views of the ops' tensors for the Paddle-free rules (mtp_bookkeeping.h),
// filled field by field by name. Shared by the bindings and the benchmark ops.
// Call after the boundary checks (tensor_checks.h): ranks are trusted here.
#pragma once

#include "mtp_bookkeeping.h"
#include "paddle/extension.h"

namespace mtp {

inline PreprocessTensors preprocess_views(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& is_block_step,
    paddle::Tensor& batch_drop, paddle::Tensor& pre_ids, paddle::Tensor& mask_rollback,
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx,
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step,
    paddle::Tensor& base_model_draft_tokens) {
  PreprocessTensors t;
  t.draft_tokens = draft_tokens.data<int64_t>();
  t.draft_cols = draft_tokens.shape()[1];
  t.input_ids = input_ids.data<int64_t>();
  t.input_cols = input_ids.shape()[1];
  t.stop_flags = stop_flags.data<bool>();
  t.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  t.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  t.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  t.step_idx = step_idx.data<int64_t>();
  t.is_block_step = is_block_step.data<bool>();
  t.batch_drop = batch_drop.data<bool>();
  t.pre_ids = pre_ids.data<int64_t>();
  t.pre_cols = pre_ids.shape()[1];
  t.mask_rollback = mask_rollback.data<int32_t>();
  t.accept_tokens = accept_tokens.data<int64_t>();
  t.accept_cols = accept_tokens.shape()[1];
  t.accept_num = accept_num.data<int32_t>();
  t.base_seq_lens_decoder = base_model_seq_lens_decoder.data<int32_t>();
  t.base_step_idx = base_model_step_idx.data<int64_t>();
  t.base_stop_flags = base_model_stop_flags.data<bool>();
  t.base_is_block_step = base_model_is_block_step.data<bool>();
  t.base_draft_tokens = base_model_draft_tokens.data<int64_t>();
  t.base_draft_cols = base_model_draft_tokens.shape()[1];
  t.recompute_token_num = nullptr;  // the rollback form
  t.base_seq_lens_this_time = nullptr;
  t.max_dec_len = nullptr;
  return t;
}

// The recompute form's views, its tensors in its order. FastDeploy registers
// is_block_step, mask_rollback, recompute_token_num and base_model_draft_tokens
// as plain inputs and writes them all the same, so Paddle hands them over by
// const reference; they are written through these views.
inline PreprocessTensors recompute_views(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx,
    const paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids,
    const paddle::Tensor& mask_rollback, const paddle::Tensor& recompute_token_num,
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
    const paddle::Tensor& base_model_seq_lens_this_time,
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx,
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step,
    const paddle::Tensor& base_model_draft_tokens) {
  auto written = [](const paddle::Tensor& x) -> paddle::Tensor& {
    return const_cast<paddle::Tensor&>(x);
  };
  PreprocessTensors t = preprocess_views(
      draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder,
      seq_lens_decoder, step_idx, written(is_block_step), batch_drop, pre_ids,
      written(mask_rollback), accept_tokens, accept_num, base_model_seq_lens_decoder,
      base_model_step_idx, base_model_stop_flags, base_model_is_block_step,
      written(base_model_draft_tokens));
  t.recompute_token_num = const_cast<int32_t*>(recompute_token_num.data<int32_t>());
  t.base_seq_lens_this_time = base_model_seq_lens_this_time.data<int32_t>();
  return t;
}

// The shadow form's views, its tensors in its order: the base model is the
// target model, and the tensors it does not have are null.
// target_model_draft_tokens, which FastDeploy registers as a plain input and
// writes all the same, comes by const reference and is written through its
// view.
inline PreprocessTensors shadow_views(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& pre_ids,
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
    const paddle::Tensor& target_model_seq_lens_decoder,
    const paddle::Tensor& target_model_step_idx, const paddle::Tensor& target_model_stop_flags,
    const paddle::Tensor& max_dec_len, const paddle::Tensor& target_model_draft_tokens) {
  PreprocessTensors t;
  t.draft_tokens = draft_tokens.data<int64_t>();
  t.draft_cols = draft_tokens.shape()[1];
  t.input_ids = input_ids.data<int64_t>();
  t.input_cols = input_ids.shape()[1];
  t.stop_flags = stop_flags.data<bool>();
  t.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  t.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  t.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  t.step_idx = step_idx.data<int64_t>();
  t.is_block_step = nullptr;
  t.batch_drop = nullptr;
  t.pre_ids = pre_ids.data<int64_t>();
  t.pre_cols = pre_ids.shape()[1];
  t.mask_rollback = nullptr;
  t.accept_tokens = accept_tokens.data<int64_t>();
  t.accept_cols = accept_tokens.shape()[1];
  t.accept_num = accept_num.data<int32_t>();
  t.base_seq_lens_decoder = target_model_seq_lens_decoder.data<int32_t>();
  t.base_step_idx = target_model_step_idx.data<int64_t>();
  t.base_stop_flags = target_model_stop_flags.data<bool>();
  t.base_is_block_step = nullptr;
  t.base_draft_tokens = const_cast<int64_t*>(target_model_draft_tokens.data<int64_t>());
  t.base_draft_cols = target_model_draft_tokens.shape()[1];
  t.recompute_token_num = nullptr;
  t.base_seq_lens_this_time = nullptr;
  t.max_dec_len = max_dec_len.data<int64_t>();
  return t;
}

// update_attn_mask_offsets' tensors; `out` is its fresh [2 * T] output.
// attn_mask_offsets_full is [N, cols] and decode_states [N, cols >= 1]
// (checked at the boundary).
inline MaskTensors mask_views(const paddle::Tensor& ids_remove_padding,
                              const paddle::Tensor& seq_lens_this_time,
                              const paddle::Tensor& seq_lens_encoder,
                              const paddle::Tensor& seq_lens_decoder,
                              const paddle::Tensor& cu_seqlens_q,
                              const paddle::Tensor& attn_mask_offsets_full,
                              paddle::Tensor& attn_mask_offsets_decoder,
                              const paddle::Tensor& is_block_step, paddle::Tensor& decode_states,
                              paddle::Tensor& mask_rollback, paddle::Tensor& out) {
  MaskTensors t;
  t.num_tokens = ids_remove_padding.shape()[0];
  t.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  t.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  t.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  t.cu_seqlens_q = cu_seqlens_q.data<int32_t>();
  t.cu_entries = cu_seqlens_q.numel();
  t.mask_full = attn_mask_offsets_full.data<int32_t>();
  t.mask_full_cols = attn_mask_offsets_full.shape()[1];
  t.mask_decoder = attn_mask_offsets_decoder.data<int32_t>();
  t.is_block_step = is_block_step.data<bool>();
  t.decode_states = decode_states.data<int32_t>();
  t.decode_states_cols = decode_states.shape()[1];
  t.mask_rollback = mask_rollback.data<int32_t>();
  t.out = out.data<int32_t>();
  return t;
}

// The shadow form's (8 tensors): no cursor, no rollback.
inline MaskTensors shadow_mask_views(const paddle::Tensor& ids_remove_padding,
                                     const paddle::Tensor& seq_lens_this_time,
                                     const paddle::Tensor& seq_lens_encoder,
                                     const paddle::Tensor& seq_lens_decoder,
                                     const paddle::Tensor& cu_seqlens_q,
                                     const paddle::Tensor& attn_mask_offsets_full,
                                     const paddle::Tensor& is_block_step,
                                     paddle::Tensor& decode_states, paddle::Tensor& out) {
  MaskTensors t;
  t.num_tokens = ids_remove_padding.shape()[0];
  t.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  t.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  t.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  t.cu_seqlens_q = cu_seqlens_q.data<int32_t>();
  t.cu_entries = cu_seqlens_q.numel();
  t.mask_full = attn_mask_offsets_full.data<int32_t>();
  t.mask_full_cols = attn_mask_offsets_full.shape()[1];
  t.mask_decoder = nullptr;
  t.is_block_step = is_block_step.data<bool>();
  t.decode_states = decode_states.data<int32_t>();
  t.decode_states_cols = decode_states.shape()[1];
  t.mask_rollback = nullptr;
  t.out = out.data<int32_t>();
  return t;
}

}  // namespace mtp
