#include "oal/attention/state_snapshot.h"

#include <algorithm>

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::attn {

void StateSnapshot::add(std::string name, const at::Tensor& t) {
  tensors.emplace_back(std::move(name), t.detach().to(at::kCPU).contiguous().clone());
}

const at::Tensor* StateSnapshot::find(std::string_view op, std::string_view name, int64_t dims,
                                      bool required) const {
  for (const auto& entry : tensors) {
    if (entry.first != name) continue;
    check(entry.second.defined() && entry.second.dim() == dims, op,
          "restore: tensor '{}' must have {} dimensions, got {}", name, dims,
          entry.second.defined() ? shape_str(entry.second) : std::string("none"));
    return &entry.second;
  }
  check(!required, op, "restore: the snapshot has no tensor '{}'", name);
  return nullptr;
}

void check_restorable(std::string_view op, const StateSnapshot& s, int64_t tokens_now,
                      const std::vector<std::string_view>& names) {
  check(tokens_now == 0, op, "restore: the state already holds {} tokens; restore into a fresh one",
        tokens_now);
  check(s.tokens >= 0, op, "restore: token count {} is negative", s.tokens);
  for (const auto& entry : s.tensors) {
    if (std::find(names.begin(), names.end(), entry.first) != names.end()) continue;
    std::string known;
    for (auto n : names) known += (known.empty() ? "" : ", ") + std::string(n);
    fail(op, "restore: unexpected tensor '{}' (this state holds {})", entry.first, known);
  }
  check(s.tokens == 0 || !s.tensors.empty(), op,
        "restore: {} tokens but no tensors", s.tokens);
}

}  // namespace oal::attn
