#include "oal/attention/windowed/window_mass.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::attn {
namespace {

constexpr int64_t k_row_block = 256;

}  // namespace

at::Tensor mass_beyond_window(const at::Tensor& q, const at::Tensor& k, const Window& w) {
  constexpr std::string_view op = "mass_beyond_window";
  w.validate(op);
  check_dim(q, 4, op, "q [N, Hq, T, D]");
  check_dim(k, 4, op, "k [N, Hkv, T, D]");
  const int64_t N = q.size(0), Hq = q.size(1), T = q.size(2), D = q.size(3), Hkv = k.size(1);
  check(k.size(0) == N && k.size(2) == T && k.size(3) == D && Hkv >= 1 && Hq % Hkv == 0, op,
        "q {} and k {} disagree", shape_str(q), shape_str(k));
  check(T >= 1 && N >= 1, op, "expected at least one sequence and one token, got q {}",
        shape_str(q));
  const at::Tensor kd = k.to(at::kDouble).repeat_interleave(Hq / Hkv, 1);  // [N, Hq, T, D]
  const at::Tensor kpos = at::arange(T, at::kLong);
  at::Tensor total = at::zeros({Hq}, at::kDouble);
  for (int64_t r0 = 0; r0 < T; r0 += k_row_block) {
    const int64_t n = std::min(k_row_block, T - r0);
    const at::Tensor qd = q.narrow(2, r0, n).to(at::kDouble);
    at::Tensor s = at::matmul(qd, kd.transpose(-1, -2)) / std::sqrt(double(D));  // [N, Hq, n, T]
    const at::Tensor qpos = at::arange(r0, r0 + n, at::kLong);
    const at::Tensor causal = kpos.unsqueeze(0) <= qpos.unsqueeze(1);
    s = s.masked_fill(causal.logical_not(), -std::numeric_limits<double>::infinity());
    const at::Tensor p = at::softmax(s, -1);
    const at::Tensor beyond = linear_mask(qpos, kpos, w).to(at::kDouble);  // [n, T]
    total += (p * beyond).sum(-1).sum(at::IntArrayRef{0, 2});
  }
  const at::Tensor mass = total / double(N * T);
  check(at::isfinite(mass).all().item<bool>(), op,
        "the attention mass is not finite (NaN or Inf in q, k)");
  return mass;
}

at::Tensor mass_on_keys(const at::Tensor& q, const at::Tensor& k, const at::Tensor& rows,
                        const at::Tensor& keys, const Window& w) {
  constexpr std::string_view op = "mass_on_keys";
  w.validate(op);
  check_dim(q, 3, op, "q [Hq, T, D]");
  check_dim(k, 3, op, "k [Hkv, T, D]");
  const int64_t Hq = q.size(0), T = q.size(1), D = q.size(2), Hkv = k.size(0);
  check(k.size(1) == T && k.size(2) == D && Hkv >= 1 && Hq % Hkv == 0 && T >= 1, op,
        "q {} and k {} disagree", shape_str(q), shape_str(k));
  check(rows.dim() == 1 && rows.numel() >= 1 && rows.scalar_type() == at::kLong, op,
        "expected rows [R] int64 with R >= 1, got {}", shape_str(rows));
  check(rows.min().item<int64_t>() >= 0 && rows.max().item<int64_t>() < T, op,
        "rows must lie in [0, {}) (the sequence)", T);
  check(keys.dim() == 1 && keys.size(0) == T && keys.scalar_type() == at::kBool, op,
        "expected keys [{}] bool, got {}", T, shape_str(keys));
  const at::Tensor kd = k.to(at::kDouble).repeat_interleave(Hq / Hkv, 0);  // [Hq, T, D]
  const at::Tensor qd = q.index_select(1, rows).to(at::kDouble);           // [Hq, R, D]
  at::Tensor s = at::matmul(qd, kd.transpose(-1, -2)) / std::sqrt(double(D));  // [Hq, R, T]
  const at::Tensor kpos = at::arange(T, at::kLong);
  const at::Tensor causal = kpos.unsqueeze(0) <= rows.unsqueeze(1);  // [R, T]
  s = s.masked_fill(causal.logical_not(), -std::numeric_limits<double>::infinity());
  const at::Tensor p = at::softmax(s, -1);
  const at::Tensor chosen = (linear_mask(rows, kpos, w) & keys.unsqueeze(0)).to(at::kDouble);
  const at::Tensor mass = (p * chosen).sum(-1).mean(-1);  // [Hq]
  check(at::isfinite(mass).all().item<bool>(), op,
        "the attention mass is not finite (NaN or Inf in q, k)");
  return mass;
}

}  // namespace oal::attn
