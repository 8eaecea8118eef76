#include "oal/analysis/gaussian_control.h"

#include <cmath>
#include <numbers>

#include "oal/analysis/bootstrap.h"
#include "oal/analysis/contribution.h"
#include "oal/core/error.h"

namespace oal::analysis {

uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  SplitMix64 a(seed ^ (stream * 0xD1B54A32D192ED03ull));
  return a.next();
}

at::Tensor standard_normal(const std::vector<int64_t>& shape, uint64_t seed) {
  at::Tensor out = at::empty(shape, at::kDouble);
  double* p = out.data_ptr<double>();
  const int64_t n = out.numel();
  SplitMix64 rng(seed);
  for (int64_t i = 0; i < n; i += 2) {
    // Box–Muller on (0, 1] × [0, 1): 1 - u avoids log(0).
    const double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    p[i] = radius * std::cos(2.0 * std::numbers::pi * u2);
    if (i + 1 < n) p[i + 1] = radius * std::sin(2.0 * std::numbers::pi * u2);
  }
  return out;
}

at::Tensor gaussian_control_magnitudes(const std::vector<int64_t>& prompt_lengths, int64_t q_heads,
                                       int64_t kv_heads, int64_t head_dim, uint64_t seed,
                                       at::Tensor* chi) {
  check(!prompt_lengths.empty(), "gaussian control", "expected at least one prompt");
  at::Tensor mag_sum = at::zeros({q_heads, head_dim}, at::kDouble);
  at::Tensor chi_sum = at::zeros({q_heads, head_dim}, at::kDouble);
  for (size_t p = 0; p < prompt_lengths.size(); ++p) {
    const int64_t t = prompt_lengths[p];
    check(t >= 1, "gaussian control", "prompt {} has length {}; expected >= 1", p, t);
    const uint64_t s = mix_seed(seed, p);
    at::Tensor q = standard_normal({1, q_heads, t, head_dim}, mix_seed(s, 0));
    at::Tensor k = standard_normal({1, kv_heads, t, head_dim}, mix_seed(s, 1));
    mag_sum += contribution_magnitudes(q, k)[0];
    if (chi) chi_sum += contribution_scores(q, k)[0];
  }
  const auto n = static_cast<double>(prompt_lengths.size());
  if (chi) *chi = chi_sum / n;
  return mag_sum / n;
}

}  // namespace oal::analysis
