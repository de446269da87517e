// Generated from fastdeploy_mtp/signature.py: do not edit; run
// `python -m fastdeploy_mtp signature --write` after changing the table.
// Each op's Paddle binding as the table states it. Per table (the prefixes
// of op_signatures.h): <PREFIX>_PARAMS, the kernel function's parameters (the
// tensors the op declares written in place by reference, every other one --
// FastDeploy's undeclared written ones too -- by const reference, then the
// attributes); <PREFIX>_ARGS, the same as arguments; <PREFIX>_BATCH, the tensor
// whose length is the batch size; <PREFIX>_<OUTPUT>_ROWS_OF, the tensor whose
// length sizes a fresh output. Per form, in namespace mtp::<form>:
// <op>_checks(c, args...), the boundary checks (tensor_checks.h) with the
// table's names, dtypes and access; <op>_views(args...), the checked tensors
// and attributes as the rules read them (tensor_views.h's OpViews); and for
// an op with fresh outputs <op>_shape and <op>_dtype, for Paddle's graph.
// op_registrations.cc registers each form's ops with these.
#pragma once

#include <cstdint>
#include <vector>

#include "op_signatures.h"
#include "tensor_checks.h"
#include "tensor_views.h"

#define MTP_DRAFT_MODEL_PREPROCESS_PARAMS \
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags, \
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder, \
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop, \
    paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids, \
    paddle::Tensor& mask_rollback, const paddle::Tensor& accept_tokens, \
    const paddle::Tensor& accept_num, const paddle::Tensor& base_model_seq_lens_this_time, \
    const paddle::Tensor& base_model_seq_lens_encoder, \
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx, \
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step, \
    paddle::Tensor& base_model_draft_tokens, int num_model_step, bool truncate_first_token, \
    bool splitwise_prefill, bool kvcache_scheduler_v1
#define MTP_DRAFT_MODEL_PREPROCESS_ARGS \
    draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, \
    step_idx, not_need_stop, is_block_step, batch_drop, pre_ids, mask_rollback, accept_tokens, \
    accept_num, base_model_seq_lens_this_time, base_model_seq_lens_encoder, \
    base_model_seq_lens_decoder, base_model_step_idx, base_model_stop_flags, \
    base_model_is_block_step, base_model_draft_tokens, num_model_step, truncate_first_token, \
    splitwise_prefill, kvcache_scheduler_v1
#define MTP_DRAFT_MODEL_PREPROCESS_BATCH seq_lens_this_time

#define MTP_UPDATE_ATTN_MASK_OFFSETS_PARAMS \
    const paddle::Tensor& ids_remove_padding, const paddle::Tensor& seq_lens_this_time, \
    const paddle::Tensor& seq_lens_encoder, const paddle::Tensor& seq_lens_decoder, \
    const paddle::Tensor& cu_seqlens_q, const paddle::Tensor& attn_mask_offsets_full, \
    paddle::Tensor& attn_mask_offsets_decoder, const paddle::Tensor& is_block_step, \
    paddle::Tensor& decode_states, paddle::Tensor& mask_rollback
#define MTP_UPDATE_ATTN_MASK_OFFSETS_ARGS \
    ids_remove_padding, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, cu_seqlens_q, \
    attn_mask_offsets_full, attn_mask_offsets_decoder, is_block_step, decode_states, mask_rollback
#define MTP_UPDATE_ATTN_MASK_OFFSETS_BATCH seq_lens_this_time
#define MTP_UPDATE_ATTN_MASK_OFFSETS_ATTN_MASK_OFFSETS_ROWS_OF ids_remove_padding

#define MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_PARAMS \
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags, \
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder, \
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop, \
    const paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids, \
    const paddle::Tensor& mask_rollback, const paddle::Tensor& recompute_token_num, \
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num, \
    const paddle::Tensor& base_model_seq_lens_this_time, \
    const paddle::Tensor& base_model_seq_lens_encoder, \
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx, \
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step, \
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool truncate_first_token, \
    bool splitwise_prefill, bool kvcache_scheduler_v1
#define MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ARGS \
    draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, \
    step_idx, not_need_stop, is_block_step, batch_drop, pre_ids, mask_rollback, \
    recompute_token_num, accept_tokens, accept_num, base_model_seq_lens_this_time, \
    base_model_seq_lens_encoder, base_model_seq_lens_decoder, base_model_step_idx, \
    base_model_stop_flags, base_model_is_block_step, base_model_draft_tokens, num_model_step, \
    truncate_first_token, splitwise_prefill, kvcache_scheduler_v1
#define MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_BATCH seq_lens_this_time

#define MTP_PR5245_DRAFT_MODEL_PREPROCESS_PARAMS \
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags, \
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder, \
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop, \
    const paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids, \
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num, \
    const paddle::Tensor& base_model_seq_lens_this_time, \
    const paddle::Tensor& base_model_seq_lens_encoder, \
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx, \
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step, \
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool truncate_first_token, \
    bool splitwise_prefill, bool kvcache_scheduler_v1
#define MTP_PR5245_DRAFT_MODEL_PREPROCESS_ARGS \
    draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, \
    step_idx, not_need_stop, is_block_step, batch_drop, pre_ids, accept_tokens, accept_num, \
    base_model_seq_lens_this_time, base_model_seq_lens_encoder, base_model_seq_lens_decoder, \
    base_model_step_idx, base_model_stop_flags, base_model_is_block_step, base_model_draft_tokens, \
    num_model_step, truncate_first_token, splitwise_prefill, kvcache_scheduler_v1
#define MTP_PR5245_DRAFT_MODEL_PREPROCESS_BATCH seq_lens_this_time

#define MTP_XPU_DRAFT_MODEL_PREPROCESS_PARAMS \
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags, \
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder, \
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop, \
    const paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids, \
    const paddle::Tensor& mask_rollback, const paddle::Tensor& recompute_token_num, \
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num, \
    const paddle::Tensor& base_model_seq_lens_this_time, \
    const paddle::Tensor& base_model_seq_lens_encoder, \
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx, \
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step, \
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool truncate_first_token, \
    bool splitwise_prefill, bool kvcache_scheduler_v1
#define MTP_XPU_DRAFT_MODEL_PREPROCESS_ARGS \
    draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, \
    step_idx, not_need_stop, is_block_step, batch_drop, pre_ids, mask_rollback, \
    recompute_token_num, accept_tokens, accept_num, base_model_seq_lens_this_time, \
    base_model_seq_lens_encoder, base_model_seq_lens_decoder, base_model_step_idx, \
    base_model_stop_flags, base_model_is_block_step, base_model_draft_tokens, num_model_step, \
    truncate_first_token, splitwise_prefill, kvcache_scheduler_v1
#define MTP_XPU_DRAFT_MODEL_PREPROCESS_BATCH seq_lens_this_time

#define MTP_SHADOW_DRAFT_MODEL_PREPROCESS_PARAMS \
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags, \
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder, \
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop, \
    paddle::Tensor& pre_ids, const paddle::Tensor& accept_tokens, \
    const paddle::Tensor& accept_num, const paddle::Tensor& target_model_seq_lens_encoder, \
    const paddle::Tensor& target_model_seq_lens_decoder, \
    const paddle::Tensor& target_model_step_idx, const paddle::Tensor& target_model_stop_flags, \
    const paddle::Tensor& max_dec_len, const paddle::Tensor& target_model_draft_tokens, \
    int num_model_step, bool is_splitwise_prefill
