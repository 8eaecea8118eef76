// OAL prefill and decode kernels against a plain fp64 pairwise evaluation written here:
// y_i = sum_{j<=i} kappa(q_i,k_j) v_j / sum_{j<=i} kappa(q_i,k_j),
// kappa = eps + ||Lᵀ s̄||², s̄ = [1, s_1..s_G], s_g = sum_{r in g} q_r k_r / sqrt(d).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <random>
#include <vector>

#include "oal/core/error.h"
#include "oal/kernels/cpu/isa.h"
#include "oal/kernels/cpu/oal_decode.h"
#include "oal/kernels/cpu/oal_plan.h"
#include "oal/kernels/cpu/oal_prefill.h"

namespace kc = oal::kernels::cpu;

namespace {

struct Case {
  kc::AttentionDims dims;
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

std::vector<double> pairwise(const Case& c) {
  const auto& d = c.dims;
  std::vector<double> y(d.batch * d.q_heads * d.q_len * d.value_dim, 0.0);
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.q_heads; ++h) {
      const int64_t u = b * d.kv_heads + h / d.group_size();
      for (int64_t i = 0; i < d.q_len; ++i) {
        const float* qi = c.q.data() + ((b * d.q_heads + h) * d.q_len + i) * d.dim;
        double z = 0;
        double* yi = y.data() + ((b * d.q_heads + h) * d.q_len + i) * d.value_dim;
        for (int64_t j = 0; j <= i; ++j) {
          const double w = kappa(c, h, qi, c.k.data() + (u * d.k_len + j) * d.dim);
          z += w;
          for (int64_t e = 0; e < d.value_dim; ++e)
            yi[e] += w * c.v[(u * d.k_len + j) * d.value_dim + e];
        }
        for (int64_t e = 0; e < d.value_dim; ++e) yi[e] /= z;
      }
    }
  return y;
}

// Outputs are kappa-weighted means of v (|v| <~ 4). The fp32 state sums up to T terms
// phiK(k) v of magnitude <~ 30 and the expanded readout cancels part of them, so the
// absolute output error is ~1e-6 * (sum |phiQ||S|) / (phiQ·S) ~ 1e-5 here; 2e-4 keeps
// margin while a wrong chunk boundary, mask or coefficient gives errors of O(0.1).
constexpr double k_tol = 2e-4;

std::vector<float> run_prefill(const Case& c, int64_t chunk, int64_t segments,
                               float* state = nullptr) {
  const auto plan = kc::OalPlan::build(c.group_of, c.L, c.eps);
  std::vector<float> y(c.dims.batch * c.dims.q_heads * c.dims.q_len * c.dims.value_dim, -9.0f);
  kc::OalPrefillOptions opt;
  opt.chunk = chunk;
  opt.segments = segments;
  kc::oal_prefill_f32(c.dims, plan, c.q.data(), c.k.data(), c.v.data(), y.data(), state, opt);
  return y;
}

void expect_close(const std::vector<float>& y, const std::vector<double>& ref, const char* what,
                  const Case& c, int64_t chunk) {
  ASSERT_EQ(y.size(), ref.size());
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_NEAR(y[i], ref[i], k_tol) << what << " d=" << c.dims.dim << " dv=" << c.dims.value_dim
                                     << " group=" << c.dims.group_size() << " T=" << c.dims.q_len
                                     << " chunk=" << chunk << " index " << i;
}

}  // namespace

