// Chunked OAL prefill on the CPU, compiled once per SIMD target (Highway foreach_target;
// the GEMMs go through gemm_f32's own dispatch).
#include "oal/simd/simd_config.h"
// (simd_config.h first: it selects the targets foreach_target.h compiles.)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "oal/simd/oal_prefill.cpp"
#include <hwy/foreach_target.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "oal/core/error.h"
#include "oal/simd/gemm_f32.h"
#include "oal/simd/oal_prefill.h"
#include "oal/simd/parallel.h"
#include "oal/simd/simd_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace oal::simd::HWY_NAMESPACE {
namespace {

constexpr const char* k_op = "oal_prefill_kernel";

// Row i of the intra-chunk weights (j < n): w_j = eps + sum_a (sum_{b>=a} L[b][a] s̄_b)²,
// s̄ = [1, s_0[i,j], ..., s_{G-1}[i,j]] (factored form, >= eps), then zero for j > i.
// Plain loops over j: the compiler vectorizes them for this file's target.
void intra_weights(const float* sg, int64_t n, int64_t i, int64_t G, const float* L, float eps,
                   float* w, float* t) {
  // Columns [0, i] are needed; up to the next multiple of 16 (within the row) costs the
  // same vectors without masked tails, and the extra columns are zeroed below.
  const int64_t cnt = std::min(n, (i + 16) / 16 * 16);
  for (int64_t j = 0; j < cnt; ++j) w[j] = eps;
  for (int64_t a = 0; a <= G; ++a) {
    const float l0 = a == 0 ? L[0] : 0.0f;
    for (int64_t j = 0; j < cnt; ++j) t[j] = l0;
    for (int64_t b = std::max<int64_t>(a, 1); b <= G; ++b) {
      const float lba = L[b * (G + 1) + a];
      if (lba == 0.0f) continue;
      axpy(lba, sg + (b - 1) * n * n + i * n, t, cnt);
    }
    for (int64_t j = 0; j < cnt; ++j) w[j] += t[j] * t[j];
  }
  for (int64_t j = i + 1; j < n; ++j) w[j] = 0.0f;
}

// ---- one KV head's work --------------------------------------------------------------

struct Scratch {
  std::vector<float> phiq, phik, yacc, den, sden, qp, ktp, sg, w, t;
};

struct Unit {
  const AttentionDims& dims;
  const OalPlan& plan;
  const OalPrefillOptions& opt;
  const float *q, *k, *v;
  float* y;

  int64_t Df() const { return plan.feature_dim(); }
  int64_t ld() const { return dims.value_dim + 1; }

  void reserve(Scratch& s) const {
    const int64_t C = opt.chunk, hg = dims.group_size(), d = dims.dim, Dv = dims.value_dim;
    const int64_t G = plan.max_groups;
    s.phiq.resize(hg * C * Df());
    s.phik.resize(C * Df());
    s.yacc.resize(hg * C * Dv);
    s.den.resize(hg * C);
    s.sden.resize(Df());
    s.qp.resize(C * d);
    s.ktp.resize(d * C);
    s.sg.resize(G * C * C);
    s.w.resize(C * C);
    s.t.resize(C);
  }

  // S += phiK(K[c0, c0+n))ᵀ [V, 1] for KV head u (batch-major index).
  void update(float* S, int64_t u, int64_t c0, int64_t n, Scratch& s) const {
    const int64_t d = dims.dim, Dv = dims.value_dim, T = dims.q_len, df = Df();
    for (int64_t j = 0; j < n; ++j)
      monomials(k + (u * T + c0 + j) * d, d, s.phik.data() + j * df);
    gemm_f32(df, Dv, n, s.phik.data(), 1, df, v + (u * T + c0) * Dv, Dv, S, ld(), true);
    std::fill(s.sden.begin(), s.sden.begin() + df, 0.0f);
    for (int64_t j = 0; j < n; ++j) axpy(1.0f, s.phik.data() + j * df, s.sden.data(), df);
    for (int64_t f = 0; f < df; ++f) S[f * ld() + Dv] += s.sden[f];
  }

