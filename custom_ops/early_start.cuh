// Work a kernel does before it waits for the kernel before it: the
// programmatic dependent launch's wait and go-ahead, and a request's row
// addresses computed ahead of the wait. Part of mtp_kernels.cu (included
// there only).
#pragma once

#include <cstdint>

#include "mtp_kernels.h"

namespace mtp {
namespace {

// Programmatic dependent launch. The wait returns once the kernels this one
// depends on have finished and their writes are visible; without such a
// dependency it returns at once. Every kernel here waits before its first
// memory access, so an early launch never reads or writes ahead of the
// previous kernel, ours or not. Letting the next kernel launch early only
// lets it reach its own wait sooner.
//
// Both exist from sm_90 on. Code compiled for an older arch has neither, so
// it must never be launched early: the launcher makes programmatic launches
// only where the kernel image that runs on the device was compiled for sm_90
// or later (launch_plan.cuh, CudaDevice), not merely where the device has
// them (a build of older PTX runs JIT-compiled on an sm_90 device).
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
// request i is in the batch, else nothing is touched); a tensor form F does
// not have stays null.
template <Form F>
__device__ PreprocessTensors rows_now(PreprocessTensors t, int64_t i, bool exists) {
  t.draft_tokens = row_now(t.draft_tokens, i, t.draft_cols, exists);
  t.input_ids = row_now(t.input_ids, i, t.input_cols, exists);
  t.stop_flags = row_now(t.stop_flags, i, 1, exists);
  t.seq_lens_this_time = row_now(t.seq_lens_this_time, i, 1, exists);
  t.seq_lens_encoder = row_now(t.seq_lens_encoder, i, 1, exists);
  t.seq_lens_decoder = row_now(t.seq_lens_decoder, i, 1, exists);
  t.step_idx = row_now(t.step_idx, i, 1, exists);
  t.pre_ids = row_now(t.pre_ids, i, t.pre_cols, exists);
  t.accept_tokens = row_now(t.accept_tokens, i, t.accept_cols, exists);
  t.accept_num = row_now(t.accept_num, i, 1, exists);
  t.base_seq_lens_decoder = row_now(t.base_seq_lens_decoder, i, 1, exists);
  t.base_step_idx = row_now(t.base_step_idx, i, 1, exists);
  t.base_stop_flags = row_now(t.base_stop_flags, i, 1, exists);
  t.base_draft_tokens = row_now(t.base_draft_tokens, i, t.base_draft_cols, exists);
  if constexpr (F == Form::kShadow) {
    t.max_dec_len = row_now(t.max_dec_len, i, 1, exists);
  } else {
    t.is_block_step = row_now(t.is_block_step, i, 1, exists);
    t.batch_drop = row_now(t.batch_drop, i, 1, exists);
    t.base_is_block_step = row_now(t.base_is_block_step, i, 1, exists);
  }
  if constexpr (form_has_mask_rollback(F)) {
    t.mask_rollback = row_now(t.mask_rollback, i, 1, exists);
  }
  return t;
}
template <Form F>
__device__ MaskTensors rows_now(MaskTensors t, int64_t i, bool exists) {
  t.seq_lens_this_time = row_now(t.seq_lens_this_time, i, 1, exists);
  t.seq_lens_encoder = row_now(t.seq_lens_encoder, i, 1, exists);
  t.seq_lens_decoder = row_now(t.seq_lens_decoder, i, 1, exists);
  t.cu_seqlens_q = row_now(t.cu_seqlens_q, i, 1, exists);
  t.mask_full = row_now(t.mask_full, i, t.mask_full_cols, exists);
  t.is_block_step = row_now(t.is_block_step, i, 1, exists);
  t.decode_states = row_now(t.decode_states, i, t.decode_states_cols, exists);
  if constexpr (F != Form::kShadow) {
    t.mask_decoder = row_now(t.mask_decoder, i, 1, exists);
    t.mask_rollback = row_now(t.mask_rollback, i, 1, exists);
  }
  return t;
}

}  // namespace
}  // namespace mtp
