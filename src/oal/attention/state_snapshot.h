#pragma once
// What a DecodeState saves and restores (DecodeState::snapshot / restore): oal serve
// keeps conversations as these and writes them to its state files.
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace oal::attn {

// A decode state's contents: the tokens absorbed and named tensors (CPU, contiguous
// copies). Which names, shapes and dtypes depends on the state's class (a KV cache: "k",
// "v"; the HD state: "S"; a feature-map state: "S", "z", optionally "log_shift"); an empty
// state has no tensors.
struct StateSnapshot {
  int64_t tokens = 0;
  std::vector<std::pair<std::string, at::Tensor>> tensors{};

  // Adds a contiguous CPU copy of `t` under `name`.
  void add(std::string name, const at::Tensor& t);
  // The tensor called `name` with `dims` dimensions, `op` naming the restoring state in
  // the error; nullptr when absent and `required` is false.
  const at::Tensor* find(std::string_view op, std::string_view name, int64_t dims,
                         bool required = true) const;
};

// Checks what every restore() checks first: the state is empty and the snapshot's
// tensor names are all in `names`. Throws oal::Error "[op] restore: ...".
void check_restorable(std::string_view op, const StateSnapshot& s, int64_t tokens_now,
                      const std::vector<std::string_view>& names);

}  // namespace oal::attn