  // Intra-chunk part of query head h (slot hh of its group): adds sum_j w_ij [v_j, 1].
  void intra(int64_t u, int64_t h, int64_t hh, int64_t c0, int64_t n, Scratch& s) const {
    const int64_t d = dims.dim, Dv = dims.value_dim, T = dims.q_len, G = plan.max_groups;
    const int64_t b = u / dims.kv_heads;
    const int64_t* perm = plan.perm.data() + h * d;
    const int64_t* gend = plan.group_end.data() + h * G;
    const float inv_sd = 1.0f / std::sqrt(static_cast<float>(d));
    const float* qh = q + ((b * dims.q_heads + h) * T + c0) * d;
    const float* ku = k + (u * T + c0) * d;
    // Dimensions reordered so each group is a contiguous slice: s_g = one small GEMM.
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < d; ++p) s.qp[i * d + p] = qh[i * d + perm[p]] * inv_sd;
    for (int64_t p = 0; p < d; ++p)
      for (int64_t j = 0; j < n; ++j) s.ktp[p * n + j] = ku[j * d + perm[p]];
    for (int64_t g = 0; g < G; ++g) {
      const int64_t start = g == 0 ? 0 : gend[g - 1], end = gend[g];
      float* sgg = s.sg.data() + g * n * n;
      if (end == start)
        std::fill(sgg, sgg + n * n, 0.0f);
      else
        gemm_f32(n, n, end - start, s.qp.data() + start, d, 1, s.ktp.data() + start * n, n, sgg,
                 n, false);
    }
    const float* L = plan.lower_of(h);
    for (int64_t i = 0; i < n; ++i) {
      float* wr = s.w.data() + i * n;
      intra_weights(s.sg.data(), n, i, G, L, plan.eps, wr, s.t.data());
      float sum = 0;
      for (int64_t j = 0; j <= i; ++j) sum += wr[j];
      s.den[hh * n + i] += sum;
    }
    gemm_f32(n, Dv, n, s.w.data(), n, 1, v + (u * T + c0) * Dv, Dv,
             s.yacc.data() + hh * n * Dv, Dv, true);
  }

  // Outputs of rows [c0, c0+n) for every query head of KV head u, reading state S.
  void readout(const float* S, int64_t u, int64_t c0, int64_t n, Scratch& s) const {
    const int64_t d = dims.dim, Dv = dims.value_dim, T = dims.q_len, df = Df();
    const int64_t hg = dims.group_size(), b = u / dims.kv_heads;
    const int64_t h0 = (u % dims.kv_heads) * hg;
    for (int64_t f = 0; f < df; ++f) s.sden[f] = S[f * ld() + Dv];
    // Each feature row's denominator is taken while the row is still in L1: the rows of
    // a chunk (hg · n · Df floats, 3.8 MB for Qwen2.5's shape) do not stay in L2 until
    // after the GEMM.
    for (int64_t hh = 0; hh < hg; ++hh) {
      const float* qh = q + ((b * dims.q_heads + h0 + hh) * T + c0) * d;
      for (int64_t i = 0; i < n; ++i) {
        float* row = s.phiq.data() + (hh * n + i) * df;
        query_features(qh + i * d, d, plan.coef_of(h0 + hh), row);
        s.den[hh * n + i] = dot(row, s.sden.data(), df);
      }
    }
    const int64_t rows = hg * n;
    gemm_f32(rows, Dv, df, s.phiq.data(), df, 1, S, ld(), s.yacc.data(), Dv, false);
    for (int64_t hh = 0; hh < hg; ++hh) intra(u, h0 + hh, hh, c0, n, s);
    for (int64_t hh = 0; hh < hg; ++hh) {
      float* yh = y + ((b * dims.q_heads + h0 + hh) * T + c0) * Dv;
      for (int64_t i = 0; i < n; ++i) {
        const float den = s.den[hh * n + i];
        if (!(den > 0.0f) || !std::isfinite(den))
          fail(k_op,
               "readout denominator not positive ({}) at query head {}, position {}: expected > 0 "
               "(the "
               "expanded state readout cancelled; use the fp64 reference path)",
               den, h0 + hh, c0 + i);
        const float* acc = s.yacc.data() + (hh * n + i) * Dv;
        if (opt.denominators != nullptr) {
          std::copy(acc, acc + Dv, yh + i * Dv);
          opt.denominators[(b * dims.q_heads + h0 + hh) * T + c0 + i] = den;
        } else {
          scaled_product(1.0f / den, acc, nullptr, yh + i * Dv, Dv);
        }
      }
    }
  }

  // Chunks [first, last) of KV head u starting from state S (updated in place).
  void scan(float* S, int64_t u, int64_t first, int64_t last, bool keep_last_update,
            Scratch& s) const {
    const int64_t C = opt.chunk, T = dims.q_len;
    for (int64_t c = first; c < last; ++c) {
      const int64_t c0 = c * C, n = std::min(C, T - c0);
      if (y != nullptr) readout(S, u, c0, n, s);
      if (c + 1 < last || keep_last_update) update(S, u, c0, n, s);
    }
  }
};

int64_t pick_segments(const AttentionDims& dims, const OalPrefillOptions& opt,
                      int64_t chunks) {
  const int64_t units = dims.batch * dims.kv_heads;
  int64_t seg = opt.segments;
  if (seg <= 0) {
    const int64_t threads = opt.threads > 0 ? opt.threads : at::get_num_threads();
    seg = units >= threads ? 1 : (threads + units - 1) / units;
  }
  return std::clamp<int64_t>(seg, 1, std::max<int64_t>(chunks, 1));
}

}  // namespace

