// Training kernels of the kernel-attention layers (kernel_train.h), compiled once per
// SIMD target (Highway foreach_target).
#include "oal/simd/simd_config.h"
// (simd_config.h first: it selects the targets foreach_target.h compiles.)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "oal/simd/kernel_train.cpp"
#include <hwy/foreach_target.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>
#include <vector>

#include "oal/core/error.h"
#include "oal/simd/gemm_f32.h"
#include "oal/simd/kernel_train.h"
#include "oal/simd/parallel.h"
#include "oal/simd/simd_tiles-inl.h"

// Target-independent parts, defined on the first pass through this file (the per-target
// passes below use them).
#ifndef OAL_SIMD_KERNEL_TRAIN_DETAIL
#define OAL_SIMD_KERNEL_TRAIN_DETAIL
namespace oal::simd::kernel_train_detail {

constexpr const char* k_op = "kernel_train";

// One query head's kernel in the order the blocks use: its dimensions sorted by group
// (so each group is a contiguous column range of the gathered rows), c_h and L.
struct Head {
  std::vector<int64_t> perm;  // [d] dimension at each permuted column
  std::vector<int64_t> off;   // [G + 1] first permuted column of each group, then d
  const float* L = nullptr;   // [n, n]
  float c = 0;
  int64_t groups() const { return static_cast<int64_t>(off.size()) - 1; }
};

inline Head head_setup(const KernelTrainDims& w, const KernelTrainParams& p, int64_t h) {
  Head out;
  const int64_t d = w.dim;
  out.perm.resize(static_cast<size_t>(d));
  std::iota(out.perm.begin(), out.perm.end(), 0);
  out.c = p.log_scale[h];
  if (!w.kernel) {  // the exact part reads whole scores: one group of every dimension
    out.off = {0, d};
    return out;
  }
  const int64_t* g = p.group_of + h * d;
  const int64_t G = p.groups[h];
  check(G >= 1 && G + 1 <= p.n && G <= k_kernel_train_max_groups, k_op,
        "query head {} has {} groups; L holds at most {} and the kernel takes at most {}", h, G,
        p.n - 1, k_kernel_train_max_groups);
  std::stable_sort(out.perm.begin(), out.perm.end(),
                   [&](int64_t a, int64_t b) { return g[a] < g[b]; });
  out.off.assign(static_cast<size_t>(G + 1), 0);
  for (int64_t r = 0; r < d; ++r) {
    check(g[r] >= 0 && g[r] < G, k_op, "query head {}: dimension {} in group {} of {}", h, r, g[r],
          G);
    out.off[static_cast<size_t>(g[r] + 1)] += 1;
  }
  for (int64_t i = 0; i < G; ++i) {
    check(out.off[static_cast<size_t>(i + 1)] > 0, k_op, "query head {}: group {} is empty", h, i);
    out.off[static_cast<size_t>(i + 1)] += out.off[static_cast<size_t>(i)];
  }
  out.L = p.L + h * p.n * p.n;
  return out;
}

// With a kernel every block reads a prefix of all keys, so they are laid out once per
// call rather than per block: each (batch, query head)'s keys in its permuted column
// order, row-major and transposed, and each KV unit's values transposed (backward).
struct KeyTables {
  std::vector<float> kp, kpt;  // [B·Hq, N, d], [B·Hq, d, N]
  std::vector<float> vt;       // [B·Hkv, Dv, N]
  std::vector<int64_t> iota;   // [N]: row j holds position j
};

inline int64_t kv_unit(const KernelTrainDims& w, int64_t bh) {
  return (bh / w.q_heads) * w.kv_heads + (bh % w.q_heads) / (w.q_heads / w.kv_heads);
}

// Column ranges of one query row in a block's gathered keys (sorted by position):
// exact [0, sink_end) and [recent_begin, end), kernel [sink_end, recent_begin) when the
// layer has one (else those keys get no weight), nothing from `end` on.
struct RowSpan {
  int64_t sink_end = 0, recent_begin = 0, end = 0;
  float zt = 0;  // the row's shifted weight sum
};

// Everything one block of query rows needs, per worker (sized at first use; no SIMD
// type inside, so one target's scratch serves any).
struct Scratch {
  std::vector<int64_t> pos;        // [nk] key positions, increasing (gathered keys)
  std::vector<float> qp;           // [tq, d] the block's queries / √d, permuted columns
  std::vector<float> kb, kt;       // gathered keys [nk, d] and [d, nk], permuted columns
  std::vector<float> vb, vt;       // gathered values [nk, Dv] and [Dv, nk]
  std::vector<float> sg;           // [G, tq, nk] per-group scores (backward: their grads)
  std::vector<float> w;            // [tq, nk] shifted weights (backward: probabilities)
  std::vector<float> z;            // [n, tq, nk] z_c on kernel columns (backward: dz_c)
  std::vector<float> kap;          // [tq, nk] κ on kernel columns
  std::vector<float> dp;           // [tq, nk] backward: dY Vᵀ, then d(loss)/d(log w)
  std::vector<float> dqp;          // [tq, d] backward: dQ in permuted columns
  std::vector<float> dkt, dvb;     // backward, gathered keys: dKᵀ [d, nk], dV [nk, Dv]
  std::vector<float> dkt_acc;      // backward: the item's dKᵀ [d, N] (permuted rows)
  std::vector<RowSpan> rows;
};

}  // namespace oal::simd::kernel_train_detail
#endif  // OAL_SIMD_KERNEL_TRAIN_DETAIL

