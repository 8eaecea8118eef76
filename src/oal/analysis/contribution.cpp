#include "oal/analysis/contribution.h"

#include <cmath>

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::analysis {
namespace {

constexpr const char* k_op = "contribution";

// Validates q [B, Hq, T, D], k [B, Hkv, T, D] and returns the GQA group size Hq / Hkv.
int64_t check_qk(const at::Tensor& q, const at::Tensor& k) {
  check_dim(q, 4, k_op, "q");
  check_dim(k, 4, k_op, "k");
  check_floating(q, k_op, "q");
  check_floating(k, k_op, "k");
  check(q.size(0) == k.size(0) && q.size(2) == k.size(2) && q.size(3) == k.size(3), k_op,
        "q {} and k {}: expected equal batch, length and head dim", shape_str(q), shape_str(k));
  check(q.size(2) >= 1 && q.size(3) >= 1, k_op, "q {}: expected T >= 1 and D >= 1",
        shape_str(q));
  check(k.size(1) >= 1 && q.size(1) % k.size(1) == 0, k_op,
        "q heads {} must be a multiple of k heads {} (GQA)", q.size(1), k.size(1));
  check_finite(q, k_op, "q");
  check_finite(k, k_op, "k");
  return q.size(1) / k.size(1);
}

// Keys of each query head's KV head: [B, Hkv, T, D] → [B, Hq, T, D].
at::Tensor expand_kv(const at::Tensor& k, int64_t group) {
  return group == 1 ? k : k.repeat_interleave(group, 1);
}

// Shared O(N d) core: Σ_i q_i ⊙ (Σ_{j<=i} k_j) / (sqrt(d) |Ω|), fp64.
at::Tensor prefix_sum_scores(const at::Tensor& q, const at::Tensor& k, int64_t group) {
  const int64_t n = q.size(2);
  const double d = static_cast<double>(q.size(3));
  at::Tensor kc = expand_kv(k.to(at::kDouble).cumsum(2), group);
  at::Tensor sum = (q.to(at::kDouble) * kc).sum(2);
  const double pairs = 0.5 * static_cast<double>(n) * static_cast<double>(n + 1);
  return sum / (std::sqrt(d) * pairs);
}

}  // namespace

at::Tensor contribution_scores(const at::Tensor& q, const at::Tensor& k) {
  return prefix_sum_scores(q, k, check_qk(q, k));
}

at::Tensor contribution_magnitudes(const at::Tensor& q, const at::Tensor& k) {
  return prefix_sum_scores(q.abs(), k.abs(), check_qk(q, k));
}

at::Tensor contribution_magnitudes_by_prefix(const at::Tensor& q, const at::Tensor& k) {
  check_qk(q, k);
  return contribution_scores_by_prefix(q.abs(), k.abs());
}

at::Tensor contribution_scores_by_prefix(const at::Tensor& q, const at::Tensor& k) {
  const int64_t group = check_qk(q, k);
  const int64_t n = q.size(2);
  const double d = static_cast<double>(q.size(3));
  at::Tensor kc = expand_kv(k.to(at::kDouble).cumsum(2), group);
  at::Tensor partial = (q.to(at::kDouble) * kc).cumsum(2);  // [B, Hq, T, D]
  at::Tensor len = at::arange(1, n + 1, at::kDouble);
  at::Tensor pairs = (0.5 * len * (len + 1)).view({1, 1, n, 1});
  return partial / (std::sqrt(d) * pairs);
}

at::Tensor contribution_scores_reference(const at::Tensor& q, const at::Tensor& k) {
  const int64_t group = check_qk(q, k);
  at::Tensor qd = q.to(at::kDouble).contiguous(), kd = k.to(at::kDouble).contiguous();
  const int64_t b_n = q.size(0), hq = q.size(1), n = q.size(2), d = q.size(3);
  at::Tensor out = at::zeros({b_n, hq, d}, at::kDouble);
  auto qa = qd.accessor<double, 4>();
  auto ka = kd.accessor<double, 4>();
  auto oa = out.accessor<double, 3>();
  const double pairs = 0.5 * static_cast<double>(n) * static_cast<double>(n + 1);
  const double scale = 1.0 / (std::sqrt(static_cast<double>(d)) * pairs);
  for (int64_t b = 0; b < b_n; ++b)
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t r = 0; r < d; ++r) {
        double acc = 0.0;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j <= i; ++j) acc += qa[b][h][i][r] * ka[b][h / group][j][r];
        oa[b][h][r] = acc * scale;
      }
  return out;
}

at::Tensor average_over_prompts(const at::Tensor& per_prompt) {
  check(per_prompt.defined() && per_prompt.dim() >= 1 && per_prompt.size(0) >= 1, k_op,
        "average over prompts: expected [P, ...] with P >= 1, got {}",
        per_prompt.defined() ? shape_str(per_prompt) : std::string("undefined"));
  return per_prompt.to(at::kDouble).mean(0);
}

}  // namespace oal::analysis
