#include "oal/analysis/activation_profile.h"

#include <algorithm>

#include "oal/analysis/profile_stats.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::analysis {

void ActivationMax::update(const at::Tensor& x) {
  check_dim(x, 3, "activation profile", "residual stream");
  check_finite(x, "activation profile", "residual stream");
  at::Tensor m = x.detach().abs().amax({0, 1}).to(at::kDouble).contiguous();
  const double* p = m.data_ptr<double>();
  if (max_abs_.empty()) {
    max_abs_.assign(p, p + m.numel());
    return;
  }
  check(static_cast<size_t>(m.numel()) == max_abs_.size(), "activation profile",
        "hidden size changed from {} to {}", max_abs_.size(), m.numel());
  for (size_t i = 0; i < max_abs_.size(); ++i) max_abs_[i] = std::max(max_abs_[i], p[i]);
}

ActivationSummary summarize_activations(const std::vector<double>& max_abs) {
  check(!max_abs.empty(), "activation profile", "expected at least one hidden dimension");
  ActivationSummary s;
  s.max_abs = max_abs;
  s.top_dims = top_k_dims(max_abs, std::min<int64_t>(3, static_cast<int64_t>(max_abs.size())));
  for (int64_t r : s.top_dims) s.top_values.push_back(max_abs[r]);
  std::vector<double> sorted = max_abs;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  s.median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  return s;
}

}  // namespace oal::analysis