HWY_BEFORE_NAMESPACE();
namespace oal::simd::HWY_NAMESPACE {
namespace {

using kernel_train_detail::Head;
using kernel_train_detail::KeyTables;
using kernel_train_detail::Scratch;
using kernel_train_detail::k_op;
using kernel_train_detail::RowSpan;

// p[j] = exp(p[j] - shift) for j in [0, n); every argument is <= 0 (shift >= max p).
void exp_shift(float* p, int64_t n, float shift) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF vs = hn::Set(d, shift);
  for (int64_t j = 0; j < n; j += N)
    store_n(exp_nonpositive(d, hn::Sub(load_n(d, p + j, n - j), vs)), d, p + j, n - j);
}

// Σ x[j] and max x[j] over j in [0, n) (vector accumulation; n = 0: 0 and -inf).
float sum_n(const float* x, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VF acc = hn::Zero(d);
  for (int64_t j = 0; j < n; j += N) acc = hn::Add(acc, load_n(d, x + j, n - j));
  return hn::GetLane(hn::SumOfLanes(d, acc));
}

float max_n(const float* x, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  VF acc = ninf;
  for (int64_t j = 0; j < n; j += N)
    acc = hn::Max(acc, hn::IfThenElse(first_lanes(d, n - j), load_n(d, x + j, n - j), ninf));
  return hn::GetLane(hn::MaxOfLanes(d, acc));
}

// Kernel columns [a, b) of one row, one pass over the keys: from the per-group scores
// s_g (rows sgr[g]) the factors z_c = Σ_{r >= c} L[r][c] s̄_r (rows zr[c]), κ = eps +
// Σ_c z_c² (row kr) and the weight κ·e (row wr). G <= k_kernel_train_max_groups.
void kernel_columns(const float* const* sgr, int64_t G, const float* L, int64_t n, float eps,
                    float e, float* const* zr, float* kr, float* wr, int64_t a, int64_t b) {
  const DF d;
  const int64_t NL = static_cast<int64_t>(hn::Lanes(d));
  VF sv[k_kernel_train_max_groups];
  for (int64_t j = a; j < b; j += NL) {
    const int64_t m = b - j;
    for (int64_t g = 0; g < G; ++g) sv[g] = load_n(d, sgr[g] + j, m);
    VF kap = hn::Set(d, eps);
    for (int64_t c = 0; c <= G; ++c) {
      VF z = c == 0 ? hn::Set(d, L[0]) : hn::Zero(d);
      for (int64_t g = std::max<int64_t>(c - 1, 0); g < G; ++g)
        z = hn::MulAdd(hn::Set(d, L[(g + 1) * n + c]), sv[g], z);
      store_n(z, d, zr[c] + j, m);
      kap = hn::MulAdd(z, z, kap);
    }
    store_n(kap, d, kr + j, m);
    store_n(hn::Mul(kap, hn::Set(d, e)), d, wr + j, m);
  }
}

// The backward of kernel_columns for d(loss)/d(log w) on [a, b) (row dr): dκ = dr / κ,
// dz_c = 2 z_c dκ; adds Σ_j dz_0 to dL[0][0] and Σ_j dz_c s_g to dL[g+1][c], and
// overwrites each s_g row with ds_g = Σ_{c <= g+1} L[g+1][c] dz_c.
void kernel_columns_backward(float* const* sgr, int64_t G, const float* L, int64_t n,
                             const float* const* zr, const float* kr, const float* dr,
                             float* dL, int64_t a, int64_t b) {
  const DF d;
  const int64_t NL = static_cast<int64_t>(hn::Lanes(d));
  constexpr int64_t GM = k_kernel_train_max_groups;
  VF sv[GM], dz[GM + 1];
  VF acc0 = hn::Zero(d);
  VF acc[GM][GM + 1];  // [g][c]: Σ dz_c s_g, c <= g + 1
  for (int64_t g = 0; g < G; ++g)
    for (int64_t c = 0; c <= g + 1; ++c) acc[g][c] = hn::Zero(d);
  const VF one = hn::Set(d, 1.0f), two = hn::Set(d, 2.0f);
  for (int64_t j = a; j < b; j += NL) {
    const int64_t m = b - j;
    // Lanes past b: dr = 0 and κ = 1, so they add nothing.
    const VF dk =
        hn::Div(load_n(d, dr + j, m), hn::IfThenElse(first_lanes(d, m), load_n(d, kr + j, m), one));
    for (int64_t g = 0; g < G; ++g) sv[g] = load_n(d, sgr[g] + j, m);
    for (int64_t c = 0; c <= G; ++c) dz[c] = hn::Mul(hn::Mul(two, load_n(d, zr[c] + j, m)), dk);
    acc0 = hn::Add(acc0, dz[0]);
    for (int64_t g = 0; g < G; ++g) {
      VF ds = hn::Zero(d);
      for (int64_t c = 0; c <= g + 1; ++c) {
        acc[g][c] = hn::MulAdd(dz[c], sv[g], acc[g][c]);
        ds = hn::MulAdd(hn::Set(d, L[(g + 1) * n + c]), dz[c], ds);
      }
      store_n(ds, d, sgr[g] + j, m);
    }
  }
  dL[0] += hn::GetLane(hn::SumOfLanes(d, acc0));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t c = 0; c <= g + 1; ++c)
      dL[(g + 1) * n + c] += hn::GetLane(hn::SumOfLanes(d, acc[g][c]));
}

