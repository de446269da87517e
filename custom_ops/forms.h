// Generated from fastdeploy_mtp/signature.py: do not edit; run
// `python -m fastdeploy_mtp signature --write` after changing the table.
// The forms of the table (fastdeploy_mtp.signature.FORMS) as the C++ side
// names them: mtp::Form, a template parameter of the rules and the kernels;
// MTP_FOR_EACH_FORM(X), MTP_FOR_EACH_PREPROCESS_FORM(X) and
// MTP_FOR_EACH_MASK_FORM(X), X(Form::k...) for every form, every form with a
// preprocess kernel and every one with a mask kernel of its own (for explicit
// instantiations); kForms, how many;
// preprocess_form(f) and mask_form(f), the kernels a form's ops run.
#pragma once

#include <cstdint>

namespace mtp {

enum class Form : int32_t {
  kRollback = 0,
  kRecompute = 1,
  kPr5245 = 2,
  kPr5738 = 3,
  kPr6403 = 4,
  kXpu = 5,
  kShadow = 6,
  kCorrectedPr5245 = 7,
  kCorrectedPr5738 = 8,
  kCorrectedPr6403 = 9,
};
constexpr int kForms = 10;

#define MTP_FOR_EACH_FORM(X) \
  X(Form::kRollback) X(Form::kRecompute) X(Form::kPr5245) X(Form::kPr5738) X(Form::kPr6403) X(Form::kXpu) X(Form::kShadow) X(Form::kCorrectedPr5245) X(Form::kCorrectedPr5738) X(Form::kCorrectedPr6403)
#define MTP_FOR_EACH_PREPROCESS_FORM(X) \
  X(Form::kRollback) X(Form::kRecompute) X(Form::kPr5245) X(Form::kPr5738) X(Form::kShadow) X(Form::kCorrectedPr5245) X(Form::kCorrectedPr5738)
#define MTP_FOR_EACH_MASK_FORM(X) \
  X(Form::kRollback) X(Form::kPr6403) X(Form::kShadow) X(Form::kCorrectedPr5738) X(Form::kCorrectedPr6403)

constexpr Form preprocess_form(Form f) {
  if (f == Form::kPr6403) return Form::kPr5738;
  if (f == Form::kXpu) return Form::kPr5245;
  if (f == Form::kCorrectedPr6403) return Form::kCorrectedPr5738;
  return f;
}

constexpr Form mask_form(Form f) {
  if (f == Form::kRecompute) return Form::kRollback;
  if (f == Form::kPr5245) return Form::kRollback;
  if (f == Form::kPr5738) return Form::kRollback;
  if (f == Form::kXpu) return Form::kRollback;
  if (f == Form::kCorrectedPr5245) return Form::kCorrectedPr5738;
  return f;
}

}  // namespace mtp
