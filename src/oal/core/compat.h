#pragma once
// The one place where LibTorch version differences live (Debian's 1.13 vs 2.x).
#include <ATen/ATen.h>
#include <torch/version.h>

#include <optional>

namespace oal {

// c10::optional is its own class in 1.13 and an alias of std::optional in 2.x.
template <typename T>
inline std::optional<T> to_std(const c10::optional<T>& o) {
  return o.has_value() ? std::optional<T>(*o) : std::nullopt;
}

// Read-only pointer into a tensor (const_data_ptr exists only from 2.1).
template <typename T>
inline const T* cdata(const at::Tensor& t) {
  return t.data_ptr<T>();
}

inline constexpr bool k_torch_has_sdpa = TORCH_VERSION_MAJOR >= 2;

}  // namespace oal