// Groups at least this wide take a GEMM for their query gradient; narrower ones (the
// outlier groups: 1-4 dimensions) one dot product per (row, dimension), since the GEMM's
// register tile would be mostly padding.
constexpr int64_t k_gemm_min_width = 16;

template <typename T>
T* sized(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

// The keys of one block: rows in increasing position, keys in the head's permuted column
// order. `direct`: rows 0..nk-1 are positions 0..nk-1 and the pointers are into the
// call's KeyTables (kernel layers); otherwise they were gathered into the scratch.
struct Keys {
  const float* kb = nullptr;   // [nk, d]
  const float* kt = nullptr;   // [d, ·] row stride ldt
  const float* vb = nullptr;   // [nk, Dv]
  const float* vt = nullptr;   // [Dv, ·] row stride ldt (when asked for)
  const int64_t* pos = nullptr;
  int64_t nk = 0, ldt = 0;
  bool direct = false;
};

Keys block_keys(const KernelTrainDims& w, const Head& hd, const KeyTables& tab, const float* k,
                const float* v, int64_t bh, int64_t qs, int64_t tq, bool with_vt, Scratch& s) {
  const int64_t d = w.dim, dv = w.value_dim, N = w.len, ke = qs + tq;
  const int64_t unit = kernel_train_detail::kv_unit(w, bh);
  Keys K;
  if (w.kernel) {  // every key up to the block's last row: a prefix of the tables
    K.kb = tab.kp.data() + bh * N * d;
    K.kt = tab.kpt.data() + bh * d * N;
    K.vb = v + unit * N * dv;
    K.vt = with_vt ? tab.vt.data() + unit * dv * N : nullptr;
    K.pos = tab.iota.data();
    K.nk = ke;
    K.ldt = N;
    K.direct = true;
    return K;
  }
  // Windowed-only: the sinks and the block's band, gathered.
  s.pos.clear();
  const int64_t sink_keys = std::min(w.sinks, ke);
  for (int64_t j = 0; j < sink_keys; ++j) s.pos.push_back(j);
  for (int64_t j = std::max(sink_keys, qs - w.recent + 1); j < ke; ++j) s.pos.push_back(j);
  const int64_t nk = static_cast<int64_t>(s.pos.size());
  float* kb = sized(s.kb, nk * d);
  float* kt = sized(s.kt, d * nk);
  float* vb = sized(s.vb, nk * dv);
  for (int64_t j = 0; j < nk; ++j) {
    const float* kr = k + (unit * N + s.pos[j]) * d;
    for (int64_t r = 0; r < d; ++r) kt[r * nk + j] = kb[j * d + r] = kr[hd.perm[r]];
    std::copy_n(v + (unit * N + s.pos[j]) * dv, dv, vb + j * dv);
  }
  if (with_vt) {
    float* vt = sized(s.vt, dv * nk);
    for (int64_t j = 0; j < nk; ++j)
      for (int64_t c = 0; c < dv; ++c) vt[c * nk + j] = vb[j * dv + c];
    K.vt = vt;
  }
  K.kb = kb;
  K.kt = kt;
  K.vb = vb;
  K.pos = s.pos.data();
  K.nk = nk;
  K.ldt = nk;
  return K;
}

// Block [qs, qs + tq) of query head bh against its keys K: per-group scores, kernel
// values and shifted weights with each row's sum.
void block_weights(const KernelTrainDims& w, const KernelTrainParams& p, const Head& hd,
                   const float* q, const Keys& K, int64_t bh, int64_t qs, int64_t tq,
                   Scratch& s) {
  const int64_t d = w.dim, N = w.len, G = hd.groups(), nk = K.nk;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  float* qp = sized(s.qp, tq * d);
  for (int64_t i = 0; i < tq; ++i)
    for (int64_t r = 0; r < d; ++r) qp[i * d + r] = scale * q[(bh * N + qs + i) * d + hd.perm[r]];
  float* sg = sized(s.sg, G * tq * nk);
  for (int64_t g = 0; g < G; ++g) {
    const int64_t o = hd.off[g], width = hd.off[g + 1] - o;
    gemm_f32(tq, nk, width, qp + o, d, 1, K.kt + o * K.ldt, K.ldt, sg + g * tq * nk, nk, false);
  }

  float* wt = sized(s.w, tq * nk);
  const int64_t n = p.n;
  float* z = w.kernel ? sized(s.z, n * tq * nk) : nullptr;
  float* kap = w.kernel ? sized(s.kap, tq * nk) : nullptr;
  s.rows.resize(static_cast<size_t>(tq));
  const auto first_at = [&](int64_t position) {
    return static_cast<int64_t>(std::lower_bound(K.pos, K.pos + nk, position) - K.pos);
  };
  for (int64_t i = 0; i < tq; ++i) {
    const int64_t pi = qs + i;
    RowSpan& rs = s.rows[static_cast<size_t>(i)];
    rs.end = first_at(pi + 1);
    rs.sink_end = std::min(first_at(w.sinks), rs.end);
    rs.recent_begin = std::clamp(first_at(pi - w.recent + 1), rs.sink_end, rs.end);
    float* row = wt + i * nk;
    std::fill(row, row + nk, 0.0f);
    // Exact columns: the full score s = Σ_g s_g, and its maximum.
    float m = -std::numeric_limits<float>::infinity();
    for (auto [a, b] : {std::pair{int64_t{0}, rs.sink_end}, std::pair{rs.recent_begin, rs.end}}) {
      for (int64_t g = 0; g < G; ++g) {
        const float* sgr = sg + (g * tq + i) * nk;
        for (int64_t j = a; j < b; ++j) row[j] += sgr[j];
      }
      m = std::max(m, max_n(row + a, b - a));
    }
    const bool has_exact = rs.sink_end > 0 || rs.end > rs.recent_begin;
    const bool has_kernel = w.kernel && rs.recent_begin > rs.sink_end;
    check(has_exact || has_kernel, k_op, "query at position {} has no key", pi);
    const float lam = m - hd.c;
    const float rho = has_kernel ? (has_exact ? std::max(lam, 0.0f) : 0.0f) : lam;
    for (auto [a, b] : {std::pair{int64_t{0}, rs.sink_end}, std::pair{rs.recent_begin, rs.end}})
      exp_shift(row + a, b - a, hd.c + rho);
    if (has_kernel) {  // z_c, κ and the weight on [sink_end, recent_begin)
      const float* sgr[k_kernel_train_max_groups];
      float* zr[k_kernel_train_max_groups + 1];
      for (int64_t g = 0; g < G; ++g) sgr[g] = sg + (g * tq + i) * nk;
      for (int64_t c = 0; c <= G; ++c) zr[c] = z + (c * tq + i) * nk;
      kernel_columns(sgr, G, hd.L, n, p.eps, std::exp(-rho), zr, kap + i * nk, row,
                     rs.sink_end, rs.recent_begin);
    }
    const float zt = sum_n(row, rs.end);
    if (!(zt > 0.0f) || !std::isfinite(zt))
      fail(k_op, "query head item {} at position {}: weights sum to {} (expected finite > 0)", bh,
           pi, zt);
    rs.zt = zt;
  }
}

void forward_item(const KernelTrainDims& w, const KernelTrainParams& p, const KeyTables& tab,
                  const float* q, const float* k, const float* v, float* y, int64_t bh,
                  int64_t qs, int64_t tq, Scratch& s) {
  const Head hd = kernel_train_detail::head_setup(w, p, bh % w.q_heads);
  const Keys K = block_keys(w, hd, tab, k, v, bh, qs, tq, false, s);
  block_weights(w, p, hd, q, K, bh, qs, tq, s);
  const int64_t dv = w.value_dim;
  float* yb = y + (bh * w.len + qs) * dv;
  gemm_f32(tq, dv, K.nk, s.w.data(), K.nk, 1, K.vb, dv, yb, dv, false);
  for (int64_t i = 0; i < tq; ++i)
    scaled_product(1.0f / s.rows[static_cast<size_t>(i)].zt, yb + i * dv, nullptr, yb + i * dv, dv);
}

// One (part, batch, query head) item: the query blocks from q_begin to q_end (a multiple
// of `block` apart, or to N), their dq rows and the part's dk, dv, dL and dc slot.
void backward_item(const KernelTrainDims& w, const KernelTrainParams& p, const float* q,
                   const KeyTables& tab, const float* k, const float* v, const float* dy,
                   float* dq, float* dk, float* dv, float* dL, float* dc, int64_t bh,
                   int64_t part, int64_t q_begin, int64_t q_end, int64_t block, Scratch& s) {
  const Head hd = kernel_train_detail::head_setup(w, p, bh % w.q_heads);
  const int64_t d = w.dim, Dv = w.value_dim, N = w.len, G = hd.groups(), n = p.n;
  const int64_t slot = part * w.batch * w.q_heads + bh;
  float* dkh = dk + slot * N * d;
  float* dvh = dv + slot * N * Dv;
  std::fill(dvh, dvh + N * Dv, 0.0f);  // (dkh is written whole from dkt_acc at the end)
  float* dLh = dL ? dL + slot * n * n : nullptr;
  if (dLh) std::fill(dLh, dLh + n * n, 0.0f);
  double dch = 0;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // dKᵀ of the whole item in permuted rows: the blocks' GEMMs accumulate into it
  // directly (transposed once at the end rather than scattered per block).
  float* dkt_acc = sized(s.dkt_acc, d * N);
  std::fill(dkt_acc, dkt_acc + d * N, 0.0f);
  for (int64_t qs = q_begin; qs < q_end; qs += block) {
    const int64_t tq = std::min(block, N - qs);
    const Keys K = block_keys(w, hd, tab, k, v, bh, qs, tq, true, s);
    const int64_t nk = K.nk;
    block_weights(w, p, hd, q, K, bh, qs, tq, s);
    const float* dyb = dy + (bh * N + qs) * Dv;
    float* P = s.w.data();
    float* dp = sized(s.dp, tq * nk);
    gemm_f32(tq, nk, Dv, dyb, Dv, 1, K.vt, K.ldt, dp, nk, false);  // dY Vᵀ
    float* sg = s.sg.data();
    for (int64_t i = 0; i < tq; ++i) {
      const RowSpan& rs = s.rows[static_cast<size_t>(i)];
      float* pr = P + i * nk;
      float* dr = dp + i * nk;
      scaled_product(1.0f / rs.zt, pr, nullptr, pr, rs.end);
      const float drow = dot(pr, dr, rs.end);  // D_i = Σ_j P_ij dP_ij = dy_i · y_i
      // d(loss)/d(log w_ij) = P_ij (dP_ij − D_i); zero past the row's last key.
      for (int64_t j = 0; j < rs.end; ++j) dr[j] = pr[j] * (dr[j] - drow);
      std::fill(dr + rs.end, dr + nk, 0.0f);
      std::fill(pr + rs.end, pr + nk, 0.0f);
      // Kernel columns first (they read s_g before it is overwritten by its gradient).
      const int64_t a = rs.sink_end, b = rs.recent_begin;
      if (w.kernel && b > a) {
        float* sgr[k_kernel_train_max_groups];
        const float* zr[k_kernel_train_max_groups + 1];
        for (int64_t g = 0; g < G; ++g) sgr[g] = sg + (g * tq + i) * nk;
        for (int64_t c = 0; c <= G; ++c) zr[c] = s.z.data() + (c * tq + i) * nk;
        kernel_columns_backward(sgr, G, hd.L, n, zr, s.kap.data() + i * nk, dr, dLh, a, b);
      } else {
        for (int64_t g = 0; g < G; ++g)
          std::fill(sg + (g * tq + i) * nk + a, sg + (g * tq + i) * nk + b, 0.0f);
      }
      // Exact columns: ds = dlogw for every group (s = Σ_g s_g); c_h enters as −c_h.
      for (auto [x0, x1] : {std::pair{int64_t{0}, a}, std::pair{b, rs.end}}) {
        dch -= sum_n(dr + x0, x1 - x0);
        for (int64_t g = 0; g < G; ++g) std::copy(dr + x0, dr + x1, sg + (g * tq + i) * nk + x0);
      }
      for (int64_t g = 0; g < G; ++g)
        std::fill(sg + (g * tq + i) * nk + rs.end, sg + (g * tq + i) * nk + nk, 0.0f);
    }
    // dV[keys] += Pᵀ dY; dQp_g = ds_g K_g (wide groups: GEMM; narrow: dot products of
    // ds_g rows with Kᵀ rows); dK_gᵀ += Qp_gᵀ ds_g (the group's width as the GEMM's row
    // count, so no group is a narrow output), per group's permuted columns.
    float* dqp = sized(s.dqp, tq * d);
    float* dkt = K.direct ? dkt_acc : sized(s.dkt, d * nk);
    const int64_t lddk = K.direct ? N : nk;
    if (K.direct) {
      gemm_f32(nk, Dv, tq, P, 1, nk, dyb, Dv, dvh, Dv, true);
    } else {
      float* dvb = sized(s.dvb, nk * Dv);
      gemm_f32(nk, Dv, tq, P, 1, nk, dyb, Dv, dvb, Dv, false);
      for (int64_t j = 0; j < nk; ++j) axpy(1.0f, dvb + j * Dv, dvh + K.pos[j] * Dv, Dv);
    }
    for (int64_t g = 0; g < G; ++g) {
      const int64_t o = hd.off[g], width = hd.off[g + 1] - o;
      const float* dsg = sg + g * tq * nk;
      if (width >= k_gemm_min_width) {
        gemm_f32(tq, width, nk, dsg, nk, 1, K.kb + o, d, dqp + o, d, false);
      } else {
        for (int64_t i = 0; i < tq; ++i)
          for (int64_t r = o; r < o + width; ++r)
            dqp[i * d + r] = dot(dsg + i * nk, K.kt + r * K.ldt, nk);
      }
      gemm_f32(width, nk, tq, s.qp.data() + o, 1, d, dsg, nk, dkt + o * lddk, lddk, K.direct);
    }
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t r = 0; r < d; ++r)
        dq[(bh * N + qs + i) * d + hd.perm[r]] = scale * dqp[i * d + r];
    if (!K.direct)  // the gathered keys' dKᵀ into the item's, row by row
      for (int64_t r = 0; r < d; ++r)
        for (int64_t j = 0; j < nk; ++j) dkt_acc[r * N + K.pos[j]] += dkt[r * nk + j];
  }
  for (int64_t r = 0; r < d; ++r) {  // rows of dKᵀ read in order (dkh is L2-sized)
    const float* src = dkt_acc + r * N;
    float* dst = dkh + hd.perm[r];
    for (int64_t j = 0; j < N; ++j) dst[j * d] = src[j];
  }
  dc[slot] = static_cast<float>(dch);
}

}  // namespace

