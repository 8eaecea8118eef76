// The exact part of a windowed decode step, compiled once per SIMD target (Highway
// foreach_target).
#include "oal/simd/simd_config.h"
// (simd_config.h first: it selects the targets foreach_target.h compiles.)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "oal/simd/window_decode.cpp"
#include <hwy/foreach_target.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "oal/core/error.h"
#include "oal/simd/parallel.h"
#include "oal/simd/simd_tiles-inl.h"
#include "oal/simd/window_decode.h"

HWY_BEFORE_NAMESPACE();
namespace oal::simd::HWY_NAMESPACE {
namespace {

// Scores of one query against `rows` keys into s, starting at s[0].
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

}  // namespace

// The query heads of KV head unit u (batch-major); `s` holds sinks + ring scores.
void window_unit(const WindowDecodeDims& w, const float* q, const float* sink_k,
                 const float* sink_v, const float* ring_k, const float* ring_v,
                 const float* sums, const float* log_scale, float* y, float* s, int64_t u) {
  const int64_t d = w.dim, dv = w.value_dim, group = w.q_heads / w.kv_heads;
  const int64_t b = u / w.kv_heads, h0 = (u % w.kv_heads) * group, n = w.sinks + w.ring;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const float* sk = sink_k + u * w.sinks * d;
  const float* sv = sink_v + u * w.sinks * dv;
  const float* rk = ring_k + u * w.ring * d;
  const float* rv = ring_v + u * w.ring * dv;
  for (int64_t h = h0; h < h0 + group; ++h) {
    const float* qh = q + (b * w.q_heads + h) * d;
    float* yh = y + (b * w.q_heads + h) * dv;
    scores(qh, sk, w.sinks, d, scale, s);
    scores(qh, rk, w.ring, d, scale, s + w.sinks);
    const float m = *std::max_element(s, s + n);
    const float z = exp_shifted(s, n, m);
    std::fill(yh, yh + dv, 0.0f);
    for (int64_t j = 0; j < w.sinks; ++j) axpy(s[j], sv + j * dv, yh, dv);
    for (int64_t j = 0; j < w.ring; ++j) axpy(s[w.sinks + j], rv + j * dv, yh, dv);
    // yh holds a; combine with the kernel's (n, r) under one normaliser.
    const float lam = m - log_scale[h];
    const float* nr = sums ? sums + (b * w.q_heads + h) * (dv + 1) : nullptr;
    const float r = nr ? nr[dv] : 0.0f;
    const float rho = r > 0.0f ? std::max(lam + std::log(z), std::log(r)) : lam + std::log(z);
    const float alpha = std::exp(lam - rho), beta = r > 0.0f ? std::exp(-rho) : 0.0f;
    const float den = alpha * z + beta * r;
    if (!(den > 0.0f) || !std::isfinite(den))
      fail("window_decode_kernel", "denominator not positive ({}) at query head {}", den, h);
    scaled_product(alpha / den, yh, nullptr, yh, dv);
    if (beta > 0.0f) axpy(beta / den, nr, yh, dv);
  }
}

}  // namespace oal::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace oal::simd {
HWY_EXPORT(window_unit);

void window_decode_f32(const WindowDecodeDims& w, const float* q, const float* sink_k,
                       const float* sink_v, const float* ring_k, const float* ring_v,
                       const float* sums, const float* log_scale, float* y, int threads) {
  check(w.batch >= 1 && w.kv_heads >= 1 && w.q_heads % w.kv_heads == 0 && w.dim >= 1 &&
            w.value_dim >= 1 && w.sinks >= 0 && w.ring >= 0 && w.sinks + w.ring >= 1,
        "window_decode_kernel",
        "expected B, Hkv, d, Dv >= 1, Hq a multiple of Hkv and at least one exact row; got "
        "B={} Hq={} Hkv={} d={} Dv={} sinks={} ring={}",
        w.batch, w.q_heads, w.kv_heads, w.dim, w.value_dim, w.sinks, w.ring);
  const int64_t units = w.batch * w.kv_heads, n = w.sinks + w.ring;
  std::vector<std::vector<float>> scratch(static_cast<size_t>(worker_count(units, threads)));
  parallel_items(units, threads, [&](int64_t worker, int64_t u) {
    std::vector<float>& s = scratch[worker];
    if (s.empty()) s.resize(static_cast<size_t>(n));
    HWY_DYNAMIC_DISPATCH(window_unit)(w, q, sink_k, sink_v, ring_k, ring_v, sums, log_scale, y,
                                      s.data(), u);
  });
}

}  // namespace oal::simd
#endif  // HWY_ONCE
