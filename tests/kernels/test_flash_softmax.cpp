// flash_softmax_f32 against a plain fp64 causal softmax written here.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "oal/kernels/cpu/flash_softmax.h"
#include "oal/kernels/cpu/isa.h"

namespace kc = oal::kernels::cpu;

namespace {

std::vector<float> normal(size_t n, unsigned seed, float sd) {
  std::mt19937 g(seed);
  std::normal_distribution<float> u(0.0f, sd);
  std::vector<float> x(n);
  for (auto& e : x) e = u(g);
  return x;
}

std::vector<double> naive(const kc::AttentionDims& d, const std::vector<float>& q,
                          const std::vector<float>& k, const std::vector<float>& v, double scale) {
  std::vector<double> y(d.batch * d.q_heads * d.q_len * d.value_dim);
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.q_heads; ++h) {
      const int64_t u = b * d.kv_heads + h / d.group_size();
      for (int64_t i = 0; i < d.q_len; ++i) {
        const float* qi = q.data() + ((b * d.q_heads + h) * d.q_len + i) * d.dim;
        const int64_t jmax = i + d.offset();
        std::vector<double> s(jmax + 1);
        double mx = -1e300;
        for (int64_t j = 0; j <= jmax; ++j) {
          double dot = 0;
          for (int64_t r = 0; r < d.dim; ++r) dot += double(qi[r]) * k[(u * d.k_len + j) * d.dim + r];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (auto& e : s) z += (e = std::exp(e - mx));
        double* yi = y.data() + ((b * d.q_heads + h) * d.q_len + i) * d.value_dim;
        for (int64_t j = 0; j <= jmax; ++j)
          for (int64_t c = 0; c < d.value_dim; ++c)
            yi[c] += s[j] / z * v[(u * d.k_len + j) * d.value_dim + c];
      }
    }
  return y;
}

void run_case(kc::SimdTarget isa, int64_t dim, int64_t dv, int64_t ratio, int64_t T, int64_t extra,
              int64_t qb, int64_t kb) {
  kc::ScopedTarget guard(isa);
  kc::AttentionDims d;
  d.batch = 2;
  d.kv_heads = 1;
  d.q_heads = ratio;
  d.q_len = T;
  d.k_len = T + extra;
  d.dim = dim;
  d.value_dim = dv;
  // sd 2 makes scores spread over a few units, so the online max/rescale really matters.
  const auto q = normal(d.batch * d.q_heads * T * dim, 1, 2.0f);
  const auto k = normal(d.batch * d.kv_heads * d.k_len * dim, 2, 2.0f);
  const auto v = normal(d.batch * d.kv_heads * d.k_len * dv, 3, 1.0f);
  std::vector<float> y(d.batch * d.q_heads * T * dv, -7.0f);
  kc::FlashOptions opt;
  opt.q_block = qb;
  opt.k_block = kb;
  const double scale = 1.0 / std::sqrt(double(dim));
  kc::flash_softmax_f32(d, q.data(), k.data(), v.data(), y.data(), float(scale), opt);
  const auto ref = naive(d, q, k, v, scale);
  for (size_t i = 0; i < y.size(); ++i)
    // Outputs are convex combinations of |v| <~ 4; fp32 exp (rel. 2e-7), fp32 scores
    // (|s| ~ 30, abs. error ~ 1e-5 -> weights rel. 1e-5) and sums bound the error near
    // 1e-5 * max|v|; 1e-4 leaves margin, while any masking or indexing bug is O(0.1).
    ASSERT_NEAR(y[i], ref[i], 1e-4) << "isa " << kc::target_name(isa) << " d=" << dim << " dv=" << dv
                                    << " ratio=" << ratio << " T=" << T << " S=" << d.k_len
                                    << " blocks " << qb << "/" << kb << " index " << i;
}

}  // namespace

TEST(FlashSoftmax, MatchesNaiveAcrossShapes) {
  for (kc::SimdTarget isa : kc::available_targets())
    for (int64_t T : {1, 2, 63, 64, 65, 257})
      run_case(isa, 16, 8, 2, T, 0, 64, 64);
  for (kc::SimdTarget isa : kc::available_targets())
    for (int64_t dim : {8, 16, 64})
      for (int64_t dv : {8, 64})
        for (int64_t ratio : {1, 2, 7}) run_case(isa, dim, dv, ratio, 65, 0, 16, 32);
}

TEST(FlashSoftmax, CachedPrefixAndDecodeShapes) {
  // S > T: the queries are the last T positions (decode with a KV cache when T = 1).
  for (kc::SimdTarget isa : kc::available_targets()) {
    for (int64_t T : {1, 3, 70})
      for (int64_t extra : {1, 100}) run_case(isa, 64, 64, 7, T, extra, 64, 64);
    run_case(isa, 8, 8, 7, 1, 129, 64, 16);
  }
}