void kernel_train_forward_block(const KernelTrainDims& w, const KernelTrainParams& p,
                                const KeyTables& tab, const float* q, const float* k,
                                const float* v, float* y, int64_t bh, int64_t qs, int64_t tq,
                                Scratch* scratch) {
  forward_item(w, p, tab, q, k, v, y, bh, qs, tq, *scratch);
}

void kernel_train_backward_head(const KernelTrainDims& w, const KernelTrainParams& p,
                                const KeyTables& tab, const float* q, const float* k,
                                const float* v, const float* dy, float* dq, float* dk, float* dv,
                                float* dL, float* dc, int64_t bh, int64_t part, int64_t q_begin,
                                int64_t q_end, Scratch* scratch) {
  backward_item(w, p, q, tab, k, v, dy, dq, dk, dv, dL, dc, bh, part, q_begin, q_end,
                k_kernel_train_block, *scratch);
}


}  // namespace oal::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace oal::simd {
HWY_EXPORT(kernel_train_forward_block);
HWY_EXPORT(kernel_train_backward_head);

namespace {

void check_dims(const KernelTrainDims& w, const KernelTrainParams& p) {
  check(w.batch >= 1 && w.kv_heads >= 1 && w.q_heads >= 1 && w.q_heads % w.kv_heads == 0 &&
            w.dim >= 1 && w.value_dim >= 1 && w.len >= 0 && w.sinks >= 0 && w.recent >= 0,
        kernel_train_detail::k_op,
        "inconsistent sizes: B={} Hq={} Hkv={} d={} Dv={} N={} S={} W={}", w.batch, w.q_heads,
        w.kv_heads, w.dim, w.value_dim, w.len, w.sinks, w.recent);
  check(w.kernel || w.recent >= 1, kernel_train_detail::k_op,
        "a layer without a kernel needs a window of at least 1 token");
  check(p.log_scale != nullptr, kernel_train_detail::k_op, "log_scale is missing");
  check(!w.kernel || (p.group_of && p.groups && p.L && p.n >= 2 && p.eps > 0),
        kernel_train_detail::k_op, "the kernel's groups, L (n >= 2) and eps > 0 are required");
}

// The kernel layers' key tables (KeyTables): per (batch, query head), its KV unit's keys
// in the head's permuted column order, row-major and transposed; Vᵀ per unit when
// `with_vt`. Empty for the windowed-only method (its blocks gather their few keys).
void key_tables(const KernelTrainDims& w, const KernelTrainParams& p, const float* k,
                const float* v, bool with_vt, kernel_train_detail::KeyTables& t) {
  if (!w.kernel) return;
  const int64_t d = w.dim, dv = w.value_dim, N = w.len, heads = w.batch * w.q_heads;
  t.kp.resize(static_cast<size_t>(heads * N * d));
  t.kpt.resize(static_cast<size_t>(heads * d * N));
  t.iota.resize(static_cast<size_t>(N));
  std::iota(t.iota.begin(), t.iota.end(), 0);
  parallel_items(heads, 0, [&](int64_t, int64_t bh) {
    const kernel_train_detail::Head hd = kernel_train_detail::head_setup(w, p, bh % w.q_heads);
    const float* ku = k + kernel_train_detail::kv_unit(w, bh) * N * d;
    float* kp = t.kp.data() + bh * N * d;
    float* kpt = t.kpt.data() + bh * d * N;
    for (int64_t j = 0; j < N; ++j)
      for (int64_t r = 0; r < d; ++r) kp[j * d + r] = ku[j * d + hd.perm[r]];
    for (int64_t r = 0; r < d; ++r)
      for (int64_t j = 0; j < N; ++j) kpt[r * N + j] = kp[j * d + r];
  });
  if (with_vt) {
    const int64_t units = w.batch * w.kv_heads;
    t.vt.resize(static_cast<size_t>(units * dv * N));
    for (int64_t u = 0; u < units; ++u)
      for (int64_t c = 0; c < dv; ++c)
        for (int64_t j = 0; j < N; ++j) t.vt[(u * dv + c) * N + j] = v[(u * N + j) * dv + c];
  }
}

// What a call needs besides its outputs, kept per calling thread from call to call: a
// training step calls the kernels once per layer with the same shapes, and allocating
// these tens of megabytes afresh each time cost page faults on every call.
struct Workspace {
  kernel_train_detail::KeyTables tab;
  std::vector<float> dk_s, dv_s, dL_s, dc_s;  // backward: per (part, query head) item
  std::vector<kernel_train_detail::Scratch> scratch;  // per worker

