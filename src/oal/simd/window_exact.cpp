// The exact part of a windowed layer, compiled once per SIMD target (Highway
// foreach_target).
#include "oal/simd/simd_config.h"
// (simd_config.h first: it selects the targets foreach_target.h compiles.)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "oal/simd/window_exact.cpp"
#include <hwy/foreach_target.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "oal/core/error.h"
#include "oal/simd/parallel.h"
#include "oal/simd/simd_tiles-inl.h"
#include "oal/simd/window_exact.h"

HWY_BEFORE_NAMESPACE();
namespace oal::simd::HWY_NAMESPACE {
namespace {

// Scores of one query against `rows` keys into s.
void scores(const float* q, const float* k, int64_t rows, int64_t d, float scale, float* s) {
  for (int64_t j = 0; j < rows; ++j) s[j] = scale * dot(q, k + j * d, d);
}

// s[j] = exp(s[j] - m) for j < n; returns their sum.
float exp_shifted(float* s, int64_t n, float m) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF vm = hn::Set(d, m);
  VF sum = hn::Zero(d);
  for (int64_t j = 0; j < n; j += N) {
    const VF p = exp_nonpositive(d, hn::Sub(load_n(d, s + j, n - j), vm));
    store_n(p, d, s + j, n - j);
    sum = hn::Add(sum, hn::IfThenElseZero(first_lanes(d, n - j), p));
  }
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

// One query: exact rows (ks, vs: ns sink rows; kb, vb: nb band rows), the kernel's sums
// nr [Dv + 1] (nullptr: none), c_h -> y [Dv]. s: scratch of ns + nb floats.
void attend(const float* q, const float* ks, const float* vs, int64_t ns, const float* kb,
            const float* vb, int64_t nb, const float* nr, float c, int64_t d, int64_t dv,
            float* s, float* y, int64_t head, int64_t pos) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t n = ns + nb;
  std::fill(y, y + dv, 0.0f);
  float alpha = 0.0f, z = 0.0f, lam = 0.0f;
  if (n > 0) {
    scores(q, ks, ns, d, scale, s);
    scores(q, kb, nb, d, scale, s + ns);
    const float m = *std::max_element(s, s + n);
    z = exp_shifted(s, n, m);
    for (int64_t j = 0; j < ns; ++j) axpy(s[j], vs + j * dv, y, dv);
    for (int64_t j = 0; j < nb; ++j) axpy(s[ns + j], vb + j * dv, y, dv);
    lam = m - c;
  }
  const float r = nr ? nr[dv] : 0.0f;
  check(n > 0 || r > 0.0f, "window_exact_kernel",
        "query head {} at position {} has neither exact keys nor kernel weight", head, pos);
  const float rho = n == 0 ? std::log(r)
                    : r > 0.0f ? std::max(lam + std::log(z), std::log(r))
                               : lam + std::log(z);
  if (n > 0) alpha = std::exp(lam - rho);
  const float beta = r > 0.0f ? std::exp(-rho) : 0.0f;
  const float den = alpha * z + beta * r;
  if (!(den > 0.0f) || !std::isfinite(den))
    fail("window_exact_kernel", "denominator not positive ({}) at query head {}, position {}", den,
         head, pos);
  scaled_product(alpha / den, y, nullptr, y, dv);
  if (beta > 0.0f) axpy(beta / den, nr, y, dv);
}

}  // namespace

// Queries [t0, t1) of KV head unit u (batch-major), every query head of the unit.
void exact_block(const WindowExactDims& w, const float* q, const WindowRows& sk,
                 const WindowRows& bd, const float* sums, const float* log_scale, float* y,
                 float* s, int64_t u, int64_t t0, int64_t t1) {
  const int64_t d = w.dim, dv = w.value_dim, T = w.queries, group = w.q_heads / w.kv_heads;
  const int64_t b = u / w.kv_heads, h0 = (u % w.kv_heads) * group;
  const float* ks = sk.k + u * sk.stride * d;
  const float* vs = sk.v + u * sk.stride * dv;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t i = w.first_query + t;
    const int64_t ns = std::min(sk.count, i + 1);
    const int64_t lo = std::max({w.sinks, i - w.recent + 1, bd.first_pos});
    const int64_t nb = std::max<int64_t>(0, i - lo + 1);
    check(nb == 0 || (lo - bd.first_pos >= 0 && i - bd.first_pos < bd.count), "window_exact_kernel",
          "the band rows hold positions {}..{}, query {} needs {}..{}", bd.first_pos,
          bd.first_pos + bd.count - 1, i, lo, i);
    const float* kb = bd.k + (u * bd.stride + (lo - bd.first_pos)) * d;
    const float* vb = bd.v + (u * bd.stride + (lo - bd.first_pos)) * dv;
    for (int64_t h = h0; h < h0 + group; ++h) {
      const int64_t row = (b * w.q_heads + h) * T + t;
      attend(q + row * d, ks, vs, ns, kb, vb, nb, sums ? sums + row * (dv + 1) : nullptr,
             log_scale[h], d, dv, s, y + row * dv, h, i);
    }
  }
}

}  // namespace oal::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace oal::simd {
HWY_EXPORT(exact_block);

namespace {
constexpr int64_t k_query_block = 64;  // queries per parallel item
}

void window_exact_f32(const WindowExactDims& w, const float* q, const WindowRows& sinks,
                      const WindowRows& band, const float* sums, const float* log_scale,
                      float* y, int threads) {
  check(w.batch >= 1 && w.kv_heads >= 1 && w.q_heads % w.kv_heads == 0 && w.dim >= 1 &&
            w.value_dim >= 1 && w.queries >= 0 && w.first_query >= 0 && w.sinks >= 0 &&
            w.recent >= 0 && sinks.count >= 0 && sinks.count <= w.sinks &&
            sinks.stride >= sinks.count && band.count >= 0 && band.stride >= band.count,
        "window_exact_kernel",
        "inconsistent sizes: B={} Hq={} Hkv={} d={} Dv={} T={} S={} W={}, {} sink rows (stride "
        "{}), {} band rows (stride {})",
        w.batch, w.q_heads, w.kv_heads, w.dim, w.value_dim, w.queries, w.sinks, w.recent,
        sinks.count, sinks.stride, band.count, band.stride);
  const int64_t units = w.batch * w.kv_heads;
  const int64_t blocks = (w.queries + k_query_block - 1) / k_query_block;
  const int64_t scratch_size = sinks.count + std::min(band.count, w.recent) + 1;
  std::vector<std::vector<float>> scratch(
      static_cast<size_t>(worker_count(units * blocks, threads)));
  parallel_items(units * blocks, threads, [&](int64_t worker, int64_t item) {
    std::vector<float>& s = scratch[worker];
    if (s.empty()) s.resize(static_cast<size_t>(scratch_size));
    const int64_t u = item / blocks, t0 = (item % blocks) * k_query_block;
    HWY_DYNAMIC_DISPATCH(exact_block)(w, q, sinks, band, sums, log_scale, y, s.data(), u, t0,
                                      std::min(w.queries, t0 + k_query_block));
  });
}

}  // namespace oal::simd
#endif  // HWY_ONCE
