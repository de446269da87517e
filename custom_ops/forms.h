// Generated from fastdeploy_mtp/signature.py: do not edit; run
// `python -m fastdeploy_mtp signature --write` after changing the table.
// The forms of the table (fastdeploy_mtp.signature.FORMS) as the C++ side
// names them: mtp::Form, a template parameter of the rules and the kernels;
// MTP_FOR_EACH_FORM(X) and MTP_FOR_EACH_MASK_FORM(X), X(Form::k...) for every
// form and for every form with a mask kernel of its own (for explicit
// instantiations); kForms, how many; mask_form(f), the mask kernel a form's
// mask op runs.
#pragma once

#include <cstdint>

namespace mtp {

enum class Form : int32_t {
  kRollback = 0,
  kRecompute = 1,
  kPr5738 = 2,
  kShadow = 3,
};
constexpr int kForms = 4;

#define MTP_FOR_EACH_FORM(X) \
  X(Form::kRollback) X(Form::kRecompute) X(Form::kPr5738) X(Form::kShadow)
#define MTP_FOR_EACH_MASK_FORM(X) \
  X(Form::kRollback) X(Form::kShadow)

constexpr Form mask_form(Form f) {
  if (f == Form::kRecompute) return Form::kRollback;
  if (f == Form::kPr5738) return Form::kRollback;
  return f;
}

}  // namespace mtp