TEST(OalPlan, ExpandedFeaturesEqualFactoredKernel) {
  const Case c = make_case(16, 8, 2, 4, 4, 11);
  const auto plan = kc::OalPlan::build(c.group_of, c.L, c.eps);
  std::vector<float> fk(plan.feature_dim()), fq(plan.feature_dim());
  for (int64_t h = 0; h < c.dims.q_heads; ++h) {
    const float* q = c.q.data() + h * c.dims.q_len * 16;
    const float* k = c.k.data() + 16;
    kc::oal_monomials(k, 16, fk.data());
    kc::oal_query_features(q, 16, plan.coef_of(h), fq.data());
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
  EXPECT_THROW(kc::OalPlan::build(bad, c.L, c.eps), oal::Error);
  EXPECT_THROW(kc::OalPlan::build(c.group_of, c.L, 0.0), oal::Error);
  EXPECT_THROW(kc::OalPlan::build(c.group_of, c.L.narrow(0, 0, 1), c.eps), oal::Error);
}

TEST(OalPrefillKernel, LengthsAndChunksAgainstPairwise) {
  for (int64_t T : {1, 2, 63, 64, 65, 257}) {
    const Case c = make_case(16, 8, 2, T, 3, unsigned(T));
    const auto ref = pairwise(c);
    for (int64_t chunk : {16, 64, 100}) {
      expect_close(run_prefill(c, chunk, 1), ref, "prefill", c, chunk);
      if (T > 64) expect_close(run_prefill(c, chunk, 3), ref, "3 segments", c, chunk);
    }
    for (kc::SimdTarget isa : kc::available_targets()) {  // every SIMD target on this CPU
      kc::ScopedTarget guard(isa);
      expect_close(run_prefill(c, 64, 2), ref, kc::target_name(isa).c_str(), c, 64);
    }
  }
}

TEST(OalPrefillKernel, DimsAndGqaAgainstPairwise) {
  for (int64_t d : {8, 16, 64})
    for (int64_t dv : {8, 64})
      for (int64_t ratio : {1, 2, 7}) {
        const Case c = make_case(d, dv, ratio, 65, 5, unsigned(d * 100 + dv + ratio));
        const auto ref = pairwise(c);
        for (kc::SimdTarget isa : kc::available_targets()) {
          kc::ScopedTarget guard(isa);
          expect_close(run_prefill(c, 64, 0), ref, kc::target_name(isa).c_str(), c, 64);
        }
      }
}

TEST(OalPrefillKernel, LongSequence) {
  const Case c = make_case(64, 64, 7, 1000, 5, 1000);
  const auto ref = pairwise(c);
  expect_close(run_prefill(c, 100, 1), ref, "prefill", c, 100);
  expect_close(run_prefill(c, 64, 4), ref, "4 segments", c, 64);
}

TEST(OalPrefillKernel, StateContinuesAcrossCalls) {
  // Prefill of T tokens = prefill of the first part, then of the rest from its state.
  const Case c = make_case(16, 8, 7, 130, 3, 77);
  const auto ref = pairwise(c);
  const int64_t first = 57, df = kc::oal_feature_dim(16);
  const auto& d = c.dims;
  std::vector<float> state(d.batch * d.kv_heads * df * (d.value_dim + 1), 0.0f);
  auto part = [&](int64_t t0, int64_t n) {
    Case p = c;
    p.dims.q_len = p.dims.k_len = n;
    auto slice = [&](const std::vector<float>& x, int64_t heads, int64_t width) {
      std::vector<float> out;
      for (int64_t bh = 0; bh < d.batch * heads; ++bh)
        out.insert(out.end(), x.begin() + (bh * d.q_len + t0) * width,
                   x.begin() + (bh * d.q_len + t0 + n) * width);
      return out;
    };
    p.q = slice(c.q, d.q_heads, d.dim);
    p.k = slice(c.k, d.kv_heads, d.dim);
    p.v = slice(c.v, d.kv_heads, d.value_dim);
    return run_prefill(p, 16, 1, state.data());
  };
  const auto y1 = part(0, first);
  const auto y2 = part(first, d.q_len - first);
  for (int64_t bh = 0; bh < d.batch * d.q_heads; ++bh)
    for (int64_t i = 0; i < d.q_len; ++i)
      for (int64_t e = 0; e < d.value_dim; ++e) {
        const float got = i < first ? y1[(bh * first + i) * d.value_dim + e]
                                    : y2[(bh * (d.q_len - first) + i - first) * d.value_dim + e];
        ASSERT_NEAR(got, ref[(bh * d.q_len + i) * d.value_dim + e], k_tol) << bh << " " << i;
      }
}

TEST(OalDecodeKernel, StepsMatchPrefillOutputsAndState) {
  for (kc::SimdTarget isa : kc::available_targets())
    for (int64_t ratio : {1, 7, 9})  // 9 heads: more than one 7-head register block
      for (int64_t dv : {8, 64, 72}) {
        kc::ScopedTarget guard(isa);
        const Case c = make_case(16, dv, ratio, 40, 3, unsigned(ratio * 10 + dv));
        const auto& d = c.dims;
        const auto plan = kc::OalPlan::build(c.group_of, c.L, c.eps);
        const int64_t df = plan.feature_dim(), sz = d.batch * d.kv_heads * df * (dv + 1);
        std::vector<float> pre_state(sz, 0.0f), dec_state(sz, 0.0f);
        const auto ref = run_prefill(c, 16, 1, pre_state.data());
        kc::OalDecodeWorkspace ws(d.batch, d.kv_heads, d.group_size(), d.dim, dv);
        std::vector<float> qt(d.batch * d.q_heads * d.dim), kt(d.batch * d.kv_heads * d.dim),
            vt(d.batch * d.kv_heads * dv), yt(d.batch * d.q_heads * dv);
        for (int64_t i = 0; i < d.q_len; ++i) {
          for (int64_t bh = 0; bh < d.batch * d.q_heads; ++bh)
            std::copy_n(c.q.begin() + (bh * d.q_len + i) * d.dim, d.dim, qt.begin() + bh * d.dim);
          for (int64_t bu = 0; bu < d.batch * d.kv_heads; ++bu) {
            std::copy_n(c.k.begin() + (bu * d.q_len + i) * d.dim, d.dim, kt.begin() + bu * d.dim);
            std::copy_n(c.v.begin() + (bu * d.q_len + i) * dv, dv, vt.begin() + bu * dv);
          }
          kc::oal_decode_step_f32(plan, d.kv_heads, qt.data(), kt.data(), vt.data(), yt.data(),
                                  dec_state.data(), ws);
          for (int64_t bh = 0; bh < d.batch * d.q_heads; ++bh)
            for (int64_t e = 0; e < dv; ++e)
              // Same fp32 arithmetic in a different order (per token vs per chunk).
              ASSERT_NEAR(yt[bh * dv + e], ref[(bh * d.q_len + i) * dv + e], 1e-4)
                  << kc::target_name(isa) << " ratio " << ratio << " dv " << dv << " t " << i;
        }
        for (int64_t i = 0; i < sz; ++i)
          ASSERT_NEAR(dec_state[i], pre_state[i], 1e-4 * (1 + std::abs(pre_state[i]))) << i;
      }
}

TEST(OalDecodeKernel, NonFiniteDenominatorThrows) {
  Case c = make_case(8, 8, 1, 3, 2, 5);
  c.L = c.L * 1e25;  // M = L Lᵀ overflows fp32: the readout must fail, not return NaN
  const auto plan = kc::OalPlan::build(c.group_of, c.L, c.eps);
  const auto& d = c.dims;
  std::vector<float> state(d.batch * d.kv_heads * plan.feature_dim() * 9, 0.0f);
  kc::OalDecodeWorkspace ws(d.batch, d.kv_heads, 1, 8, 8);
  std::vector<float> y(d.batch * d.q_heads * 8);
  EXPECT_THROW(kc::oal_decode_step_f32(plan, d.kv_heads, c.q.data(), c.k.data(), c.v.data(),
                                       y.data(), state.data(), ws),
               oal::Error);
  std::vector<float> yp(d.batch * d.q_heads * d.q_len * 8);
  kc::OalPrefillOptions opt;
  EXPECT_THROW(kc::oal_prefill_f32(d, plan, c.q.data(), c.k.data(), c.v.data(), yp.data(),
                                   nullptr, opt),
               oal::Error);
}
