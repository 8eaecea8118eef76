#include "oal/kernels/cpu/oal_decode.h"

#include <algorithm>
#include <cmath>

#include "oal/core/error.h"
#include "oal/kernels/cpu/isa.h"
#include "oal/kernels/cpu/parallel.h"
#include "oal/kernels/cpu/simd_avx512.h"

namespace oal::kernels::cpu {
namespace {

constexpr const char* k_op = "oal_decode_kernel";

// Arguments of the fused pass over one KV head's state rows.
struct Pass {
  int64_t df, ld, dv, group, group_pad;
  float* S;            // [Df, ld]
  const float* phik;   // [Df]
  const float* v;      // [Dv]
  const float* phiq_t; // [Df, group_pad]
  float* acc;          // [group, Dv + 1]
};

void pass_scalar(const Pass& p) {
  std::fill(p.acc, p.acc + p.group * (p.dv + 1), 0.0f);
  for (int64_t f = 0; f < p.df; ++f) {
    float* row = p.S + f * p.ld;
    const float kf = p.phik[f];
    for (int64_t c = 0; c < p.dv; ++c) row[c] += kf * p.v[c];
    row[p.dv] += kf;
    const float* pq = p.phiq_t + f * p.group_pad;
    for (int64_t h = 0; h < p.group; ++h) {
      float* a = p.acc + h * (p.dv + 1);
      for (int64_t c = 0; c <= p.dv; ++c) a[c] += pq[h] * row[c];
    }
  }
}

// Columns [c0, c0 + 16 NV) of heads [h0, h0 + HB); `update` adds the token to those
// columns (done on the first head block only), `den` also handles column Dv.
template <int HB, int NV>
OAL_AVX512 void pass_block(const Pass& p, int64_t h0, int64_t c0, __mmask16 last, bool update,
                           bool den) {
  __m512 acc[HB][NV];
  __m512 vv[NV];
#pragma GCC unroll 8
  for (int h = 0; h < HB; ++h)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[h][j] = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j)
    vv[j] = _mm512_maskz_loadu_ps(j == NV - 1 ? last : __mmask16(0xFFFF), p.v + c0 + 16 * j);
  const __mmask16 hmask = simd::lane_mask(p.group - h0);
  __m512 dacc = _mm512_setzero_ps();
  for (int64_t f = 0; f < p.df; ++f) {
    float* row = p.S + f * p.ld;
    const float* pq = p.phiq_t + f * p.group_pad + h0;
    __m512 sv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      const __mmask16 mk = j == NV - 1 ? last : __mmask16(0xFFFF);
      sv[j] = _mm512_maskz_loadu_ps(mk, row + c0 + 16 * j);
      if (update) {
        sv[j] = _mm512_fmadd_ps(_mm512_set1_ps(p.phik[f]), vv[j], sv[j]);
        _mm512_mask_storeu_ps(row + c0 + 16 * j, mk, sv[j]);
      }
    }
    if (den) {
      if (update) row[p.dv] += p.phik[f];
      dacc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(hmask, pq), _mm512_set1_ps(row[p.dv]), dacc);
    }
#pragma GCC unroll 8
    for (int h = 0; h < HB; ++h) {
      const __m512 a = _mm512_set1_ps(pq[h]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[h][j] = _mm512_fmadd_ps(a, sv[j], acc[h][j]);
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < HB; ++h)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      _mm512_mask_storeu_ps(p.acc + (h0 + h) * (p.dv + 1) + c0 + 16 * j,
                            j == NV - 1 ? last : __mmask16(0xFFFF), acc[h][j]);
  if (den) {
    alignas(64) float d[16];
    _mm512_store_ps(d, dacc);
    for (int64_t h = 0; h < std::min<int64_t>(16, p.group - h0); ++h)
      p.acc[(h0 + h) * (p.dv + 1) + p.dv] = d[h];
  }
}

using BlockFn = void (*)(const Pass&, int64_t, int64_t, __mmask16, bool, bool);

template <int HB>
BlockFn block_for(int nv) {
  switch (nv) {
    case 1: return &pass_block<HB, 1>;
    case 2: return &pass_block<HB, 2>;
    case 3: return &pass_block<HB, 3>;
    default: return &pass_block<HB, 4>;
  }
}

BlockFn pick_block(int hb, int nv) {
  switch (hb) {
    case 1: return block_for<1>(nv);
    case 2: return block_for<2>(nv);
    case 3: return block_for<3>(nv);
    case 4: return block_for<4>(nv);
    case 5: return block_for<5>(nv);
    case 6: return block_for<6>(nv);
    default: return block_for<7>(nv);
  }
}

void pass_avx512(const Pass& p) {
  constexpr int64_t k_heads = 7;  // 7 heads x 4 vectors = 28 accumulators of 32 zmm
  for (int64_t c0 = 0; c0 < p.dv; c0 += 64) {
    const int64_t nc = std::min<int64_t>(64, p.dv - c0);
    const int nv = static_cast<int>((nc + 15) / 16);
    const __mmask16 last = simd::lane_mask(nc - 16 * (nv - 1));
    for (int64_t h0 = 0; h0 < p.group; h0 += k_heads) {
      const int hb = static_cast<int>(std::min(k_heads, p.group - h0));
      // Column Dv (denominators) rides along with the first column block, 16 heads at a
      // time; more than 16 heads per KV head take an extra den-only block below.
      const bool den = c0 == 0 && h0 % 16 == 0;
      pick_block(hb, nv)(p, h0, c0, last, h0 == 0, den);
    }
  }
  for (int64_t h = 16; h < p.group; ++h) {  // denominators beyond the first 16 heads
    float s = 0;
    for (int64_t f = 0; f < p.df; ++f) s += p.phiq_t[f * p.group_pad + h] * p.S[f * p.ld + p.dv];
    p.acc[h * (p.dv + 1) + p.dv] = s;
  }
}

}  // namespace

