// update_attn_mask_offsets' fresh output, in one place: the op allocates it,
// and so must the benchmark floors that claim the op's signature.
#pragma once

#include "paddle/extension.h"

namespace mtp {

// int32 [2 * T] on `place`, contents unset. Paddle 2.6 rejects a zero-size
// output as "not initialized" (no memory behind it): with no tokens, allocate
// one element and shrink the shape to 0. (Tensor::reshape only resets the
// shape; phi's DenseTensor header cannot be included in CUDA builds against
// Paddle 2.6's cuDNN wrappers.) Paddle 3 takes a zero-size output as it is,
// and warns that such a reshape is deprecated, so it gets the plain tensor.
// _build.py defines FASTDEPLOY_MTP_PADDLE_MAJOR.
inline paddle::Tensor fresh_mask_output(int64_t T, const paddle::Place& place) {
#if defined(FASTDEPLOY_MTP_PADDLE_MAJOR) && FASTDEPLOY_MTP_PADDLE_MAJOR >= 3
  return paddle::empty({2 * T}, paddle::DataType::INT32, place);
#else
  paddle::Tensor out = paddle::empty({T > 0 ? 2 * T : 1}, paddle::DataType::INT32, place);
  if (T == 0) out.reshape({0});
  return out;
#endif
}

}  // namespace mtp
