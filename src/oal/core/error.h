#pragma once
// Errors: every failure is an oal::Error whose message starts with the operation
// name in brackets and says what was expected, e.g.
//   [safetensors] tensor 'model.norm.weight': expected 896 floats, file has 448
// Library code throws; only the CLI prints.
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace oal {

class Error : public std::runtime_error {
 public:
  Error(std::string_view op, const std::string& what)
      : std::runtime_error(fmt::format("[{}] {}", op, what)) {}
};

// Throws Error(op, formatted message) when `cond` is false.
template <typename... Args>
inline void check(bool cond, std::string_view op, fmt::format_string<Args...> f,
                  Args&&... args) {
  if (!cond) throw Error(op, fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] inline void fail(std::string_view op, fmt::format_string<Args...> f,
                              Args&&... args) {
  throw Error(op, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace oal
