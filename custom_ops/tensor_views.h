// What a binding hands its dispatch: the op's checked tensors as raw views for
// the Paddle-free rules (mtp_bookkeeping.h), filled by the <op>_views of the
// generated op_bindings.h from the signature table's names. Shared by the
// bindings and the benchmark ops. Fill after the boundary checks
// (tensor_checks.h): ranks are trusted there.
#pragma once

#include <cstdint>

#include "mtp_bookkeeping.h"
#include "paddle/extension.h"

namespace mtp {

// An op without attributes.
struct NoAttrs {};

template <typename Views, typename Attrs = NoAttrs>
struct OpViews {
  // The rules' views; a field the form has no tensor for stays null (0 for
  // a count), which is how the rules tell the forms apart.
  Views t{};
  Attrs attrs{};
  int64_t bsz = 0;
  // The tensor whose length is the batch size: on the op's device, whose
  // stream the op launches on.
  const paddle::Tensor* device_tensor = nullptr;
  // draft_model_preprocess' not_need_stop, on the host or on the device; the
  // mask op has none.
  paddle::Tensor* flag = nullptr;
};

}  // namespace mtp
