#include "oal/simd/oal_plan.h"

#include <cmath>

#include "oal/core/error.h"

namespace oal::simd {

void oal_monomials(const float* x, int64_t d, float* out) {
  out[0] = 1.0f;
  for (int64_t r = 0; r < d; ++r) out[1 + r] = x[r];
  float* o = out + 1 + d;
  for (int64_t r = 0; r < d; ++r) {
    const float xr = x[r];
    for (int64_t t = r; t < d; ++t) *o++ = xr * x[t];
  }
}

void oal_query_features(const float* x, int64_t d, const float* coef, float* out) {
  out[0] = coef[0];
  for (int64_t r = 0; r < d; ++r) out[1 + r] = coef[1 + r] * x[r];
  float* o = out + 1 + d;
  const float* c = coef + 1 + d;
  for (int64_t r = 0; r < d; ++r) {
    const float xr = x[r];
    const int64_t n = d - r;
    for (int64_t t = 0; t < n; ++t) o[t] = c[t] * (xr * x[r + t]);
    o += n;
    c += n;
  }
}

OalPlan OalPlan::build(const at::Tensor& group_of, const at::Tensor& L, double eps) {
  constexpr const char* op = "oal_plan";
  check(group_of.dim() == 2, op, "group_of: expected [Hq, d], got {} dims", group_of.dim());
  check(L.dim() == 3 && L.size(1) == L.size(2) && L.size(1) >= 2, op,
        "L: expected [Hq, G+1, G+1] with G >= 1, got {} dims", L.dim());
  check(L.size(0) == group_of.size(0), op, "L has {} heads, group_of {}", L.size(0),
        group_of.size(0));
  check(at::isFloatingType(L.scalar_type()), op, "L: expected a floating dtype");
  check(!at::isFloatingType(group_of.scalar_type()) && group_of.scalar_type() != at::kBool, op,
        "group_of: expected an integer dtype");
  check(std::isfinite(eps) && eps > 0, op, "eps: expected finite and > 0, got {}", eps);
  OalPlan p;
  p.q_heads = group_of.size(0);
  p.dim = group_of.size(1);
  p.max_groups = L.size(1) - 1;
  p.eps = static_cast<float>(eps);
  check(p.dim >= 1, op, "d: expected >= 1");
  const int64_t H = p.q_heads, d = p.dim, G = p.max_groups, Df = p.feature_dim();
  const at::Tensor g64 = group_of.detach().to(at::kCPU, at::kLong).contiguous();
  const at::Tensor l64 = L.detach().to(at::kCPU, at::kDouble).tril().contiguous();
  check(at::isfinite(l64).all().item<bool>(), op, "L: expected finite entries");
  const int64_t* gp = g64.data_ptr<int64_t>();
  for (int64_t i = 0; i < H * d; ++i)
    check(gp[i] >= 0 && gp[i] < G, op, "group_of[{}][{}] = {}: expected 0..{}", i / d, i % d,
          gp[i], G - 1);
  const at::Tensor M = at::matmul(l64, l64.transpose(1, 2)).contiguous();
  const double* Mp = M.data_ptr<double>();
  const double* Lp = l64.data_ptr<double>();
  const double sd = std::sqrt(static_cast<double>(d));
  p.coef.resize(H * Df);
  p.lower.resize(H * (G + 1) * (G + 1));
  p.perm.resize(H * d);
  p.group_end.resize(H * G);
  for (int64_t h = 0; h < H; ++h) {
    const double* Mh = Mp + h * (G + 1) * (G + 1);
    auto m = [&](int64_t i, int64_t j) { return Mh[i * (G + 1) + j]; };
    const int64_t* g = gp + h * d;
    float* c = p.coef.data() + h * Df;
    c[0] = static_cast<float>(eps + m(0, 0));
    for (int64_t r = 0; r < d; ++r) c[1 + r] = static_cast<float>(2.0 * m(0, g[r] + 1) / sd);
    int64_t f = 1 + d;
    for (int64_t r = 0; r < d; ++r)
      for (int64_t t = r; t < d; ++t)
        c[f++] = static_cast<float>((r == t ? 1.0 : 2.0) * m(g[r] + 1, g[t] + 1) / d);
    for (int64_t i = 0; i < (G + 1) * (G + 1); ++i)
      p.lower[h * (G + 1) * (G + 1) + i] = static_cast<float>(Lp[h * (G + 1) * (G + 1) + i]);
    int64_t pos = 0;
    for (int64_t gi = 0; gi < G; ++gi) {
      for (int64_t r = 0; r < d; ++r)
        if (g[r] == gi) p.perm[h * d + pos++] = r;
      p.group_end[h * G + gi] = pos;
    }
  }
  return p;
}

}  // namespace oal::simd