  kernel_train_detail::Scratch* scratch_for(int64_t workers) {
    if (static_cast<int64_t>(scratch.size()) < workers)
      scratch.resize(static_cast<size_t>(workers));
    return scratch.data();
  }
};

Workspace& workspace() {
  static thread_local Workspace ws;
  return ws;
}

}  // namespace

void kernel_train_forward_f32(const KernelTrainDims& w, const KernelTrainParams& p,
                              const float* q, const float* k, const float* v, float* y) {
  check_dims(w, p);
  const int64_t heads = w.batch * w.q_heads, block = k_kernel_train_block;
  const int64_t nb = (w.len + block - 1) / block;
  Workspace& ws = workspace();
  key_tables(w, p, k, v, false, ws.tab);
  kernel_train_detail::Scratch* scratch = ws.scratch_for(worker_count(heads * nb, 0));
  // Items from the last query block (the most keys) down, so the tail balances.
  parallel_items(heads * nb, 0, [&](int64_t worker, int64_t item) {
    const int64_t bh = item % heads, qs = (nb - 1 - item / heads) * block;
    HWY_DYNAMIC_DISPATCH(kernel_train_forward_block)(w, p, ws.tab, q, k, v, y, bh, qs,
                                                     std::min(block, w.len - qs), &scratch[worker]);
  });
}

