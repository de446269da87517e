// Raising an op's error with a message built without iostreams.
//
// Paddle's PD_CHECK(cond, parts...) streams each part through an inline
// std::ostringstream. With paddlepaddle-gpu 2.6.2 and a newer g++, streaming a
// number from our library crashed inside libstdc++'s locale code, so numbers
// are formatted with std::to_string and the message reaches PD_THROW as one
// string. Paddle turns only its own exception type
// into a Python exception, hence PD_THROW rather than a std::exception.
#pragma once

#include <string>
#include <type_traits>

#include "paddle/extension.h"

namespace mtp {

inline std::string piece(const std::string& s) { return s; }
inline std::string piece(const char* s) { return s; }
template <typename T>
std::string piece(T v) {
  static_assert(std::is_arithmetic<T>::value, "message pieces are strings or numbers");
  return std::to_string(v);
}

template <typename... Parts>
std::string join(const Parts&... parts) {
  std::string s;
  ((s += piece(parts)), ...);
  return s;
}

template <typename... Parts>
[[noreturn]] void raise(const Parts&... parts) {
  PD_THROW(join(parts...));
}

}  // namespace mtp

#define MTP_CHECK(cond, ...)                   \
  do {                                         \
    if (!(cond)) ::mtp::raise(__VA_ARGS__);    \
  } while (0)
