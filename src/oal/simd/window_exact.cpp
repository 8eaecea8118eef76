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

// How one query's two parts combine under one normaliser: y = exact·a + kernel·n, where
// a, z are the exact part's sums shifted by its max m over n_exact keys (n_exact may be
// 0) and n, r the kernel's numerators and denominator. With ρ = max(m − c + log z, log r)
// neither e^(m − c − ρ) nor e^(−ρ) can overflow, whatever the scores' size.
struct PartWeights {
  float exact = 0.0f, kernel = 0.0f;
};

PartWeights part_weights(int64_t n_exact, float m, float z, float r, float c, int64_t head,
                         int64_t pos) {
  check(n_exact > 0 || r > 0.0f, "window_exact_kernel",
        "query head {} at position {} has neither exact keys nor kernel weight", head, pos);
  const float lam = m - c;
  const float rho = n_exact == 0 ? std::log(r)
                    : r > 0.0f   ? std::max(lam + std::log(z), std::log(r))
                                 : lam + std::log(z);
  const float alpha = n_exact > 0 ? std::exp(lam - rho) : 0.0f;
  const float beta = r > 0.0f ? std::exp(-rho) : 0.0f;
  const float den = alpha * z + beta * r;
  if (!(den > 0.0f) || !std::isfinite(den))
    fail("window_exact_kernel", "denominator not positive ({}) at query head {}, position {}", den,
         head, pos);
  return {alpha / den, beta / den};
}

// y = w.exact·y + w.kernel·nr over Dv (nr: the kernel's sums, nullptr: none).
void combine_parts(const PartWeights& w, const float* nr, float* y, int64_t dv) {
  scaled_product(w.exact, y, nullptr, y, dv);
  if (w.kernel > 0.0f) axpy(w.kernel, nr, y, dv);
}

// One query: exact rows (ks, vs: ns sink rows; kb, vb: nb band rows), the kernel's sums
// nr [Dv + 1] (nullptr: none), c_h -> y [Dv]. s: scratch of ns + nb floats.
void attend(const float* q, const float* ks, const float* vs, int64_t ns, const float* kb,
            const float* vb, int64_t nb, const float* nr, float c, int64_t d, int64_t dv,
            float* s, float* y, int64_t head, int64_t pos) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t n = ns + nb;
  std::fill(y, y + dv, 0.0f);
  float m = 0.0f, z = 0.0f;
  if (n > 0) {
    scores(q, ks, ns, d, scale, s);
    scores(q, kb, nb, d, scale, s + ns);
    m = *std::max_element(s, s + n);
    z = exp_shifted(s, n, m);
    for (int64_t j = 0; j < ns; ++j) axpy(s[j], vs + j * dv, y, dv);
    for (int64_t j = 0; j < nb; ++j) axpy(s[ns + j], vb + j * dv, y, dv);
  }
  combine_parts(part_weights(n, m, z, nr ? nr[dv] : 0.0f, c, head, pos), nr, y, dv);
}

// The exact rows of one decode step's KV head unit: the sink rows, then the ring rows
// (in the ring's own order: the exact part is a sum, so the order does not matter).
struct StepRows {
  const WindowRows& sinks;
  const WindowRows& ring;
  int64_t unit;
  int64_t count() const { return sinks.count + ring.count; }
  const float* key(int64_t j, int64_t d) const {
    return j < sinks.count ? sinks.k + (unit * sinks.stride + j) * d
                           : ring.k + (unit * ring.stride + j - sinks.count) * d;
  }
  const float* value(int64_t j, int64_t dv) const {
    return j < sinks.count ? sinks.v + (unit * sinks.stride + j) * dv
                           : ring.v + (unit * ring.stride + j - sinks.count) * dv;
  }
};

// Value columns [c0, c0 + k_value_vectors lanes) of GC query heads at once:
// out[g][c] = Σ_j p[g][j] v_j[c] over the rows, p [GC, n] (row stride n), out [GC, Dv].
// The accumulators stay in registers (GC·k_value_vectors of them, plus the row's
// vectors and one broadcast): each value row is loaded once for the GC heads.
constexpr int64_t k_value_vectors = 4;
constexpr int64_t k_heads_per_pass = k_vector_registers >= 32 ? 4 : 2;

template <int GC>
HWY_NOINLINE void weighted_values(const StepRows& rows, const float* p, int64_t dv, int64_t c0,
                                  float* out) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d)), n = rows.count();
  VF acc[GC][k_value_vectors];
  for (int g = 0; g < GC; ++g)
    for (int64_t c = 0; c < k_value_vectors; ++c) acc[g][c] = hn::Zero(d);
  for (int64_t j = 0; j < n; ++j) {
    const float* vj = rows.value(j, dv) + c0;
    VF vv[k_value_vectors];
    for (int64_t c = 0; c < k_value_vectors; ++c) vv[c] = load_n(d, vj + c * L, dv - c0 - c * L);
    for (int g = 0; g < GC; ++g) {
      const VF pg = hn::Set(d, p[g * n + j]);
      for (int64_t c = 0; c < k_value_vectors; ++c) acc[g][c] = hn::MulAdd(pg, vv[c], acc[g][c]);
    }
  }
  for (int g = 0; g < GC; ++g)
    for (int64_t c = 0; c < k_value_vectors; ++c)
      store_n(acc[g][c], d, out + g * dv + c0 + c * L, dv - c0 - c * L);
}