void kernel_train_backward_f32(const KernelTrainDims& w, const KernelTrainParams& p,
                               const float* q, const float* k, const float* v,
                               const float* dy, float* dq, float* dk, float* dv, float* dL,
                               float* dc) {
  check_dims(w, p);
  constexpr int64_t P = k_kernel_train_parts;
  const int64_t heads = w.batch * w.q_heads, block = k_kernel_train_block;
  const int64_t N = w.len, d = w.dim, Dv = w.value_dim, n = w.kernel ? p.n : 1;
  // Query blocks split where the causal work (∝ keys per block) halves: block b sees
  // (b + 1) blocks of keys, so the first nb/√2 blocks hold about half of it.
  const int64_t nb = (N + block - 1) / block;
  const int64_t split = std::clamp<int64_t>(std::llround(nb / std::sqrt(2.0)), 0, nb) * block;
  const int64_t bounds[P + 1] = {0, std::min(split, N), N};
  Workspace& ws = workspace();
  key_tables(w, p, k, v, true, ws.tab);
  // Each (part, query head) item's key-side gradients and parameter gradients (every
  // item overwrites its own slots whole).
  ws.dk_s.resize(static_cast<size_t>(P * heads * N * d));
  ws.dv_s.resize(static_cast<size_t>(P * heads * N * Dv));
  ws.dL_s.resize(static_cast<size_t>(P * heads * n * n));
  ws.dc_s.resize(static_cast<size_t>(P * heads));
  const std::vector<float>&dk_s = ws.dk_s, &dv_s = ws.dv_s, &dL_s = ws.dL_s, &dc_s = ws.dc_s;
  kernel_train_detail::Scratch* scratch = ws.scratch_for(worker_count(heads * P, 0));
  // The later part (the more keys per block) first, so the tail balances.
  parallel_items(heads * P, 0, [&](int64_t worker, int64_t item) {
    const int64_t part = P - 1 - item / heads, bh = item % heads;
    HWY_DYNAMIC_DISPATCH(kernel_train_backward_head)
    (w, p, ws.tab, q, k, v, dy, dq, ws.dk_s.data(), ws.dv_s.data(),
     w.kernel ? ws.dL_s.data() : nullptr, ws.dc_s.data(), bh, part, bounds[part], bounds[part + 1],
     &scratch[worker]);
  });
  // Sums: over parts and each KV unit's query heads (dk, dv), over parts and the batch
  // (dL, dc).
  const int64_t group = w.q_heads / w.kv_heads, units = w.batch * w.kv_heads;
  parallel_items(units, 0, [&](int64_t, int64_t u) {
    const int64_t b = u / w.kv_heads, h0 = (u % w.kv_heads) * group;
    for (auto [out, src, width] : {std::tuple{dk, &dk_s, d}, std::tuple{dv, &dv_s, Dv}}) {
      float* o = out + u * N * width;
      std::fill(o, o + N * width, 0.0f);
      for (int64_t part = 0; part < P; ++part)
        for (int64_t h = h0; h < h0 + group; ++h) {
          const float* x = src->data() + ((part * w.batch + b) * w.q_heads + h) * N * width;
          for (int64_t i = 0; i < N * width; ++i) o[i] += x[i];
        }
    }
  });
  for (int64_t h = 0; h < w.q_heads; ++h) {
    dc[h] = 0.0f;
    if (w.kernel) std::fill(dL + h * n * n, dL + (h + 1) * n * n, 0.0f);
    for (int64_t part = 0; part < P; ++part)
      for (int64_t b = 0; b < w.batch; ++b) {
        const int64_t slot = (part * w.batch + b) * w.q_heads + h;
        dc[h] += dc_s[static_cast<size_t>(slot)];
        if (w.kernel)
          for (int64_t i = 0; i < n * n; ++i)
            dL[h * n * n + i] += dL_s[static_cast<size_t>(slot * n * n + i)];
      }
  }
}

}  // namespace oal::simd
#endif  // HWY_ONCE
