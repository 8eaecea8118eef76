#include "oal/attention/windowed/window.h"

#include <fmt/format.h>

#include "oal/core/error.h"

namespace oal::attn {

void Window::validate(std::string_view op) const {
  check(sinks >= 0 && recent >= 0 && sinks <= k_max_window && recent <= k_max_window, op,
        "window: expected 0 <= sinks, window <= {}, got sinks {} and window {}", k_max_window,
        sinks, recent);
}

std::string Window::describe() const { return fmt::format("S={},W={}", sinks, recent); }

namespace {

// Causal pairs [P, T] and the exact pairs among them.
std::pair<at::Tensor, at::Tensor> masks(const at::Tensor& qpos, const at::Tensor& kpos,
                                        const Window& w) {
  at::Tensor i = qpos.to(at::kLong).unsqueeze(1), j = kpos.to(at::kLong).unsqueeze(0);
  at::Tensor causal = j <= i;
  at::Tensor exact = causal & ((j < w.sinks) | ((i - j) < w.recent));
  return {causal, exact};
}

}  // namespace

at::Tensor exact_mask(const at::Tensor& qpos, const at::Tensor& kpos, const Window& w) {
  return masks(qpos, kpos, w).second;
}

at::Tensor linear_mask(const at::Tensor& qpos, const at::Tensor& kpos, const Window& w) {
  auto [causal, exact] = masks(qpos, kpos, w);
  return causal & exact.logical_not();
}

}  // namespace oal::attn
