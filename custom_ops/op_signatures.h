// Generated from fastdeploy_mtp/signature.py: do not edit; run
// `python -m fastdeploy_mtp signature --write` after changing the table.
// Each op's registered inputs, outputs, attributes and in-place pairs, for
// PD_BUILD_OP(...).Inputs({..._INPUTS}) and the like.
#pragma once

#define MTP_DRAFT_MODEL_PREPROCESS_INPUTS "draft_tokens", "input_ids", "stop_flags", "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "step_idx", "not_need_stop", "is_block_step", "batch_drop", "pre_ids", "mask_rollback", "accept_tokens", "accept_num", "base_model_seq_lens_this_time", "base_model_seq_lens_encoder", "base_model_seq_lens_decoder", "base_model_step_idx", "base_model_stop_flags", "base_model_is_block_step", "base_model_draft_tokens"
#define MTP_DRAFT_MODEL_PREPROCESS_OUTPUTS "draft_tokens_out", "input_ids_out", "stop_flags_out", "seq_lens_this_time_out", "seq_lens_encoder_out", "seq_lens_decoder_out", "step_idx_out", "not_need_stop_out", "is_block_step_out", "batch_drop_out", "pre_ids_out", "mask_rollback_out", "base_model_draft_tokens_out"
#define MTP_DRAFT_MODEL_PREPROCESS_ATTRS "num_model_step: int", "truncate_first_token: bool", "splitwise_prefill: bool", "kvcache_scheduler_v1: bool"
#define MTP_DRAFT_MODEL_PREPROCESS_INPLACE {"draft_tokens", "draft_tokens_out"}, {"input_ids", "input_ids_out"}, {"stop_flags", "stop_flags_out"}, {"seq_lens_this_time", "seq_lens_this_time_out"}, {"seq_lens_encoder", "seq_lens_encoder_out"}, {"seq_lens_decoder", "seq_lens_decoder_out"}, {"step_idx", "step_idx_out"}, {"not_need_stop", "not_need_stop_out"}, {"is_block_step", "is_block_step_out"}, {"batch_drop", "batch_drop_out"}, {"pre_ids", "pre_ids_out"}, {"mask_rollback", "mask_rollback_out"}, {"base_model_draft_tokens", "base_model_draft_tokens_out"}

#define MTP_UPDATE_ATTN_MASK_OFFSETS_INPUTS "ids_remove_padding", "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "cu_seqlens_q", "attn_mask_offsets_full", "attn_mask_offsets_decoder", "is_block_step", "decode_states", "mask_rollback"
#define MTP_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS "attn_mask_offsets", "decode_states_out", "mask_rollback_out", "attn_mask_offsets_decoder_out"
#define MTP_UPDATE_ATTN_MASK_OFFSETS_INPLACE {"attn_mask_offsets_decoder", "attn_mask_offsets_decoder_out"}, {"decode_states", "decode_states_out"}, {"mask_rollback", "mask_rollback_out"}

#define MTP_RAISE_PENDING_ERRORS_INPUTS "x"
#define MTP_RAISE_PENDING_ERRORS_OUTPUTS "x_out"
#define MTP_RAISE_PENDING_ERRORS_INPLACE {"x", "x_out"}

#define MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPUTS "draft_tokens", "input_ids", "stop_flags", "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "step_idx", "not_need_stop", "is_block_step", "batch_drop", "pre_ids", "mask_rollback", "recompute_token_num", "accept_tokens", "accept_num", "base_model_seq_lens_this_time", "base_model_seq_lens_encoder", "base_model_seq_lens_decoder", "base_model_step_idx", "base_model_stop_flags", "base_model_is_block_step", "base_model_draft_tokens"
#define MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_OUTPUTS "draft_tokens_out", "input_ids_out", "stop_flags_out", "seq_lens_this_time_out", "seq_lens_encoder_out", "seq_lens_decoder_out", "step_idx_out", "not_need_stop_out", "batch_drop_out", "pre_ids_out"
#define MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_ATTRS "num_model_step: int", "truncate_first_token: bool", "splitwise_prefill: bool", "kvcache_scheduler_v1: bool"
#define MTP_RECOMPUTE_DRAFT_MODEL_PREPROCESS_INPLACE {"draft_tokens", "draft_tokens_out"}, {"input_ids", "input_ids_out"}, {"stop_flags", "stop_flags_out"}, {"seq_lens_this_time", "seq_lens_this_time_out"}, {"seq_lens_encoder", "seq_lens_encoder_out"}, {"seq_lens_decoder", "seq_lens_decoder_out"}, {"step_idx", "step_idx_out"}, {"not_need_stop", "not_need_stop_out"}, {"batch_drop", "batch_drop_out"}, {"pre_ids", "pre_ids_out"}

