// The windowed decode step's exact part (simd/window_exact.h, window_exact_step_f32) on
// every SIMD target against a plain fp64 loop over the formula written here:
//   s_j = q·k_j/√d, m = max s_j, a = Σ e^(s_j − m) v_j, z = Σ e^(s_j − m),
//   y = (e^(m − c) a + n) / (e^(m − c) z + r)   (n, r: the kernel's sums, if any),
// across value widths that do and do not fill a vector and GQA groups wider than one
// register pass. (The ring's rotation is the decode state's business: its tests are in
// tests/attention/test_windowed.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "oal/core/error.h"
#include "oal/simd/isa.h"
#include "oal/simd/window_exact.h"
#include "random_data.h"

namespace simd = oal::simd;

namespace {

struct StepCase {
  int64_t batch, q_heads, kv_heads, d, dv, sinks, ring;
  bool with_sums;
};

// Row r of unit u in a [units, stride, width] block.
const float* row(const std::vector<float>& x, int64_t u, int64_t stride, int64_t r, int64_t width) {
  return x.data() + (u * stride + r) * width;
}

// The formula above in fp64, per (batch, query head), over every sink and ring row.
std::vector<double> reference(const StepCase& c, const std::vector<float>& q,
                              const std::vector<float>& sk, const std::vector<float>& sv,
                              const std::vector<float>& rk, const std::vector<float>& rv,
                              const std::vector<float>& sums, const std::vector<float>& log_scale) {
  const int64_t G = c.q_heads / c.kv_heads;
  std::vector<double> y(c.batch * c.q_heads * c.dv);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.q_heads; ++h) {
      const int64_t u = b * c.kv_heads + h / G, qi = b * c.q_heads + h;
      std::vector<std::pair<const float*, const float*>> kv;
      for (int64_t j = 0; j < c.sinks; ++j)
        kv.push_back({row(sk, u, c.sinks, j, c.d), row(sv, u, c.sinks, j, c.dv)});
      for (int64_t j = 0; j < c.ring; ++j)
        kv.push_back({row(rk, u, c.ring, j, c.d), row(rv, u, c.ring, j, c.dv)});
      std::vector<double> s;
      double m = -1e300;
      for (auto [k, v] : kv) {
        double dot = 0;
        for (int64_t i = 0; i < c.d; ++i) dot += double(q[qi * c.d + i]) * k[i];
        s.push_back(dot / std::sqrt(double(c.d)));
        m = std::max(m, s.back());
      }
      const double e = std::exp(m - log_scale[h]);
      std::vector<double> num(c.dv, 0.0);
      double den = 0;
      for (size_t j = 0; j < kv.size(); ++j) {
        const double p = std::exp(s[j] - m);
        den += e * p;
        for (int64_t i = 0; i < c.dv; ++i) num[i] += e * p * kv[j].second[i];
      }
      if (c.with_sums) {
        for (int64_t i = 0; i < c.dv; ++i) num[i] += sums[qi * (c.dv + 1) + i];
        den += sums[qi * (c.dv + 1) + c.dv];
      }
      for (int64_t i = 0; i < c.dv; ++i) y[qi * c.dv + i] = num[i] / den;
    }
  return y;
}

TEST(WindowExactStep, MatchesTheFormulaOnEveryTarget) {
  // d 8/64, Dv 5 (a partial vector), 20, 72 (past four AVX2 vectors: two column passes),
  // groups 1/3/7 (7: two passes of four heads on AVX-512, four of two on AVX2), no sinks,
  // and a one-row ring.
  const std::vector<StepCase> cases = {
      {1, 3, 3, 64, 64, 4, 37, true}, {2, 6, 2, 8, 5, 1, 9, true}, {1, 7, 1, 16, 72, 0, 13, true},
      {1, 14, 2, 64, 64, 4, 256, true}, {2, 3, 1, 8, 20, 2, 1, false}};
  for (simd::SimdTarget t : simd::available_targets()) {
    simd::ScopedTarget forced(t);
    unsigned seed = 1;
    for (const StepCase& c : cases) {
      const int64_t units = c.batch * c.kv_heads;
      const auto q = oal::test::uniform(c.batch * c.q_heads * c.d, seed++);
      const auto sk = oal::test::uniform(units * c.sinks * c.d, seed++);
      const auto sv = oal::test::uniform(units * c.sinks * c.dv, seed++);
      const auto rk = oal::test::uniform(units * c.ring * c.d, seed++);
      const auto rv = oal::test::uniform(units * c.ring * c.dv, seed++);
      auto sums = oal::test::uniform(c.batch * c.q_heads * (c.dv + 1), seed++);
      for (size_t i = c.dv; i < sums.size(); i += c.dv + 1) sums[i] = std::abs(sums[i]) + 0.5f;
      const auto log_scale = oal::test::uniform(c.q_heads, seed++);
      std::vector<float> y(c.batch * c.q_heads * c.dv, -7.0f);
      simd::window_exact_step_f32({c.batch, c.q_heads, c.kv_heads, c.d, c.dv, 1, 500, 4, c.ring},
                                  q.data(), {sk.data(), sv.data(), c.sinks, c.sinks, 0},
                                  {rk.data(), rv.data(), c.ring, c.ring, 500 - c.ring + 1},
                                  c.with_sums ? sums.data() : nullptr, log_scale.data(), y.data());
      const std::vector<double> ref = reference(c, q, sk, sv, rk, rv, sums, log_scale);
      // fp32 scores, exponentials (<= 1.2 ulp) and sums of up to 260 terms of mixed sign:
      // ~1e-6 relative rounding per term; 1e-5 of the largest output bounds it with margin.
      double worst = 0, scale = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        worst = std::max(worst, std::abs(y[i] - ref[i]));
        scale = std::max(scale, std::abs(ref[i]));
      }
      EXPECT_LT(worst, 1e-5 * scale)
          << simd::target_name(t) << " Hq/Hkv " << c.q_heads << "/" << c.kv_heads << " d "
          << c.d << " Dv " << c.dv << " S " << c.sinks << " ring " << c.ring;
    }
  }
}

TEST(WindowExactStep, RefusesInconsistentSizes) {
  const std::vector<float> x(64, 0.5f);
  std::vector<float> y(8);
  auto call = [&](simd::WindowExactDims dims, int64_t ring_rows) {
    simd::window_exact_step_f32(dims, x.data(), {x.data(), x.data(), 0, 0, 0},
                                {x.data(), x.data(), ring_rows, ring_rows, 0}, nullptr, x.data(),
                                y.data());
  };
  for (auto [dims, rows, what] :
       std::vector<std::tuple<simd::WindowExactDims, int64_t, std::string>>{
           {{1, 1, 1, 4, 4, 2, 0, 0, 4}, 2, "two queries"},
           {{1, 3, 2, 4, 4, 1, 0, 0, 4}, 2, "Hq not a multiple of Hkv"},
           {{1, 1, 1, 4, 4, 1, 0, 0, 4}, 5, "more ring rows than the window"}}) {
    try {
      call(dims, rows);
      ADD_FAILURE() << "accepted " << what;
    } catch (const oal::Error& e) {
      EXPECT_NE(std::string(e.what()).find("window_exact_kernel"), std::string::npos) << e.what();
    }
  }
  // No sinks, no ring and no kernel part: a query with no weight at all.
  try {
    call({1, 1, 1, 4, 4, 1, 0, 0, 4}, 0);
    ADD_FAILURE() << "accepted a query with no weight";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("neither exact keys nor kernel weight"), std::string::npos)
        << e.what();
  }
}

}  // namespace
