// The ops' launches with kernels that only agree (agreement_floor.cu): what
// the launch shapes alone cost a captured step, before any request is read.
// For the graph table of bench-gpu and the graph probe (not the product).
#pragma once

#include <cuda_runtime.h>

#include "../mtp_kernels.h"

namespace mtp {

// As launch_preprocess would launch for `bsz` requests. The leader writes the
// verdict to `sink` (device memory).
cudaError_t launch_preprocess_agreement(int64_t bsz, unsigned* sink, GridScratch scratch,
                                        cudaStream_t stream,
                                        const LaunchShape& shape = LaunchShape{});

// As launch_mask would launch for `bsz` requests of `num_tokens` tokens,
// attn_mask_offsets_full having `mask_full_cols` columns.
cudaError_t launch_mask_agreement(int64_t num_tokens, int64_t mask_full_cols, int64_t bsz,
                                  unsigned* sink, GridScratch scratch, cudaStream_t stream,
                                  const LaunchShape& shape = LaunchShape{});

// The ops' own kernels with the agreement across blocks taken out (each
// block writes on its own verdict), launched with the ops' blocks and threads
// as plain grids: what a step would cost if agreeing were free. Unsafe
// (agreement_floor.cu says why): a floor for the graph probe's "free"
// variants, never an op. The rollback form's rules.
cudaError_t launch_preprocess_free(const PreprocessTensors& t, const PreprocessAttrs& a,
                                   int64_t bsz, bool* not_need_stop, Reporting out,
                                   GridScratch scratch, cudaStream_t stream,
                                   const LaunchShape& shape = LaunchShape{});
cudaError_t launch_mask_free(const MaskTensors& t, int64_t bsz, Reporting out,
                             GridScratch scratch, cudaStream_t stream,
                             const LaunchShape& shape = LaunchShape{});

}  // namespace mtp
