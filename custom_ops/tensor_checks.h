// The static half of the boundary checks (presence, dtypes, ranks, rows,
// devices, memory overlap), done once on tensor metadata before any kernel
// runs. The per-request half is check_preprocess / check_mask in
// mtp_bookkeeping.h. What Paddle hides from C++ (a non-contiguous view, which
// reaches us as a copy; stop_gradient) is checked by the Python wrappers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "raise.h"
#include "paddle/extension.h"

namespace mtp {

inline std::string place_name(const paddle::Place& p) {
  if (p.GetType() == phi::AllocationType::CPU) return "cpu";
  if (p.GetType() == phi::AllocationType::GPU) return "gpu:" + std::to_string(p.GetDeviceId());
  return "another kind of device";
}

inline const char* dtype_name(paddle::DataType d) {
  switch (d) {
    case paddle::DataType::BOOL: return "bool";
    case paddle::DataType::INT8: return "int8";
    case paddle::DataType::UINT8: return "uint8";
    case paddle::DataType::INT16: return "int16";
    case paddle::DataType::INT32: return "int32";
    case paddle::DataType::INT64: return "int64";
    case paddle::DataType::FLOAT16: return "float16";
    case paddle::DataType::BFLOAT16: return "bfloat16";
    case paddle::DataType::FLOAT32: return "float32";
    case paddle::DataType::FLOAT64: return "float64";
    default: return "another dtype";
  }
}

inline int64_t dtype_bytes(paddle::DataType d) {
  switch (d) {
    case paddle::DataType::BOOL: case paddle::DataType::INT8: case paddle::DataType::UINT8:
      return 1;
    case paddle::DataType::INT16: case paddle::DataType::FLOAT16: case paddle::DataType::BFLOAT16:
      return 2;
    case paddle::DataType::INT32: case paddle::DataType::FLOAT32: return 4;
    default: return 8;
  }
}

// How the op uses a tensor argument, for the overlap check. kUnread: shape
// checked, memory never touched (so it may alias anything).
enum class Access { kRead, kWritten, kUnread };

inline std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

// Checks one tensor argument of op `op` and remembers the device they share.
class ArgChecker {
 public:
  explicit ArgChecker(const char* op) : op_(op) {}

  // A per-request vector: [rows] or [rows, 1], rows >= min_rows.
  void vector(const paddle::Tensor& t, const char* name, paddle::DataType dtype,
              int64_t min_rows, Access access = Access::kRead) {
    common(t, name, dtype);
    const std::vector<int64_t> s = t.shape();  // a fresh vector per call: ask once
    MTP_CHECK(s.size() == 1 || (s.size() == 2 && s[1] == 1), op_, ": ", name,
             " must have shape [N] or [N, 1], got ", shape_str(s));
    rows(s, name, min_rows);
    remember(t, name, access);
  }

  // A per-request matrix [rows, cols], rows >= min_rows, cols >= min_cols.
  // Returns the number of columns.
  int64_t matrix(const paddle::Tensor& t, const char* name, paddle::DataType dtype,
                 int64_t min_rows, Access access = Access::kRead, int64_t min_cols = 0) {
    common(t, name, dtype);
    const std::vector<int64_t> s = t.shape();
    MTP_CHECK(s.size() == 2, op_, ": ", name, " must have shape [N, columns], got ",
             shape_str(s));
    rows(s, name, min_rows);
    MTP_CHECK(s[1] >= min_cols, op_, ": ", name, " must have at least ", min_cols,
             " columns, got shape ", shape_str(s));
    remember(t, name, access);
    return s[1];
  }

  // A flat buffer of at least min_numel elements, of any rank >= 1.
  void flat(const paddle::Tensor& t, const char* name, paddle::DataType dtype,
            int64_t min_numel, Access access = Access::kRead) {
    common(t, name, dtype);
    MTP_CHECK(t.shape().size() >= 1 && t.numel() >= min_numel, op_, ": ", name,
             " must have at least ", min_numel, " elements, got shape ", shape_str(t.shape()));
    remember(t, name, access);
  }

  // A tensor read only for its length: any dtype, rank >= 1. Returns shape[0].
  // Its memory is never read, so it may alias anything.
  int64_t length_only(const paddle::Tensor& t, const char* name) {
    present(t, name);
    same_device(t, name);
    const std::vector<int64_t> s = t.shape();
    MTP_CHECK(s.size() >= 1, op_, ": ", name, " must have rank >= 1, got shape ", shape_str(s));
    return s[0];
  }