OalDecodeWorkspace::OalDecodeWorkspace(int64_t batch, int64_t kv_heads, int64_t group,
                                       int64_t dim, int64_t value_dim)
    : batch_(batch),
      kv_heads_(kv_heads),
      group_(group),
      dim_(dim),
      value_dim_(value_dim),
      feature_dim_(oal_feature_dim(dim)),
      group_pad_((group + 15) / 16 * 16) {
  check(batch >= 1 && kv_heads >= 1 && group >= 1 && dim >= 1 && value_dim >= 1, k_op,
        "workspace: expected positive sizes, got B={} Hkv={} group={} d={} Dv={}", batch,
        kv_heads, group, dim, value_dim);
  const int64_t units = batch * kv_heads;
  phiq_t_.assign(static_cast<size_t>(units * feature_dim_ * group_pad_), 0.0f);
  phik_.assign(static_cast<size_t>(units * feature_dim_), 0.0f);
  acc_.assign(static_cast<size_t>(units * group * (value_dim + 1)), 0.0f);
}

void oal_decode_step_f32(const OalPlan& plan, int64_t kv_heads, const float* q, const float* k,
                         const float* v, float* y, float* state, OalDecodeWorkspace& ws,
                         int threads) {
  check(ws.kv_heads() == kv_heads && ws.group() * kv_heads == plan.q_heads &&
            ws.dim() == plan.dim,
        k_op, "workspace for Hkv={} group={} d={} does not match Hkv={} Hq={} d={}",
        ws.kv_heads(), ws.group(), ws.dim(), kv_heads, plan.q_heads, plan.dim);
  const int64_t d = plan.dim, dv = ws.value_dim(), df = plan.feature_dim();
  const int64_t group = ws.group(), gp = ws.group_pad(), units = ws.batch() * kv_heads;
  const bool avx = active_isa() == Isa::avx512;
  parallel_items(units, threads, [&](int64_t, int64_t u) {
    const int64_t b = u / kv_heads, h0 = (u % kv_heads) * group;
    float* pq = ws.phiq_t(u);
    float* pk = ws.phik(u);
    oal_monomials(k + u * d, d, pk);
    // phiQ of each query head into column h of phiQᵀ (the pass broadcasts row f).
    for (int64_t h = 0; h < group; ++h) {
      const float* qh = q + (b * plan.q_heads + h0 + h) * d;
      const float* coef = plan.coef_of(h0 + h);
      pq[h] = coef[0];
      for (int64_t r = 0; r < d; ++r) pq[(1 + r) * gp + h] = coef[1 + r] * qh[r];
      int64_t f = 1 + d;
      for (int64_t r = 0; r < d; ++r)
        for (int64_t t = r; t < d; ++t, ++f) pq[f * gp + h] = coef[f] * (qh[r] * qh[t]);
    }
    const Pass p{df, dv + 1, dv, group, gp, state + u * df * (dv + 1), pk, v + u * dv, pq,
                 ws.acc(u)};
    if (avx)
      pass_avx512(p);
    else
      pass_scalar(p);
    for (int64_t h = 0; h < group; ++h) {
      const float* a = ws.acc(u) + h * (dv + 1);
      const float den = a[dv];
      if (!(den > 0.0f) || !std::isfinite(den))
        fail(k_op, "readout denominator not positive ({}) at query head {}: expected > 0", den, h0 + h);
      float* yh = y + (b * plan.q_heads + h0 + h) * dv;
      for (int64_t c = 0; c < dv; ++c) yh[c] = a[c] / den;
    }
  });
}

}  // namespace oal::kernels::cpu