#define MTP_SHADOW_DRAFT_MODEL_PREPROCESS_ARGS \
    draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, \
    step_idx, not_need_stop, pre_ids, accept_tokens, accept_num, target_model_seq_lens_encoder, \
    target_model_seq_lens_decoder, target_model_step_idx, target_model_stop_flags, max_dec_len, \
    target_model_draft_tokens, num_model_step, is_splitwise_prefill
#define MTP_SHADOW_DRAFT_MODEL_PREPROCESS_BATCH seq_lens_this_time

#define MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_PARAMS \
    const paddle::Tensor& ids_remove_padding, const paddle::Tensor& seq_lens_this_time, \
    const paddle::Tensor& seq_lens_encoder, const paddle::Tensor& seq_lens_decoder, \
    const paddle::Tensor& cu_seqlens_q, const paddle::Tensor& attn_mask_offsets_full, \
    const paddle::Tensor& is_block_step, paddle::Tensor& decode_states
#define MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_ARGS \
    ids_remove_padding, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, cu_seqlens_q, \
    attn_mask_offsets_full, is_block_step, decode_states
#define MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_BATCH seq_lens_this_time
#define MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_ATTN_MASK_OFFSETS_ROWS_OF ids_remove_padding

#define MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_PARAMS \
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags, \
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder, \
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop, \
    const paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids, \
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num, \
    const paddle::Tensor& base_model_seq_lens_this_time, \
    const paddle::Tensor& base_model_seq_lens_encoder, \
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx, \
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step, \
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool truncate_first_token, \
    bool splitwise_prefill, bool kvcache_scheduler_v1
#define MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_ARGS \
    draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, \
    step_idx, not_need_stop, is_block_step, batch_drop, pre_ids, accept_tokens, accept_num, \
    base_model_seq_lens_this_time, base_model_seq_lens_encoder, base_model_seq_lens_decoder, \
    base_model_step_idx, base_model_stop_flags, base_model_is_block_step, base_model_draft_tokens, \
    num_model_step, truncate_first_token, splitwise_prefill, kvcache_scheduler_v1
#define MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_BATCH seq_lens_this_time

#define MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_PARAMS \
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags, \
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder, \
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop, \
    const paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids, \
    const paddle::Tensor& mask_rollback, const paddle::Tensor& recompute_token_num, \
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num, \
    const paddle::Tensor& base_model_seq_lens_this_time, \
    const paddle::Tensor& base_model_seq_lens_encoder, \
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx, \
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step, \
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool truncate_first_token, \
    bool splitwise_prefill, bool kvcache_scheduler_v1
#define MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_ARGS \
    draft_tokens, input_ids, stop_flags, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, \
    step_idx, not_need_stop, is_block_step, batch_drop, pre_ids, mask_rollback, \
    recompute_token_num, accept_tokens, accept_num, base_model_seq_lens_this_time, \
    base_model_seq_lens_encoder, base_model_seq_lens_decoder, base_model_step_idx, \
    base_model_stop_flags, base_model_is_block_step, base_model_draft_tokens, num_model_step, \
    truncate_first_token, splitwise_prefill, kvcache_scheduler_v1
#define MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_BATCH seq_lens_this_time

