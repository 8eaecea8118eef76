// The OAL kernel plan (features against the factored kernel written here,
// kappa = eps + ||Lᵀ s̄||², s̄ = [1, s_1..s_G], s_g = sum_{r in g} q_r k_r / sqrt(d)) and
// the kernels' refusal of non-finite results. Agreement of the prefill and decode kernels
// with the references, on every SIMD target, is in tests/attention/test_op_consistency.cpp.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <random>
#include <vector>

#include "oal/core/error.h"
#include "oal/simd/isa.h"
#include "oal/simd/oal_decode.h"
#include "oal/simd/oal_plan.h"
#include "oal/simd/oal_prefill.h"

namespace simd = oal::simd;

namespace {

struct Case {
  simd::AttentionDims dims;
  int64_t groups = 3;
  std::vector<float> q, k, v;
  at::Tensor group_of, L;  // [Hq, d] int64, [Hq, G+1, G+1] fp64 lower
  double eps = 1e-6;
  std::vector<int64_t> gvec;  // plain copies for the reference loops
  std::vector<double> lvec;
  void sync() {
    const at::Tensor g = group_of.contiguous(), l = L.contiguous();
    gvec.assign(g.data_ptr<int64_t>(), g.data_ptr<int64_t>() + g.numel());
    lvec.assign(l.data_ptr<double>(), l.data_ptr<double>() + l.numel());
  }
};

std::vector<float> normal(size_t n, std::mt19937& g, float sd) {
  std::normal_distribution<float> u(0.0f, sd);
  std::vector<float> x(n);
  for (auto& e : x) e = u(g);
  return x;
}

Case make_case(int64_t d, int64_t dv, int64_t ratio, int64_t T, int64_t G, unsigned seed) {
  std::mt19937 g(seed);
  Case c;
  c.dims.batch = 2;
  c.dims.kv_heads = 2;
  c.dims.q_heads = 2 * ratio;
  c.dims.q_len = c.dims.k_len = T;
  c.dims.dim = d;
  c.dims.value_dim = dv;
  c.groups = std::min(G, d);
  // q, k with one outlier-like larger dimension, as the method is meant for.
  c.q = normal(c.dims.batch * c.dims.q_heads * T * d, g, 0.6f);
  c.k = normal(c.dims.batch * c.dims.kv_heads * T * d, g, 0.6f);
  for (size_t i = 0; i < c.q.size(); i += d) c.q[i] *= 3.0f;
  for (size_t i = 0; i < c.k.size(); i += d) c.k[i] *= 3.0f;
  c.v = normal(c.dims.batch * c.dims.kv_heads * T * dv, g, 1.0f);
  const int64_t H = c.dims.q_heads, Gc = c.groups;
  c.group_of = at::empty({H, d}, at::kLong);
  std::uniform_int_distribution<int64_t> pick(0, Gc - 1);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t r = 0; r < d; ++r)  // every group non-empty, the rest random
      c.group_of[h][r] = r < Gc ? (r + h) % Gc : pick(g);
  c.L = at::zeros({H, Gc + 1, Gc + 1}, at::kDouble);
  std::normal_distribution<double> ln(0.0, 0.5);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i <= Gc; ++i)
      for (int64_t j = 0; j <= i; ++j) c.L[h][i][j] = i == j ? 0.5 + std::abs(ln(g)) : ln(g);
  c.sync();
  return c;
}

double kappa(const Case& c, int64_t h, const float* q, const float* k) {
  const int64_t d = c.dims.dim, G = c.groups;
  std::vector<double> sbar(G + 1, 0.0);
  sbar[0] = 1.0;
  for (int64_t r = 0; r < d; ++r)
    sbar[1 + c.gvec[h * d + r]] += double(q[r]) * k[r] / std::sqrt(double(d));
  double w = c.eps;
  for (int64_t a = 0; a <= G; ++a) {
    double t = 0;
    for (int64_t b = a; b <= G; ++b) t += c.lvec[(h * (G + 1) + b) * (G + 1) + a] * sbar[b];
    w += t * t;
  }
  return w;
}

}  // namespace

TEST(OalPlan, ExpandedFeaturesEqualFactoredKernel) {
  const Case c = make_case(16, 8, 2, 4, 4, 11);
  const auto plan = simd::OalPlan::build(c.group_of, c.L, c.eps);
  std::vector<float> fk(plan.feature_dim()), fq(plan.feature_dim());
  for (int64_t h = 0; h < c.dims.q_heads; ++h) {
    const float* q = c.q.data() + h * c.dims.q_len * 16;
    const float* k = c.k.data() + 16;
    simd::oal_monomials(k, 16, fk.data());
    simd::oal_query_features(q, 16, plan.coef_of(h), fq.data());
    double dot = 0, mag = 0;
    for (int64_t f = 0; f < plan.feature_dim(); ++f) {
      dot += double(fq[f]) * fk[f];
      mag += std::abs(double(fq[f]) * fk[f]);
    }
    // fp32 coefficients and features: relative rounding ~1e-7 of the summed magnitudes.
    EXPECT_NEAR(dot, kappa(c, h, q, k), 1e-6 * mag + 1e-9) << "head " << h;
  }
}

TEST(OalPlan, RejectsBadKernels) {
  Case c = make_case(8, 8, 1, 2, 2, 3);
  at::Tensor bad = c.group_of.clone();
  bad[0][0] = 5;
  EXPECT_THROW(simd::OalPlan::build(bad, c.L, c.eps), oal::Error);
  EXPECT_THROW(simd::OalPlan::build(c.group_of, c.L, 0.0), oal::Error);
  EXPECT_THROW(simd::OalPlan::build(c.group_of, c.L.narrow(0, 0, 1), c.eps), oal::Error);
}

TEST(OalDecodeKernel, NonFiniteDenominatorThrows) {
  Case c = make_case(8, 8, 1, 3, 2, 5);
  c.L = c.L * 1e25;  // M = L Lᵀ overflows fp32: the readout must fail, not return NaN
  const auto plan = simd::OalPlan::build(c.group_of, c.L, c.eps);
  const auto& d = c.dims;
  std::vector<float> state(d.batch * d.kv_heads * plan.feature_dim() * 9, 0.0f);
  simd::OalDecodeWorkspace ws(d.batch, d.kv_heads, 1, 8, 8);
  std::vector<float> y(d.batch * d.q_heads * 8);
  EXPECT_THROW(simd::oal_decode_step_f32(plan, d.kv_heads, c.q.data(), c.k.data(), c.v.data(),
                                         y.data(), state.data(), ws),
               oal::Error);
  std::vector<float> yp(d.batch * d.q_heads * d.q_len * 8);
  simd::OalPrefillOptions opt;
  EXPECT_THROW(
      simd::oal_prefill_f32(d, plan, c.q.data(), c.k.data(), c.v.data(), yp.data(), nullptr, opt),
      oal::Error);
}