#define MTP_PR5245_DRAFT_MODEL_PREPROCESS_INPUTS "draft_tokens", "input_ids", "stop_flags", "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "step_idx", "not_need_stop", "is_block_step", "batch_drop", "pre_ids", "accept_tokens", "accept_num", "base_model_seq_lens_this_time", "base_model_seq_lens_encoder", "base_model_seq_lens_decoder", "base_model_step_idx", "base_model_stop_flags", "base_model_is_block_step", "base_model_draft_tokens"
#define MTP_PR5245_DRAFT_MODEL_PREPROCESS_OUTPUTS "draft_tokens_out", "input_ids_out", "stop_flags_out", "seq_lens_this_time_out", "seq_lens_encoder_out", "seq_lens_decoder_out", "step_idx_out", "not_need_stop_out", "batch_drop_out", "pre_ids_out"
#define MTP_PR5245_DRAFT_MODEL_PREPROCESS_ATTRS "num_model_step: int", "truncate_first_token: bool", "splitwise_prefill: bool", "kvcache_scheduler_v1: bool"
#define MTP_PR5245_DRAFT_MODEL_PREPROCESS_INPLACE {"draft_tokens", "draft_tokens_out"}, {"input_ids", "input_ids_out"}, {"stop_flags", "stop_flags_out"}, {"seq_lens_this_time", "seq_lens_this_time_out"}, {"seq_lens_encoder", "seq_lens_encoder_out"}, {"seq_lens_decoder", "seq_lens_decoder_out"}, {"step_idx", "step_idx_out"}, {"not_need_stop", "not_need_stop_out"}, {"batch_drop", "batch_drop_out"}, {"pre_ids", "pre_ids_out"}

#define MTP_XPU_DRAFT_MODEL_PREPROCESS_INPUTS "draft_tokens", "input_ids", "stop_flags", "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "step_idx", "not_need_stop", "is_block_step", "batch_drop", "pre_ids", "mask_rollback", "recompute_token_num", "accept_tokens", "accept_num", "base_model_seq_lens_this_time", "base_model_seq_lens_encoder", "base_model_seq_lens_decoder", "base_model_step_idx", "base_model_stop_flags", "base_model_is_block_step", "base_model_draft_tokens"
#define MTP_XPU_DRAFT_MODEL_PREPROCESS_OUTPUTS "draft_tokens_out", "input_ids_out", "stop_flags_out", "seq_lens_this_time_out", "seq_lens_encoder_out", "seq_lens_decoder_out", "step_idx_out", "not_need_stop_out", "batch_drop_out", "pre_ids_out"
#define MTP_XPU_DRAFT_MODEL_PREPROCESS_ATTRS "num_model_step: int", "truncate_first_token: bool", "splitwise_prefill: bool", "kvcache_scheduler_v1: bool"
#define MTP_XPU_DRAFT_MODEL_PREPROCESS_INPLACE {"draft_tokens", "draft_tokens_out"}, {"input_ids", "input_ids_out"}, {"stop_flags", "stop_flags_out"}, {"seq_lens_this_time", "seq_lens_this_time_out"}, {"seq_lens_encoder", "seq_lens_encoder_out"}, {"seq_lens_decoder", "seq_lens_decoder_out"}, {"step_idx", "step_idx_out"}, {"not_need_stop", "not_need_stop_out"}, {"batch_drop", "batch_drop_out"}, {"pre_ids", "pre_ids_out"}

#define MTP_SHADOW_DRAFT_MODEL_PREPROCESS_INPUTS "draft_tokens", "input_ids", "stop_flags", "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "step_idx", "not_need_stop", "pre_ids", "accept_tokens", "accept_num", "target_model_seq_lens_encoder", "target_model_seq_lens_decoder", "target_model_step_idx", "target_model_stop_flags", "max_dec_len", "target_model_draft_tokens"
#define MTP_SHADOW_DRAFT_MODEL_PREPROCESS_OUTPUTS "draft_tokens_out", "input_ids_out", "stop_flags_out", "seq_lens_this_time_out", "seq_lens_encoder_out", "seq_lens_decoder_out", "step_idx_out", "not_need_stop_out", "pre_ids_out"
#define MTP_SHADOW_DRAFT_MODEL_PREPROCESS_ATTRS "num_model_step: int", "is_splitwise_prefill: bool"
#define MTP_SHADOW_DRAFT_MODEL_PREPROCESS_INPLACE {"draft_tokens", "draft_tokens_out"}, {"input_ids", "input_ids_out"}, {"stop_flags", "stop_flags_out"}, {"seq_lens_this_time", "seq_lens_this_time_out"}, {"seq_lens_encoder", "seq_lens_encoder_out"}, {"seq_lens_decoder", "seq_lens_decoder_out"}, {"step_idx", "step_idx_out"}, {"not_need_stop", "not_need_stop_out"}, {"pre_ids", "pre_ids_out"}

#define MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_INPUTS "ids_remove_padding", "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "cu_seqlens_q", "attn_mask_offsets_full", "is_block_step", "decode_states"
#define MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_OUTPUTS "attn_mask_offsets", "decode_states_out"
#define MTP_SHADOW_UPDATE_ATTN_MASK_OFFSETS_INPLACE {"decode_states", "decode_states_out"}