  // not_need_stop: bool, at least one element; on the shared device or on the
  // CPU (then the op returns only after the flag is on the host). Written.
  void host_or_device_flag(const paddle::Tensor& t, const char* name) {
    present(t, name);
    MTP_CHECK(t.dtype() == paddle::DataType::BOOL, op_, ": ", name, " must be bool, got ",
             dtype_name(t.dtype()));
    MTP_CHECK(t.numel() >= 1, op_, ": ", name, " must have at least 1 element, got shape ",
             shape_str(t.shape()));
    MTP_CHECK(t.initialized(), op_, ": ", name, " is not initialized");
    MTP_CHECK(t.is_cpu() || t.place() == place_, op_, ": ", name, " must be on the CPU or on ",
             place_name(place_), ", got ", place_name(t.place()));
    remember(t, name, Access::kWritten);
  }

  // Refuses a written tensor whose memory overlaps any other argument that the
  // op reads or writes. Apply passes read what earlier writes changed, so an
  // overlap would give results no separate copies give (or writes outside a
  // row). Arguments never read (length_only, Access::kUnread) are exempt.
  void no_overlap() const {
    for (int a = 0; a < count_; ++a) {
      for (int b = a + 1; b < count_; ++b) {
        const Span& x = spans_[a];
        const Span& y = spans_[b];
        if (!(x.written || y.written) || x.cpu != y.cpu) continue;
        MTP_CHECK(x.end <= y.begin || y.end <= x.begin, op_, ": ", x.name, " and ", y.name,
                  " share memory, and the op writes ", x.written ? x.name : y.name,
                  ": pass tensors that do not overlap");
      }
    }
  }

  // Where the tensors checked so far live.
  const paddle::Place& place() const { return place_; }
  const char* op() const { return op_; }

 private:
  struct Span {
    const char* name;
    uintptr_t begin, end;
    bool written, cpu;
  };
  static constexpr int kMaxSpans = 24;

  void present(const paddle::Tensor& t, const char* name) {
    // An argument passed as None arrives as a tensor with no implementation.
    MTP_CHECK(t.defined(), op_, ": ", name, " is missing (None): pass a tensor");
  }

  void common(const paddle::Tensor& t, const char* name, paddle::DataType dtype) {
    present(t, name);
    MTP_CHECK(t.initialized() || t.numel() == 0, op_, ": ", name, " is not initialized");
    MTP_CHECK(t.dtype() == dtype, op_, ": ", name, " must be ", dtype_name(dtype), ", got ",
             dtype_name(t.dtype()));
    same_device(t, name);
  }

  void remember(const paddle::Tensor& t, const char* name, Access access) {
    const int64_t n = t.numel();
#if !defined(FASTDEPLOY_MTP_PADDLE_MAJOR) || FASTDEPLOY_MTP_PADDLE_MAJOR < 3
    // Paddle 2 takes an in-place output with no elements for one that was
    // never given memory, and raises only after the op has run and written
    // the others: refuse it while nothing has changed. (_build.py defines
    // FASTDEPLOY_MTP_PADDLE_MAJOR; Paddle 3 takes such an output.)
    MTP_CHECK(n > 0 || access != Access::kWritten, op_, ": ", name,
              " is written in place but has no elements (shape ", shape_str(t.shape()),
              "): Paddle 2 refuses an empty in-place output after the op has run; give it "
              "a row and a column, or use Paddle 3");
#endif
    if (n == 0 || access == Access::kUnread) return;
    MTP_CHECK(count_ < kMaxSpans, op_, ": more tensor arguments than the overlap check holds");
    const uintptr_t begin = reinterpret_cast<uintptr_t>(t.data());
    spans_[count_++] = Span{name, begin, begin + (uintptr_t)(n * dtype_bytes(t.dtype())),
                            access == Access::kWritten, t.is_cpu()};
  }

  void same_device(const paddle::Tensor& t, const char* name) {
    if (!have_place_) {
      place_ = t.place();
      have_place_ = true;
      MTP_CHECK(t.is_cpu() || t.is_gpu(), op_, ": ", name, " must be on the CPU or a GPU");
      return;
    }
    MTP_CHECK(t.place() == place_, op_, ": all tensors must be on one device: ", name,
             " is on ", place_name(t.place()), ", the others on ", place_name(place_));
  }

  void rows(const std::vector<int64_t>& shape, const char* name, int64_t min_rows) {
    MTP_CHECK(shape[0] >= min_rows, op_, ": ", name, " has ", shape[0],
             " rows, fewer than the batch size ", min_rows, " (seq_lens_this_time)");
  }

  const char* op_;
  paddle::Place place_;
  bool have_place_ = false;
  Span spans_[kMaxSpans];
  int count_ = 0;
};

}  // namespace mtp