// out [G, Dv] = p [G, n] · the rows' values, k_heads_per_pass heads per pass.
void weighted_values_all(const StepRows& rows, const float* p, int64_t group, int64_t dv,
                         float* out) {
  const int64_t cols = k_value_vectors * static_cast<int64_t>(hn::Lanes(DF()));
  const int64_t n = rows.count();
  for (int64_t g0 = 0; g0 < group; g0 += k_heads_per_pass)
    for (int64_t c0 = 0; c0 < dv; c0 += cols) {
      const float* pg = p + g0 * n;
      float* og = out + g0 * dv;
      switch (std::min(k_heads_per_pass, group - g0)) {
        case 1: weighted_values<1>(rows, pg, dv, c0, og); break;
        case 2: weighted_values<2>(rows, pg, dv, c0, og); break;
        case 3: weighted_values<3>(rows, pg, dv, c0, og); break;
        default: weighted_values<4>(rows, pg, dv, c0, og); break;
      }
    }
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

// One decode step of KV head unit u (batch-major): its G query heads (one query each,
// q [B, Hq, d]) against every sink and ring row. Each key row is read once for the G
// heads' scores and each value row once per k_heads_per_pass heads. s: scratch [G, n].
void step_unit(const WindowExactDims& w, const float* q, const WindowRows& sk,
               const WindowRows& rg, const float* sums, const float* log_scale, float* y,
               float* s, int64_t u) {
  const int64_t d = w.dim, dv = w.value_dim, group = w.q_heads / w.kv_heads;
  const int64_t b = u / w.kv_heads, h0 = (u % w.kv_heads) * group;
  const StepRows rows{sk, rg, u};
  const int64_t n = rows.count();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const float* qu = q + (b * w.q_heads + h0) * d;
  float* yu = y + (b * w.q_heads + h0) * dv;
  for (int64_t j = 0; j < n; ++j) {
    const float* kj = rows.key(j, d);
    for (int64_t g = 0; g < group; ++g) s[g * n + j] = scale * dot(qu + g * d, kj, d);
  }
  float* m = s + group * n;  // [G] maxima, then [G] shifted sums
  float* z = m + group;
  for (int64_t g = 0; g < group; ++g) {
    m[g] = n > 0 ? *std::max_element(s + g * n, s + (g + 1) * n) : 0.0f;
    z[g] = exp_shifted(s + g * n, n, m[g]);
  }
  weighted_values_all(rows, s, group, dv, yu);
  for (int64_t g = 0; g < group; ++g) {
    const int64_t h = h0 + g;
    const float* nr = sums ? sums + (b * w.q_heads + h) * (dv + 1) : nullptr;
    combine_parts(part_weights(n, m[g], z[g], nr ? nr[dv] : 0.0f, log_scale[h], h, w.first_query),
                  nr, yu + g * dv, dv);
  }
}

}  // namespace oal::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace oal::simd {
HWY_EXPORT(exact_block);
HWY_EXPORT(step_unit);

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

void window_exact_step_f32(const WindowExactDims& w, const float* q, const WindowRows& sinks,
                           const WindowRows& ring, const float* sums, const float* log_scale,
                           float* y, int threads) {
  check(w.batch >= 1 && w.kv_heads >= 1 && w.q_heads % w.kv_heads == 0 && w.dim >= 1 &&
            w.value_dim >= 1 && w.queries == 1 && w.first_query >= 0 && sinks.count >= 0 &&
            sinks.count <= w.sinks && sinks.stride >= sinks.count && ring.count >= 0 &&
            ring.count <= w.recent && ring.stride >= ring.count,
        "window_exact_kernel",
        "inconsistent step sizes: B={} Hq={} Hkv={} d={} Dv={} T={} (one query) S={} W={}, {} "
        "sink rows (stride {}), {} ring rows (stride {})",
        w.batch, w.q_heads, w.kv_heads, w.dim, w.value_dim, w.queries, w.sinks, w.recent,
        sinks.count, sinks.stride, ring.count, ring.stride);
  const int64_t units = w.batch * w.kv_heads, group = w.q_heads / w.kv_heads;
  const int64_t scratch_size = group * (sinks.count + ring.count + 2);
  std::vector<std::vector<float>> scratch(static_cast<size_t>(worker_count(units, threads)));
  parallel_items(units, threads, [&](int64_t worker, int64_t u) {
    std::vector<float>& s = scratch[worker];
    if (s.empty()) s.resize(static_cast<size_t>(scratch_size));
    HWY_DYNAMIC_DISPATCH(step_unit)(w, q, sinks, ring, sums, log_scale, y, s.data(), u);
  });
}

}  // namespace oal::simd
#endif  // HWY_ONCE