void prefill(const AttentionDims& dims, const OalPlan& plan, const float* q, const float* k,
             const float* v, float* y, float* state, const OalPrefillOptions& opt) {
  const int64_t units = dims.batch * dims.kv_heads;
  const int64_t sz = plan.feature_dim() * (dims.value_dim + 1);
  const int64_t chunks = (dims.q_len + opt.chunk - 1) / opt.chunk;
  if (units == 0 || chunks == 0) return;
  const Unit unit{dims, plan, opt, q, k, v, y};
  // Worker scratch, sized once per call (never per token or chunk).
  std::vector<Scratch> scratch(static_cast<size_t>(worker_count(units * chunks, opt.threads)));
  auto scratch_for = [&](int64_t w) -> Scratch& {
    Scratch& s = scratch[w];
    if (s.phik.empty()) unit.reserve(s);
    return s;
  };
  std::vector<float> zero_states;
  if (state == nullptr) zero_states.assign(static_cast<size_t>(units * sz), 0.0f);
  float* S = state != nullptr ? state : zero_states.data();
  const bool keep = state != nullptr;

  const int64_t nseg = pick_segments(dims, opt, chunks);
  const int64_t per = (chunks + nseg - 1) / nseg;
  const int64_t segs = (chunks + per - 1) / per;
  if (segs == 1) {
    parallel_items(units, opt.threads, [&](int64_t w, int64_t u) {
      unit.scan(S + u * sz, u, 0, chunks, keep, scratch_for(w));
    });
    return;
  }
  // starts[u][s]: state before segment s. Phase 1: each segment's own contribution
  // (segments 0..segs-2) into starts[u][s+1]; phase 2: prefix sums; phase 3: scans.
  std::vector<float> starts(static_cast<size_t>(units * segs * sz), 0.0f);
  auto start_of = [&](int64_t u, int64_t s) { return starts.data() + (u * segs + s) * sz; };
  parallel_items(units * (segs - 1), opt.threads, [&](int64_t w, int64_t it) {
    const int64_t u = it / (segs - 1), sg = it % (segs - 1);
    Scratch& s = scratch_for(w);
    const int64_t C = opt.chunk;
    for (int64_t c = sg * per; c < std::min(chunks, (sg + 1) * per); ++c)
      unit.update(start_of(u, sg + 1), u, c * C, std::min(C, dims.q_len - c * C), s);
  });
  for (int64_t u = 0; u < units; ++u) {
    std::copy(S + u * sz, S + (u + 1) * sz, start_of(u, 0));
    for (int64_t sg = 1; sg < segs; ++sg) {
      float* cur = start_of(u, sg);
      const float* prev = start_of(u, sg - 1);
      for (int64_t i = 0; i < sz; ++i) cur[i] += prev[i];
    }
  }
  parallel_items(units * segs, opt.threads, [&](int64_t w, int64_t it) {
    const int64_t u = it / segs, sg = it % segs;
    const bool last = sg == segs - 1;
    unit.scan(start_of(u, sg), u, sg * per, std::min(chunks, (sg + 1) * per), keep && last,
              scratch_for(w));
  });
  if (keep)
    for (int64_t u = 0; u < units; ++u)
      std::copy(start_of(u, segs - 1), start_of(u, segs - 1) + sz, S + u * sz);
}

}  // namespace oal::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace oal::simd {
HWY_EXPORT(prefill);

double oal_prefill_flops(const AttentionDims& dims, int64_t chunk) {
  const double df = static_cast<double>(oal_feature_dim(dims.dim));
  const double T = static_cast<double>(dims.q_len), dv1 = dims.value_dim + 1.0;
  const double state = 2.0 * dims.batch * (dims.q_heads + dims.kv_heads) * T * df * dv1;
  double intra_pairs = 0;
  for (int64_t c0 = 0; c0 < dims.q_len; c0 += chunk) {
    const double n = static_cast<double>(std::min(chunk, dims.q_len - c0));
    intra_pairs += n * n;
  }
  const double intra =
      static_cast<double>(dims.batch * dims.q_heads) * intra_pairs * (2.0 * dims.dim + 2.0 * dv1);
  return state + intra;
}

void oal_prefill_f32(const AttentionDims& dims, const OalPlan& plan, const float* q,
                     const float* k, const float* v, float* y, float* state,
                     const OalPrefillOptions& opt) {
  constexpr const char* k_op = "oal_prefill_kernel";
  check(dims.dim == plan.dim && dims.q_heads == plan.q_heads, k_op,
        "inputs have Hq = {}, d = {}; the kernel plan has Hq = {}, d = {}", dims.q_heads,
        dims.dim, plan.q_heads, plan.dim);
  check(dims.k_len == dims.q_len, k_op, "expected as many keys as queries, got {} and {}",
        dims.k_len, dims.q_len);
  check(opt.chunk >= 1, k_op, "chunk: expected >= 1, got {}", opt.chunk);
  check(y != nullptr || state != nullptr, k_op, "expected an output or a state to fill");
  check(dims.kv_heads >= 1 && dims.q_heads % dims.kv_heads == 0, k_op,
        "Hq = {} must be a multiple of Hkv = {}", dims.q_heads, dims.kv_heads);
  HWY_DYNAMIC_DISPATCH(prefill)(dims, plan, q, k, v, y, state, opt);
}

}  // namespace oal::simd
#endif  // HWY_ONCE