namespace mtp {

namespace rollback {

// draft_model_preprocess, the rollback form's (MTP_DRAFT_MODEL_PREPROCESS_...).
// The boundary checks, in the table's order; throws the first refusal.
inline void draft_model_preprocess_checks(ArgChecker& c, const paddle::Tensor& draft_tokens,
    const paddle::Tensor& input_ids, const paddle::Tensor& stop_flags,
    const paddle::Tensor& seq_lens_this_time, const paddle::Tensor& seq_lens_encoder,
    const paddle::Tensor& seq_lens_decoder, const paddle::Tensor& step_idx,
    const paddle::Tensor& not_need_stop, const paddle::Tensor& is_block_step,
    const paddle::Tensor& batch_drop, const paddle::Tensor& pre_ids,
    const paddle::Tensor& mask_rollback, const paddle::Tensor& accept_tokens,
    const paddle::Tensor& accept_num, const paddle::Tensor& base_model_seq_lens_this_time,
    const paddle::Tensor& base_model_seq_lens_encoder,
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx,
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step,
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool, bool, bool) {
  MTP_CHECK(num_model_step >= 1, "draft_model_preprocess", ": num_model_step must be >= 1, got ", num_model_step);
  const int64_t bsz = c.length_only(seq_lens_this_time, "seq_lens_this_time");
  c.vector(seq_lens_this_time, "seq_lens_this_time", paddle::DataType::INT32, bsz, Access::kWritten);
  c.matrix(draft_tokens, "draft_tokens", paddle::DataType::INT64, bsz, Access::kWritten);
  c.matrix(input_ids, "input_ids", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(stop_flags, "stop_flags", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.vector(seq_lens_encoder, "seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(seq_lens_decoder, "seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(step_idx, "step_idx", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(is_block_step, "is_block_step", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.vector(batch_drop, "batch_drop", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.matrix(pre_ids, "pre_ids", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(mask_rollback, "mask_rollback", paddle::DataType::INT32, bsz, Access::kWritten);
  c.matrix(accept_tokens, "accept_tokens", paddle::DataType::INT64, bsz, Access::kRead);
  c.vector(accept_num, "accept_num", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(base_model_seq_lens_this_time, "base_model_seq_lens_this_time", paddle::DataType::INT32, bsz, Access::kUnread);
  c.vector(base_model_seq_lens_encoder, "base_model_seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kUnread);
  c.vector(base_model_seq_lens_decoder, "base_model_seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(base_model_step_idx, "base_model_step_idx", paddle::DataType::INT64, bsz, Access::kRead);
  c.vector(base_model_stop_flags, "base_model_stop_flags", paddle::DataType::BOOL, bsz, Access::kRead);
  c.vector(base_model_is_block_step, "base_model_is_block_step", paddle::DataType::BOOL, bsz, Access::kRead);
  c.matrix(base_model_draft_tokens, "base_model_draft_tokens", paddle::DataType::INT64, bsz, Access::kWritten);
  c.host_or_device_flag(not_need_stop, "not_need_stop");
  c.no_overlap();
}
// The checked tensors and attributes as the rules and the dispatch take them.
inline OpViews<PreprocessTensors, PreprocessAttrs> draft_model_preprocess_views(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop,
    paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids,
    paddle::Tensor& mask_rollback, const paddle::Tensor& accept_tokens,
    const paddle::Tensor& accept_num, const paddle::Tensor&, const paddle::Tensor&,
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx,
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step,
    paddle::Tensor& base_model_draft_tokens, int num_model_step, bool truncate_first_token,
    bool splitwise_prefill, bool kvcache_scheduler_v1) {
  OpViews<PreprocessTensors, PreprocessAttrs> v;
  v.bsz = seq_lens_this_time.shape()[0];
  v.device_tensor = &seq_lens_this_time;
  v.flag = &not_need_stop;
  v.t.draft_tokens = draft_tokens.data<int64_t>();
  v.t.draft_cols = draft_tokens.shape()[1];
  v.t.input_ids = input_ids.data<int64_t>();
  v.t.input_cols = input_ids.shape()[1];
  v.t.stop_flags = stop_flags.data<bool>();
  v.t.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  v.t.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  v.t.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  v.t.step_idx = step_idx.data<int64_t>();
  v.t.is_block_step = is_block_step.data<bool>();
  v.t.batch_drop = batch_drop.data<bool>();
  v.t.pre_ids = pre_ids.data<int64_t>();
  v.t.pre_cols = pre_ids.shape()[1];
  v.t.mask_rollback = mask_rollback.data<int32_t>();
  v.t.accept_tokens = accept_tokens.data<int64_t>();
  v.t.accept_cols = accept_tokens.shape()[1];
  v.t.accept_num = accept_num.data<int32_t>();
  v.t.base_seq_lens_decoder = base_model_seq_lens_decoder.data<int32_t>();
  v.t.base_step_idx = base_model_step_idx.data<int64_t>();
  v.t.base_stop_flags = base_model_stop_flags.data<bool>();
  v.t.base_is_block_step = base_model_is_block_step.data<bool>();
  v.t.base_draft_tokens = base_model_draft_tokens.data<int64_t>();
  v.t.base_draft_cols = base_model_draft_tokens.shape()[1];
  v.attrs.num_model_step = num_model_step;
  v.attrs.truncate_first_token = truncate_first_token;
  v.attrs.splitwise_prefill = splitwise_prefill;
  v.attrs.kvcache_scheduler_v1 = kvcache_scheduler_v1;
  return v;
}

// update_attn_mask_offsets, the rollback form's (MTP_UPDATE_ATTN_MASK_OFFSETS_...).
// The boundary checks, in the table's order; throws the first refusal.
inline void update_attn_mask_offsets_checks(ArgChecker& c, const paddle::Tensor& ids_remove_padding,
    const paddle::Tensor& seq_lens_this_time, const paddle::Tensor& seq_lens_encoder,
    const paddle::Tensor& seq_lens_decoder, const paddle::Tensor& cu_seqlens_q,
    const paddle::Tensor& attn_mask_offsets_full, const paddle::Tensor& attn_mask_offsets_decoder,
    const paddle::Tensor& is_block_step, const paddle::Tensor& decode_states,
    const paddle::Tensor& mask_rollback) {
  c.length_only(ids_remove_padding, "ids_remove_padding");
  const int64_t bsz = c.length_only(seq_lens_this_time, "seq_lens_this_time");
  c.vector(seq_lens_this_time, "seq_lens_this_time", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(seq_lens_encoder, "seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(seq_lens_decoder, "seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kRead);
  c.flat(cu_seqlens_q, "cu_seqlens_q", paddle::DataType::INT32, bsz, Access::kRead);
  c.matrix(attn_mask_offsets_full, "attn_mask_offsets_full", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(attn_mask_offsets_decoder, "attn_mask_offsets_decoder", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(is_block_step, "is_block_step", paddle::DataType::BOOL, bsz, Access::kRead);
  c.matrix(decode_states, "decode_states", paddle::DataType::INT32, bsz, Access::kWritten, 1);
  c.vector(mask_rollback, "mask_rollback", paddle::DataType::INT32, bsz, Access::kWritten);
  c.no_overlap();
}
// The checked tensors and attributes as the rules and the dispatch take them.
inline OpViews<MaskTensors> update_attn_mask_offsets_views(const paddle::Tensor& ids_remove_padding,
    const paddle::Tensor& seq_lens_this_time, const paddle::Tensor& seq_lens_encoder,
    const paddle::Tensor& seq_lens_decoder, const paddle::Tensor& cu_seqlens_q,
    const paddle::Tensor& attn_mask_offsets_full, paddle::Tensor& attn_mask_offsets_decoder,
    const paddle::Tensor& is_block_step, paddle::Tensor& decode_states,
    paddle::Tensor& mask_rollback) {
  OpViews<MaskTensors> v;
  v.bsz = seq_lens_this_time.shape()[0];
  v.device_tensor = &seq_lens_this_time;
  v.t.num_tokens = ids_remove_padding.shape()[0];
  v.t.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  v.t.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  v.t.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  v.t.cu_seqlens_q = cu_seqlens_q.data<int32_t>();
  v.t.cu_entries = cu_seqlens_q.numel();
  v.t.mask_full = attn_mask_offsets_full.data<int32_t>();
  v.t.mask_full_cols = attn_mask_offsets_full.shape()[1];
  v.t.mask_decoder = attn_mask_offsets_decoder.data<int32_t>();
  v.t.is_block_step = is_block_step.data<bool>();
  v.t.decode_states = decode_states.data<int32_t>();
  v.t.decode_states_cols = decode_states.shape()[1];
  v.t.mask_rollback = mask_rollback.data<int32_t>();
  return v;
}
// The fresh outputs' shapes (-1 where unknown), for Paddle's graph.
inline std::vector<std::vector<int64_t>> update_attn_mask_offsets_shape(
    const std::vector<int64_t>& ids_remove_padding, const std::vector<int64_t>&,
    const std::vector<int64_t>&, const std::vector<int64_t>&, const std::vector<int64_t>&,
    const std::vector<int64_t>&, const std::vector<int64_t>&, const std::vector<int64_t>&,
    const std::vector<int64_t>&, const std::vector<int64_t>&) {
  const int64_t attn_mask_offsets_rows = ids_remove_padding.empty() ? -1 : ids_remove_padding[0];
  return {{attn_mask_offsets_rows < 0 ? -1 : 2 * attn_mask_offsets_rows}};
}
// The fresh outputs' dtypes.
inline std::vector<paddle::DataType> update_attn_mask_offsets_dtype(const paddle::DataType&,
    const paddle::DataType&, const paddle::DataType&, const paddle::DataType&,
    const paddle::DataType&, const paddle::DataType&, const paddle::DataType&,
    const paddle::DataType&, const paddle::DataType&, const paddle::DataType&) {
  return {paddle::DataType::INT32};
}

}  // namespace rollback

namespace recompute {

// draft_model_preprocess, the recompute form's (MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_...).
// The boundary checks, in the table's order; throws the first refusal.
inline void draft_model_preprocess_checks(ArgChecker& c, const paddle::Tensor& draft_tokens,
    const paddle::Tensor& input_ids, const paddle::Tensor& stop_flags,
    const paddle::Tensor& seq_lens_this_time, const paddle::Tensor& seq_lens_encoder,
    const paddle::Tensor& seq_lens_decoder, const paddle::Tensor& step_idx,
    const paddle::Tensor& not_need_stop, const paddle::Tensor& is_block_step,
    const paddle::Tensor& batch_drop, const paddle::Tensor& pre_ids,
    const paddle::Tensor& mask_rollback, const paddle::Tensor& recompute_token_num,
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
    const paddle::Tensor& base_model_seq_lens_this_time,
    const paddle::Tensor& base_model_seq_lens_encoder,
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx,
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step,
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool, bool, bool) {
  MTP_CHECK(num_model_step >= 1, "draft_model_preprocess", ": num_model_step must be >= 1, got ", num_model_step);
  const int64_t bsz = c.length_only(seq_lens_this_time, "seq_lens_this_time");
  c.vector(seq_lens_this_time, "seq_lens_this_time", paddle::DataType::INT32, bsz, Access::kWritten);
  c.matrix(draft_tokens, "draft_tokens", paddle::DataType::INT64, bsz, Access::kWritten);
  c.matrix(input_ids, "input_ids", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(stop_flags, "stop_flags", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.vector(seq_lens_encoder, "seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(seq_lens_decoder, "seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(step_idx, "step_idx", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(is_block_step, "is_block_step", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.vector(batch_drop, "batch_drop", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.matrix(pre_ids, "pre_ids", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(mask_rollback, "mask_rollback", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(recompute_token_num, "recompute_token_num", paddle::DataType::INT32, bsz, Access::kWritten);
  c.matrix(accept_tokens, "accept_tokens", paddle::DataType::INT64, bsz, Access::kRead);
  c.vector(accept_num, "accept_num", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(base_model_seq_lens_this_time, "base_model_seq_lens_this_time", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(base_model_seq_lens_encoder, "base_model_seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kUnread);
  c.vector(base_model_seq_lens_decoder, "base_model_seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(base_model_step_idx, "base_model_step_idx", paddle::DataType::INT64, bsz, Access::kRead);
  c.vector(base_model_stop_flags, "base_model_stop_flags", paddle::DataType::BOOL, bsz, Access::kRead);
  c.vector(base_model_is_block_step, "base_model_is_block_step", paddle::DataType::BOOL, bsz, Access::kRead);
  c.matrix(base_model_draft_tokens, "base_model_draft_tokens", paddle::DataType::INT64, bsz, Access::kWritten);
  c.host_or_device_flag(not_need_stop, "not_need_stop");
  c.no_overlap();
}
// The checked tensors and attributes as the rules and the dispatch take them.
inline OpViews<PreprocessTensors, PreprocessAttrs> draft_model_preprocess_views(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop,
    const paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids,
    const paddle::Tensor& mask_rollback, const paddle::Tensor& recompute_token_num,
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
    const paddle::Tensor& base_model_seq_lens_this_time, const paddle::Tensor&,
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx,
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step,
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool truncate_first_token,
    bool splitwise_prefill, bool kvcache_scheduler_v1) {
  OpViews<PreprocessTensors, PreprocessAttrs> v;
  v.bsz = seq_lens_this_time.shape()[0];
  v.device_tensor = &seq_lens_this_time;
  v.flag = &not_need_stop;
  v.t.draft_tokens = draft_tokens.data<int64_t>();
  v.t.draft_cols = draft_tokens.shape()[1];
  v.t.input_ids = input_ids.data<int64_t>();
  v.t.input_cols = input_ids.shape()[1];
  v.t.stop_flags = stop_flags.data<bool>();
  v.t.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  v.t.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  v.t.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  v.t.step_idx = step_idx.data<int64_t>();
  v.t.is_block_step = const_cast<bool*>(is_block_step.data<bool>());
  v.t.batch_drop = batch_drop.data<bool>();
  v.t.pre_ids = pre_ids.data<int64_t>();
  v.t.pre_cols = pre_ids.shape()[1];
  v.t.mask_rollback = const_cast<int32_t*>(mask_rollback.data<int32_t>());
  v.t.recompute_token_num = const_cast<int32_t*>(recompute_token_num.data<int32_t>());
  v.t.accept_tokens = accept_tokens.data<int64_t>();
  v.t.accept_cols = accept_tokens.shape()[1];
  v.t.accept_num = accept_num.data<int32_t>();
  v.t.base_seq_lens_this_time = base_model_seq_lens_this_time.data<int32_t>();
  v.t.base_seq_lens_decoder = base_model_seq_lens_decoder.data<int32_t>();
  v.t.base_step_idx = base_model_step_idx.data<int64_t>();
  v.t.base_stop_flags = base_model_stop_flags.data<bool>();
  v.t.base_is_block_step = base_model_is_block_step.data<bool>();
  v.t.base_draft_tokens = const_cast<int64_t*>(base_model_draft_tokens.data<int64_t>());
  v.t.base_draft_cols = base_model_draft_tokens.shape()[1];
  v.attrs.num_model_step = num_model_step;
  v.attrs.truncate_first_token = truncate_first_token;
  v.attrs.splitwise_prefill = splitwise_prefill;
  v.attrs.kvcache_scheduler_v1 = kvcache_scheduler_v1;
  return v;
}
using rollback::update_attn_mask_offsets_checks;
using rollback::update_attn_mask_offsets_views;
using rollback::update_attn_mask_offsets_shape;
using rollback::update_attn_mask_offsets_dtype;

}  // namespace recompute

namespace pr5245 {

// draft_model_preprocess, the pr5245 form's (MTP_PR5245_DRAFT_MODEL_PREPROCESS_...).
// The boundary checks, in the table's order; throws the first refusal.
inline void draft_model_preprocess_checks(ArgChecker& c, const paddle::Tensor& draft_tokens,
    const paddle::Tensor& input_ids, const paddle::Tensor& stop_flags,
    const paddle::Tensor& seq_lens_this_time, const paddle::Tensor& seq_lens_encoder,
    const paddle::Tensor& seq_lens_decoder, const paddle::Tensor& step_idx,
    const paddle::Tensor& not_need_stop, const paddle::Tensor& is_block_step,
    const paddle::Tensor& batch_drop, const paddle::Tensor& pre_ids,
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
    const paddle::Tensor& base_model_seq_lens_this_time,
    const paddle::Tensor& base_model_seq_lens_encoder,
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx,
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step,
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool, bool, bool) {
  MTP_CHECK(num_model_step >= 1, "draft_model_preprocess", ": num_model_step must be >= 1, got ", num_model_step);
  const int64_t bsz = c.length_only(seq_lens_this_time, "seq_lens_this_time");
  c.vector(seq_lens_this_time, "seq_lens_this_time", paddle::DataType::INT32, bsz, Access::kWritten);
  c.matrix(draft_tokens, "draft_tokens", paddle::DataType::INT64, bsz, Access::kWritten);
  c.matrix(input_ids, "input_ids", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(stop_flags, "stop_flags", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.vector(seq_lens_encoder, "seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(seq_lens_decoder, "seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(step_idx, "step_idx", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(is_block_step, "is_block_step", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.vector(batch_drop, "batch_drop", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.matrix(pre_ids, "pre_ids", paddle::DataType::INT64, bsz, Access::kWritten);
  c.matrix(accept_tokens, "accept_tokens", paddle::DataType::INT64, bsz, Access::kRead);
  c.vector(accept_num, "accept_num", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(base_model_seq_lens_this_time, "base_model_seq_lens_this_time", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(base_model_seq_lens_encoder, "base_model_seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kUnread);
  c.vector(base_model_seq_lens_decoder, "base_model_seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(base_model_step_idx, "base_model_step_idx", paddle::DataType::INT64, bsz, Access::kRead);
  c.vector(base_model_stop_flags, "base_model_stop_flags", paddle::DataType::BOOL, bsz, Access::kRead);
  c.vector(base_model_is_block_step, "base_model_is_block_step", paddle::DataType::BOOL, bsz, Access::kRead);
  c.matrix(base_model_draft_tokens, "base_model_draft_tokens", paddle::DataType::INT64, bsz, Access::kWritten);
  c.host_or_device_flag(not_need_stop, "not_need_stop");
  c.no_overlap();
}
// The checked tensors and attributes as the rules and the dispatch take them.
inline OpViews<PreprocessTensors, PreprocessAttrs> draft_model_preprocess_views(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop,
    const paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids,
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
    const paddle::Tensor& base_model_seq_lens_this_time, const paddle::Tensor&,
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx,
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step,
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool truncate_first_token,
    bool splitwise_prefill, bool kvcache_scheduler_v1) {
  OpViews<PreprocessTensors, PreprocessAttrs> v;
  v.bsz = seq_lens_this_time.shape()[0];
  v.device_tensor = &seq_lens_this_time;
  v.flag = &not_need_stop;
  v.t.draft_tokens = draft_tokens.data<int64_t>();
  v.t.draft_cols = draft_tokens.shape()[1];
  v.t.input_ids = input_ids.data<int64_t>();
  v.t.input_cols = input_ids.shape()[1];
  v.t.stop_flags = stop_flags.data<bool>();
  v.t.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  v.t.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  v.t.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  v.t.step_idx = step_idx.data<int64_t>();
  v.t.is_block_step = const_cast<bool*>(is_block_step.data<bool>());
  v.t.batch_drop = batch_drop.data<bool>();
  v.t.pre_ids = pre_ids.data<int64_t>();
  v.t.pre_cols = pre_ids.shape()[1];
  v.t.accept_tokens = accept_tokens.data<int64_t>();
  v.t.accept_cols = accept_tokens.shape()[1];
  v.t.accept_num = accept_num.data<int32_t>();
  v.t.base_seq_lens_this_time = base_model_seq_lens_this_time.data<int32_t>();
  v.t.base_seq_lens_decoder = base_model_seq_lens_decoder.data<int32_t>();
  v.t.base_step_idx = base_model_step_idx.data<int64_t>();
  v.t.base_stop_flags = base_model_stop_flags.data<bool>();
  v.t.base_is_block_step = base_model_is_block_step.data<bool>();
  v.t.base_draft_tokens = const_cast<int64_t*>(base_model_draft_tokens.data<int64_t>());
  v.t.base_draft_cols = base_model_draft_tokens.shape()[1];
  v.attrs.num_model_step = num_model_step;
  v.attrs.truncate_first_token = truncate_first_token;
  v.attrs.splitwise_prefill = splitwise_prefill;
  v.attrs.kvcache_scheduler_v1 = kvcache_scheduler_v1;
  return v;
}
using rollback::update_attn_mask_offsets_checks;
using rollback::update_attn_mask_offsets_views;
using rollback::update_attn_mask_offsets_shape;
using rollback::update_attn_mask_offsets_dtype;

}  // namespace pr5245

namespace pr5738 {
using recompute::draft_model_preprocess_checks;
using recompute::draft_model_preprocess_views;
using rollback::update_attn_mask_offsets_checks;
using rollback::update_attn_mask_offsets_views;
using rollback::update_attn_mask_offsets_shape;
using rollback::update_attn_mask_offsets_dtype;

}  // namespace pr5738

namespace pr6403 {
using recompute::draft_model_preprocess_checks;
using recompute::draft_model_preprocess_views;
using rollback::update_attn_mask_offsets_checks;
using rollback::update_attn_mask_offsets_views;
using rollback::update_attn_mask_offsets_shape;
using rollback::update_attn_mask_offsets_dtype;

}  // namespace pr6403

namespace xpu {

// draft_model_preprocess, the xpu form's (MTP_XPU_DRAFT_MODEL_PREPROCESS_...).
// The boundary checks, in the table's order; throws the first refusal.
inline void draft_model_preprocess_checks(ArgChecker& c, const paddle::Tensor& draft_tokens,
    const paddle::Tensor& input_ids, const paddle::Tensor& stop_flags,
    const paddle::Tensor& seq_lens_this_time, const paddle::Tensor& seq_lens_encoder,
    const paddle::Tensor& seq_lens_decoder, const paddle::Tensor& step_idx,
    const paddle::Tensor& not_need_stop, const paddle::Tensor& is_block_step,
    const paddle::Tensor& batch_drop, const paddle::Tensor& pre_ids,
    const paddle::Tensor& mask_rollback, const paddle::Tensor& recompute_token_num,
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
    const paddle::Tensor& base_model_seq_lens_this_time,
    const paddle::Tensor& base_model_seq_lens_encoder,
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx,
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step,
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool, bool, bool) {
  MTP_CHECK(num_model_step >= 1, "draft_model_preprocess", ": num_model_step must be >= 1, got ", num_model_step);
  const int64_t bsz = c.length_only(seq_lens_this_time, "seq_lens_this_time");
  c.vector(seq_lens_this_time, "seq_lens_this_time", paddle::DataType::INT32, bsz, Access::kWritten);
  c.matrix(draft_tokens, "draft_tokens", paddle::DataType::INT64, bsz, Access::kWritten);
  c.matrix(input_ids, "input_ids", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(stop_flags, "stop_flags", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.vector(seq_lens_encoder, "seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(seq_lens_decoder, "seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(step_idx, "step_idx", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(is_block_step, "is_block_step", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.vector(batch_drop, "batch_drop", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.matrix(pre_ids, "pre_ids", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(mask_rollback, "mask_rollback", paddle::DataType::INT32, bsz, Access::kUnread);
  c.vector(recompute_token_num, "recompute_token_num", paddle::DataType::INT32, bsz, Access::kUnread);
  c.matrix(accept_tokens, "accept_tokens", paddle::DataType::INT64, bsz, Access::kRead);
  c.vector(accept_num, "accept_num", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(base_model_seq_lens_this_time, "base_model_seq_lens_this_time", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(base_model_seq_lens_encoder, "base_model_seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kUnread);
  c.vector(base_model_seq_lens_decoder, "base_model_seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(base_model_step_idx, "base_model_step_idx", paddle::DataType::INT64, bsz, Access::kRead);
  c.vector(base_model_stop_flags, "base_model_stop_flags", paddle::DataType::BOOL, bsz, Access::kRead);
  c.vector(base_model_is_block_step, "base_model_is_block_step", paddle::DataType::BOOL, bsz, Access::kRead);
  c.matrix(base_model_draft_tokens, "base_model_draft_tokens", paddle::DataType::INT64, bsz, Access::kWritten);
  c.host_or_device_flag(not_need_stop, "not_need_stop");
  c.no_overlap();
}
// The checked tensors and attributes as the rules and the dispatch take them.
inline OpViews<PreprocessTensors, PreprocessAttrs> draft_model_preprocess_views(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop,
    const paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids,
    const paddle::Tensor&, const paddle::Tensor&, const paddle::Tensor& accept_tokens,
    const paddle::Tensor& accept_num, const paddle::Tensor& base_model_seq_lens_this_time,
    const paddle::Tensor&, const paddle::Tensor& base_model_seq_lens_decoder,
    const paddle::Tensor& base_model_step_idx, const paddle::Tensor& base_model_stop_flags,
    const paddle::Tensor& base_model_is_block_step, const paddle::Tensor& base_model_draft_tokens,
    int num_model_step, bool truncate_first_token, bool splitwise_prefill,
    bool kvcache_scheduler_v1) {
  OpViews<PreprocessTensors, PreprocessAttrs> v;
  v.bsz = seq_lens_this_time.shape()[0];
  v.device_tensor = &seq_lens_this_time;
  v.flag = &not_need_stop;
  v.t.draft_tokens = draft_tokens.data<int64_t>();
  v.t.draft_cols = draft_tokens.shape()[1];
  v.t.input_ids = input_ids.data<int64_t>();
  v.t.input_cols = input_ids.shape()[1];
  v.t.stop_flags = stop_flags.data<bool>();
  v.t.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  v.t.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  v.t.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  v.t.step_idx = step_idx.data<int64_t>();
  v.t.is_block_step = const_cast<bool*>(is_block_step.data<bool>());
  v.t.batch_drop = batch_drop.data<bool>();
  v.t.pre_ids = pre_ids.data<int64_t>();
  v.t.pre_cols = pre_ids.shape()[1];
  v.t.accept_tokens = accept_tokens.data<int64_t>();
  v.t.accept_cols = accept_tokens.shape()[1];
  v.t.accept_num = accept_num.data<int32_t>();
  v.t.base_seq_lens_this_time = base_model_seq_lens_this_time.data<int32_t>();
  v.t.base_seq_lens_decoder = base_model_seq_lens_decoder.data<int32_t>();
  v.t.base_step_idx = base_model_step_idx.data<int64_t>();
  v.t.base_stop_flags = base_model_stop_flags.data<bool>();
  v.t.base_is_block_step = base_model_is_block_step.data<bool>();
  v.t.base_draft_tokens = const_cast<int64_t*>(base_model_draft_tokens.data<int64_t>());
  v.t.base_draft_cols = base_model_draft_tokens.shape()[1];
  v.attrs.num_model_step = num_model_step;
  v.attrs.truncate_first_token = truncate_first_token;
  v.attrs.splitwise_prefill = splitwise_prefill;
  v.attrs.kvcache_scheduler_v1 = kvcache_scheduler_v1;
  return v;
}
using rollback::update_attn_mask_offsets_checks;
using rollback::update_attn_mask_offsets_views;
using rollback::update_attn_mask_offsets_shape;
using rollback::update_attn_mask_offsets_dtype;

}  // namespace xpu

namespace shadow {

// draft_model_preprocess, the shadow form's (MTP_SHADOW_DRAFT_MODEL_PREPROCESS_...).
// The boundary checks, in the table's order; throws the first refusal.
inline void draft_model_preprocess_checks(ArgChecker& c, const paddle::Tensor& draft_tokens,
    const paddle::Tensor& input_ids, const paddle::Tensor& stop_flags,
    const paddle::Tensor& seq_lens_this_time, const paddle::Tensor& seq_lens_encoder,
    const paddle::Tensor& seq_lens_decoder, const paddle::Tensor& step_idx,
    const paddle::Tensor& not_need_stop, const paddle::Tensor& pre_ids,
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
    const paddle::Tensor& target_model_seq_lens_encoder,
    const paddle::Tensor& target_model_seq_lens_decoder,
    const paddle::Tensor& target_model_step_idx, const paddle::Tensor& target_model_stop_flags,
    const paddle::Tensor& max_dec_len, const paddle::Tensor& target_model_draft_tokens,
    int num_model_step, bool) {
  MTP_CHECK(num_model_step >= 1, "draft_model_preprocess", ": num_model_step must be >= 1, got ", num_model_step);
  const int64_t bsz = c.length_only(seq_lens_this_time, "seq_lens_this_time");
  c.vector(seq_lens_this_time, "seq_lens_this_time", paddle::DataType::INT32, bsz, Access::kWritten);
  c.matrix(draft_tokens, "draft_tokens", paddle::DataType::INT64, bsz, Access::kWritten);
  c.matrix(input_ids, "input_ids", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(stop_flags, "stop_flags", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.vector(seq_lens_encoder, "seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(seq_lens_decoder, "seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(step_idx, "step_idx", paddle::DataType::INT64, bsz, Access::kWritten);
  c.matrix(pre_ids, "pre_ids", paddle::DataType::INT64, bsz, Access::kWritten);
  c.matrix(accept_tokens, "accept_tokens", paddle::DataType::INT64, bsz, Access::kRead);
  c.vector(accept_num, "accept_num", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(target_model_seq_lens_encoder, "target_model_seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kUnread);
  c.vector(target_model_seq_lens_decoder, "target_model_seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(target_model_step_idx, "target_model_step_idx", paddle::DataType::INT64, bsz, Access::kRead);
  c.vector(target_model_stop_flags, "target_model_stop_flags", paddle::DataType::BOOL, bsz, Access::kRead);
  c.vector(max_dec_len, "max_dec_len", paddle::DataType::INT64, bsz, Access::kRead);
  c.matrix(target_model_draft_tokens, "target_model_draft_tokens", paddle::DataType::INT64, bsz, Access::kWritten);
  c.host_or_device_flag(not_need_stop, "not_need_stop");
  c.no_overlap();
}
// The checked tensors and attributes as the rules and the dispatch take them.
inline OpViews<PreprocessTensors, PreprocessAttrs> draft_model_preprocess_views(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop,
    paddle::Tensor& pre_ids, const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
    const paddle::Tensor&, const paddle::Tensor& target_model_seq_lens_decoder,
    const paddle::Tensor& target_model_step_idx, const paddle::Tensor& target_model_stop_flags,
    const paddle::Tensor& max_dec_len, const paddle::Tensor& target_model_draft_tokens,
    int num_model_step, bool is_splitwise_prefill) {
  OpViews<PreprocessTensors, PreprocessAttrs> v;
  v.bsz = seq_lens_this_time.shape()[0];
  v.device_tensor = &seq_lens_this_time;
  v.flag = &not_need_stop;
  v.t.draft_tokens = draft_tokens.data<int64_t>();
  v.t.draft_cols = draft_tokens.shape()[1];
  v.t.input_ids = input_ids.data<int64_t>();
  v.t.input_cols = input_ids.shape()[1];
  v.t.stop_flags = stop_flags.data<bool>();
  v.t.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  v.t.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  v.t.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  v.t.step_idx = step_idx.data<int64_t>();
  v.t.pre_ids = pre_ids.data<int64_t>();
  v.t.pre_cols = pre_ids.shape()[1];
  v.t.accept_tokens = accept_tokens.data<int64_t>();
  v.t.accept_cols = accept_tokens.shape()[1];
  v.t.accept_num = accept_num.data<int32_t>();
  v.t.base_seq_lens_decoder = target_model_seq_lens_decoder.data<int32_t>();
  v.t.base_step_idx = target_model_step_idx.data<int64_t>();
  v.t.base_stop_flags = target_model_stop_flags.data<bool>();
  v.t.max_dec_len = max_dec_len.data<int64_t>();
  v.t.base_draft_tokens = const_cast<int64_t*>(target_model_draft_tokens.data<int64_t>());
  v.t.base_draft_cols = target_model_draft_tokens.shape()[1];
  v.attrs.num_model_step = num_model_step;
  v.attrs.splitwise_prefill = is_splitwise_prefill;
  v.attrs.truncate_first_token = true;
  v.attrs.kvcache_scheduler_v1 = false;
  return v;
}

// update_attn_mask_offsets, the shadow form's (MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_...).
// The boundary checks, in the table's order; throws the first refusal.
inline void update_attn_mask_offsets_checks(ArgChecker& c, const paddle::Tensor& ids_remove_padding,
    const paddle::Tensor& seq_lens_this_time, const paddle::Tensor& seq_lens_encoder,
    const paddle::Tensor& seq_lens_decoder, const paddle::Tensor& cu_seqlens_q,
    const paddle::Tensor& attn_mask_offsets_full, const paddle::Tensor& is_block_step,
    const paddle::Tensor& decode_states) {
  c.length_only(ids_remove_padding, "ids_remove_padding");
  const int64_t bsz = c.length_only(seq_lens_this_time, "seq_lens_this_time");
  c.vector(seq_lens_this_time, "seq_lens_this_time", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(seq_lens_encoder, "seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(seq_lens_decoder, "seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kRead);
  c.flat(cu_seqlens_q, "cu_seqlens_q", paddle::DataType::INT32, bsz, Access::kRead);
  c.matrix(attn_mask_offsets_full, "attn_mask_offsets_full", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(is_block_step, "is_block_step", paddle::DataType::BOOL, bsz, Access::kRead);
  c.matrix(decode_states, "decode_states", paddle::DataType::INT32, bsz, Access::kWritten, 1);
  c.no_overlap();
}
// The checked tensors and attributes as the rules and the dispatch take them.
inline OpViews<MaskTensors> update_attn_mask_offsets_views(const paddle::Tensor& ids_remove_padding,
    const paddle::Tensor& seq_lens_this_time, const paddle::Tensor& seq_lens_encoder,
    const paddle::Tensor& seq_lens_decoder, const paddle::Tensor& cu_seqlens_q,
    const paddle::Tensor& attn_mask_offsets_full, const paddle::Tensor& is_block_step,
    paddle::Tensor& decode_states) {
  OpViews<MaskTensors> v;
  v.bsz = seq_lens_this_time.shape()[0];
  v.device_tensor = &seq_lens_this_time;
  v.t.num_tokens = ids_remove_padding.shape()[0];
  v.t.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  v.t.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  v.t.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  v.t.cu_seqlens_q = cu_seqlens_q.data<int32_t>();
  v.t.cu_entries = cu_seqlens_q.numel();
  v.t.mask_full = attn_mask_offsets_full.data<int32_t>();
  v.t.mask_full_cols = attn_mask_offsets_full.shape()[1];
  v.t.is_block_step = is_block_step.data<bool>();
  v.t.decode_states = decode_states.data<int32_t>();
  v.t.decode_states_cols = decode_states.shape()[1];
  return v;
}
// The fresh outputs' shapes (-1 where unknown), for Paddle's graph.
inline std::vector<std::vector<int64_t>> update_attn_mask_offsets_shape(
    const std::vector<int64_t>& ids_remove_padding, const std::vector<int64_t>&,
    const std::vector<int64_t>&, const std::vector<int64_t>&, const std::vector<int64_t>&,
    const std::vector<int64_t>&, const std::vector<int64_t>&, const std::vector<int64_t>&) {
  const int64_t attn_mask_offsets_rows = ids_remove_padding.empty() ? -1 : ids_remove_padding[0];
  return {{attn_mask_offsets_rows < 0 ? -1 : 2 * attn_mask_offsets_rows}};
}
// The fresh outputs' dtypes.
inline std::vector<paddle::DataType> update_attn_mask_offsets_dtype(const paddle::DataType&,
    const paddle::DataType&, const paddle::DataType&, const paddle::DataType&,
    const paddle::DataType&, const paddle::DataType&, const paddle::DataType&,
    const paddle::DataType&) {
  return {paddle::DataType::INT32};
}

}  // namespace shadow

namespace corrected_pr5245 {

// draft_model_preprocess, the corrected_pr5245 form's (MTP_CORRECTED_PR5245_DRAFT_MODEL_PREPROCESS_...).
// The boundary checks, in the table's order; throws the first refusal.
inline void draft_model_preprocess_checks(ArgChecker& c, const paddle::Tensor& draft_tokens,
    const paddle::Tensor& input_ids, const paddle::Tensor& stop_flags,
    const paddle::Tensor& seq_lens_this_time, const paddle::Tensor& seq_lens_encoder,
    const paddle::Tensor& seq_lens_decoder, const paddle::Tensor& step_idx,
    const paddle::Tensor& not_need_stop, const paddle::Tensor& is_block_step,
    const paddle::Tensor& batch_drop, const paddle::Tensor& pre_ids,
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
    const paddle::Tensor& base_model_seq_lens_this_time,
    const paddle::Tensor& base_model_seq_lens_encoder,
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx,
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step,
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool, bool, bool) {
  MTP_CHECK(num_model_step >= 1, "draft_model_preprocess", ": num_model_step must be >= 1, got ", num_model_step);
  const int64_t bsz = c.length_only(seq_lens_this_time, "seq_lens_this_time");
  c.vector(seq_lens_this_time, "seq_lens_this_time", paddle::DataType::INT32, bsz, Access::kWritten);
  c.matrix(draft_tokens, "draft_tokens", paddle::DataType::INT64, bsz, Access::kWritten);
  c.matrix(input_ids, "input_ids", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(stop_flags, "stop_flags", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.vector(seq_lens_encoder, "seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(seq_lens_decoder, "seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(step_idx, "step_idx", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(is_block_step, "is_block_step", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.vector(batch_drop, "batch_drop", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.matrix(pre_ids, "pre_ids", paddle::DataType::INT64, bsz, Access::kWritten);
  c.matrix(accept_tokens, "accept_tokens", paddle::DataType::INT64, bsz, Access::kRead);
  c.vector(accept_num, "accept_num", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(base_model_seq_lens_this_time, "base_model_seq_lens_this_time", paddle::DataType::INT32, bsz, Access::kUnread);
  c.vector(base_model_seq_lens_encoder, "base_model_seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kUnread);
  c.vector(base_model_seq_lens_decoder, "base_model_seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(base_model_step_idx, "base_model_step_idx", paddle::DataType::INT64, bsz, Access::kRead);
  c.vector(base_model_stop_flags, "base_model_stop_flags", paddle::DataType::BOOL, bsz, Access::kRead);
  c.vector(base_model_is_block_step, "base_model_is_block_step", paddle::DataType::BOOL, bsz, Access::kRead);
  c.matrix(base_model_draft_tokens, "base_model_draft_tokens", paddle::DataType::INT64, bsz, Access::kWritten);
  c.host_or_device_flag(not_need_stop, "not_need_stop");
  c.no_overlap();
}
// The checked tensors and attributes as the rules and the dispatch take them.
inline OpViews<PreprocessTensors, PreprocessAttrs> draft_model_preprocess_views(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop,
    const paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids,
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num, const paddle::Tensor&,
    const paddle::Tensor&, const paddle::Tensor& base_model_seq_lens_decoder,
    const paddle::Tensor& base_model_step_idx, const paddle::Tensor& base_model_stop_flags,
    const paddle::Tensor& base_model_is_block_step, const paddle::Tensor& base_model_draft_tokens,
    int num_model_step, bool truncate_first_token, bool splitwise_prefill,
    bool kvcache_scheduler_v1) {
  OpViews<PreprocessTensors, PreprocessAttrs> v;
  v.bsz = seq_lens_this_time.shape()[0];
  v.device_tensor = &seq_lens_this_time;
  v.flag = &not_need_stop;
  v.t.draft_tokens = draft_tokens.data<int64_t>();
  v.t.draft_cols = draft_tokens.shape()[1];
  v.t.input_ids = input_ids.data<int64_t>();
  v.t.input_cols = input_ids.shape()[1];
  v.t.stop_flags = stop_flags.data<bool>();
  v.t.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  v.t.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  v.t.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  v.t.step_idx = step_idx.data<int64_t>();
  v.t.is_block_step = const_cast<bool*>(is_block_step.data<bool>());
  v.t.batch_drop = batch_drop.data<bool>();
  v.t.pre_ids = pre_ids.data<int64_t>();
  v.t.pre_cols = pre_ids.shape()[1];
  v.t.accept_tokens = accept_tokens.data<int64_t>();
  v.t.accept_cols = accept_tokens.shape()[1];
  v.t.accept_num = accept_num.data<int32_t>();
  v.t.base_seq_lens_decoder = base_model_seq_lens_decoder.data<int32_t>();
  v.t.base_step_idx = base_model_step_idx.data<int64_t>();
  v.t.base_stop_flags = base_model_stop_flags.data<bool>();
  v.t.base_is_block_step = base_model_is_block_step.data<bool>();
  v.t.base_draft_tokens = const_cast<int64_t*>(base_model_draft_tokens.data<int64_t>());
  v.t.base_draft_cols = base_model_draft_tokens.shape()[1];
  v.attrs.num_model_step = num_model_step;
  v.attrs.truncate_first_token = truncate_first_token;
  v.attrs.splitwise_prefill = splitwise_prefill;
  v.attrs.kvcache_scheduler_v1 = kvcache_scheduler_v1;
  return v;
}
using rollback::update_attn_mask_offsets_checks;
using rollback::update_attn_mask_offsets_views;
using rollback::update_attn_mask_offsets_shape;
using rollback::update_attn_mask_offsets_dtype;

}  // namespace corrected_pr5245

namespace corrected_pr5738 {

// draft_model_preprocess, the corrected_pr5738 form's (MTP_CORRECTED_PR5738_DRAFT_MODEL_PREPROCESS_...).
// The boundary checks, in the table's order; throws the first refusal.
inline void draft_model_preprocess_checks(ArgChecker& c, const paddle::Tensor& draft_tokens,
    const paddle::Tensor& input_ids, const paddle::Tensor& stop_flags,
    const paddle::Tensor& seq_lens_this_time, const paddle::Tensor& seq_lens_encoder,
    const paddle::Tensor& seq_lens_decoder, const paddle::Tensor& step_idx,
    const paddle::Tensor& not_need_stop, const paddle::Tensor& is_block_step,
    const paddle::Tensor& batch_drop, const paddle::Tensor& pre_ids,
    const paddle::Tensor& mask_rollback, const paddle::Tensor& recompute_token_num,
    const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
    const paddle::Tensor& base_model_seq_lens_this_time,
    const paddle::Tensor& base_model_seq_lens_encoder,
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx,
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step,
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool, bool, bool) {
  MTP_CHECK(num_model_step >= 1, "draft_model_preprocess", ": num_model_step must be >= 1, got ", num_model_step);
  const int64_t bsz = c.length_only(seq_lens_this_time, "seq_lens_this_time");
  c.vector(seq_lens_this_time, "seq_lens_this_time", paddle::DataType::INT32, bsz, Access::kWritten);
  c.matrix(draft_tokens, "draft_tokens", paddle::DataType::INT64, bsz, Access::kWritten);
  c.matrix(input_ids, "input_ids", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(stop_flags, "stop_flags", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.vector(seq_lens_encoder, "seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(seq_lens_decoder, "seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(step_idx, "step_idx", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(is_block_step, "is_block_step", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.vector(batch_drop, "batch_drop", paddle::DataType::BOOL, bsz, Access::kWritten);
  c.matrix(pre_ids, "pre_ids", paddle::DataType::INT64, bsz, Access::kWritten);
  c.vector(mask_rollback, "mask_rollback", paddle::DataType::INT32, bsz, Access::kWritten);
  c.vector(recompute_token_num, "recompute_token_num", paddle::DataType::INT32, bsz, Access::kUnread);
  c.matrix(accept_tokens, "accept_tokens", paddle::DataType::INT64, bsz, Access::kRead);
  c.vector(accept_num, "accept_num", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(base_model_seq_lens_this_time, "base_model_seq_lens_this_time", paddle::DataType::INT32, bsz, Access::kUnread);
  c.vector(base_model_seq_lens_encoder, "base_model_seq_lens_encoder", paddle::DataType::INT32, bsz, Access::kUnread);
  c.vector(base_model_seq_lens_decoder, "base_model_seq_lens_decoder", paddle::DataType::INT32, bsz, Access::kRead);
  c.vector(base_model_step_idx, "base_model_step_idx", paddle::DataType::INT64, bsz, Access::kRead);
  c.vector(base_model_stop_flags, "base_model_stop_flags", paddle::DataType::BOOL, bsz, Access::kRead);
  c.vector(base_model_is_block_step, "base_model_is_block_step", paddle::DataType::BOOL, bsz, Access::kRead);
  c.matrix(base_model_draft_tokens, "base_model_draft_tokens", paddle::DataType::INT64, bsz, Access::kWritten);
  c.host_or_device_flag(not_need_stop, "not_need_stop");
  c.no_overlap();
}
// The checked tensors and attributes as the rules and the dispatch take them.
inline OpViews<PreprocessTensors, PreprocessAttrs> draft_model_preprocess_views(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop,
    const paddle::Tensor& is_block_step, paddle::Tensor& batch_drop, paddle::Tensor& pre_ids,
    const paddle::Tensor& mask_rollback, const paddle::Tensor&, const paddle::Tensor& accept_tokens,
    const paddle::Tensor& accept_num, const paddle::Tensor&, const paddle::Tensor&,
    const paddle::Tensor& base_model_seq_lens_decoder, const paddle::Tensor& base_model_step_idx,
    const paddle::Tensor& base_model_stop_flags, const paddle::Tensor& base_model_is_block_step,
    const paddle::Tensor& base_model_draft_tokens, int num_model_step, bool truncate_first_token,
    bool splitwise_prefill, bool kvcache_scheduler_v1) {
  OpViews<PreprocessTensors, PreprocessAttrs> v;
  v.bsz = seq_lens_this_time.shape()[0];
  v.device_tensor = &seq_lens_this_time;
  v.flag = &not_need_stop;
  v.t.draft_tokens = draft_tokens.data<int64_t>();
  v.t.draft_cols = draft_tokens.shape()[1];
  v.t.input_ids = input_ids.data<int64_t>();
  v.t.input_cols = input_ids.shape()[1];
  v.t.stop_flags = stop_flags.data<bool>();
  v.t.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  v.t.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  v.t.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  v.t.step_idx = step_idx.data<int64_t>();
  v.t.is_block_step = const_cast<bool*>(is_block_step.data<bool>());
  v.t.batch_drop = batch_drop.data<bool>();
  v.t.pre_ids = pre_ids.data<int64_t>();
  v.t.pre_cols = pre_ids.shape()[1];
  v.t.mask_rollback = const_cast<int32_t*>(mask_rollback.data<int32_t>());
  v.t.accept_tokens = accept_tokens.data<int64_t>();
  v.t.accept_cols = accept_tokens.shape()[1];
  v.t.accept_num = accept_num.data<int32_t>();
  v.t.base_seq_lens_decoder = base_model_seq_lens_decoder.data<int32_t>();
  v.t.base_step_idx = base_model_step_idx.data<int64_t>();
  v.t.base_stop_flags = base_model_stop_flags.data<bool>();
  v.t.base_is_block_step = base_model_is_block_step.data<bool>();
  v.t.base_draft_tokens = const_cast<int64_t*>(base_model_draft_tokens.data<int64_t>());
  v.t.base_draft_cols = base_model_draft_tokens.shape()[1];
  v.attrs.num_model_step = num_model_step;
  v.attrs.truncate_first_token = truncate_first_token;
  v.attrs.splitwise_prefill = splitwise_prefill;
  v.attrs.kvcache_scheduler_v1 = kvcache_scheduler_v1;
  return v;
}
using rollback::update_attn_mask_offsets_checks;
using rollback::update_attn_mask_offsets_views;
using rollback::update_attn_mask_offsets_shape;
using rollback::update_attn_mask_offsets_dtype;

}  // namespace corrected_pr5738

namespace corrected_pr6403 {
using corrected_pr5738::draft_model_preprocess_checks;
using corrected_pr5738::draft_model_preprocess_views;
using rollback::update_attn_mask_offsets_checks;
using rollback::update_attn_mask_offsets_views;
using rollback::update_attn_mask_offsets_shape;
using rollback::update_attn_mask_offsets_dtype;

}  // namespace corrected_pr6403

}  // namespace mtp
