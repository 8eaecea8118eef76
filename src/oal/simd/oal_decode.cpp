// Fused OAL decode step, compiled once per SIMD target (Highway foreach_target).
#include "oal/simd/simd_config.h"
// (simd_config.h first: it selects the targets foreach_target.h compiles.)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "oal/simd/oal_decode.cpp"
#include <hwy/foreach_target.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>

#include "oal/core/error.h"
#include "oal/simd/oal_decode.h"
#include "oal/simd/parallel.h"
#include "oal/simd/simd_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace oal::simd::HWY_NAMESPACE {
namespace {

// Arguments of the fused pass over one KV head's state rows.
struct Pass {
  int64_t df, ld, dv, group, group_pad;
  float* S;             // [Df, ld]
  const float* phik;    // [Df]
  const float* v;       // [Dv]
  const float* phiq_t;  // [Df, group_pad]
  float* acc;           // [group, Dv + 1]
};

// Register tile: HB heads x NV vectors of state columns (+ NV value vectors, one
// broadcast and the heads-in-lanes denominator accumulator): 7·4+4+2 = 34 ≈ 32 on
// AVX-512 (the compiler keeps the value vectors in memory operands), 7·1+1+3 = 11 of
// 16 on AVX2.
constexpr int k_nv = k_vector_registers >= 32 ? 4 : 1;
constexpr int64_t k_heads = 7;

// Columns [c0, c0 + NV·lanes) of heads [h0, h0 + HB); `update` adds the token to those
// columns (done on the first head block only), `den` also handles column Dv for heads
// [0, min(group, lanes)) (their phiQ values lie in one vector of a phiQᵀ row).
template <int HB, int NV>
void pass_block(const Pass& p, int64_t h0, int64_t c0, int64_t last, bool update, bool den) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  VF acc[HB][NV];
  VF vv[NV];
  #pragma GCC unroll 8
  for (int h = 0; h < HB; ++h)
    #pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[h][j] = hn::Zero(d);
  #pragma GCC unroll 8
  for (int j = 0; j < NV; ++j)
    vv[j] = j == NV - 1 ? load_n(d, p.v + c0 + L * j, last) : hn::LoadU(d, p.v + c0 + L * j);
  VF dacc = hn::Zero(d);
  for (int64_t f = 0; f < p.df; ++f) {
    float* row = p.S + f * p.ld;
    const float* pq = p.phiq_t + f * p.group_pad;
    VF sv[NV];
    #pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      float* sp = row + c0 + L * j;
      const bool tail = j == NV - 1;
      sv[j] = tail ? load_n(d, sp, last) : hn::LoadU(d, sp);
      if (update) {
        sv[j] = hn::MulAdd(hn::Set(d, p.phik[f]), vv[j], sv[j]);
        if (tail)
          store_n(sv[j], d, sp, last);
        else
          hn::StoreU(sv[j], d, sp);
      }
    }
    if (den) {
      if (update) row[p.dv] += p.phik[f];
      dacc = hn::MulAdd(load_n(d, pq, p.group), hn::Set(d, row[p.dv]), dacc);
    }
    #pragma GCC unroll 8
    for (int h = 0; h < HB; ++h) {
      const VF a = hn::Set(d, pq[h0 + h]);
      #pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[h][j] = hn::MulAdd(a, sv[j], acc[h][j]);
    }
  }
  #pragma GCC unroll 8
  for (int h = 0; h < HB; ++h)
    #pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      float* out = p.acc + (h0 + h) * (p.dv + 1) + c0 + L * j;
      if (j == NV - 1)
        store_n(acc[h][j], d, out, last);
      else
        hn::StoreU(acc[h][j], d, out);
    }
  if (den) {
    HWY_ALIGN float dl[hn::MaxLanes(DF())];
    hn::Store(dacc, d, dl);
    for (int64_t h = 0; h < std::min(L, p.group); ++h) p.acc[h * (p.dv + 1) + p.dv] = dl[h];
  }
}

using BlockFn = void (*)(const Pass&, int64_t, int64_t, int64_t, bool, bool);

template <int HB>
BlockFn block_for(int nv) {
  if constexpr (k_nv >= 4) {
    if (nv >= 4) return &pass_block<HB, 4>;
    if (nv == 3) return &pass_block<HB, 3>;
    if (nv == 2) return &pass_block<HB, 2>;
  }
  return &pass_block<HB, 1>;
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

// Update + readout of one KV head: every row of S is loaded once per head block.
void fused_pass(const Pass& p) {
  const int64_t L = static_cast<int64_t>(hn::Lanes(DF()));
  const int64_t width = L * k_nv;
  for (int64_t c0 = 0; c0 < p.dv; c0 += width) {
    const int64_t nc = std::min(width, p.dv - c0);
    const int nv = static_cast<int>((nc + L - 1) / L);
    for (int64_t h0 = 0; h0 < p.group; h0 += k_heads) {
      const int hb = static_cast<int>(std::min(k_heads, p.group - h0));
      pick_block(hb, nv)(p, h0, c0, nc - L * (nv - 1), h0 == 0, c0 == 0 && h0 == 0);
    }
  }
  for (int64_t h = L; h < p.group; ++h) {  // denominators of heads past the first vector
    float s = 0;
    for (int64_t f = 0; f < p.df; ++f) s += p.phiq_t[f * p.group_pad + h] * p.S[f * p.ld + p.dv];
    p.acc[h * (p.dv + 1) + p.dv] = s;
  }
}

}  // namespace

// One decode step for KV head unit u (batch-major): features, fused pass, outputs.
void decode_unit(const OalPlan& plan, int64_t kv_heads, const float* q, const float* k,
                 const float* v, float* y, float* state, OalDecodeWorkspace& ws, float* sums,
                 int64_t u) {
  const int64_t d = plan.dim, dv = ws.value_dim(), df = plan.feature_dim();
  const int64_t group = ws.group(), gp = ws.group_pad();
  const int64_t b = u / kv_heads, h0 = (u % kv_heads) * group;
  float* pq = ws.phiq_t(u);
  float* pk = ws.phik(u);
  monomials(k + u * d, d, pk);
  // phiQ of each query head into column h of phiQᵀ (the pass broadcasts row f): built
  // as a row, then scattered into the column.
  float* row = ws.qrow(u);
  for (int64_t h = 0; h < group; ++h) {
    query_features(q + (b * plan.q_heads + h0 + h) * d, d, plan.coef_of(h0 + h), row);
    for (int64_t f = 0; f < df; ++f) pq[f * gp + h] = row[f];
  }
  const Pass p{df, dv + 1, dv, group, gp, state + u * df * (dv + 1), pk, v + u * dv, pq, ws.acc(u)};
  fused_pass(p);
  for (int64_t h = 0; h < group; ++h) {
    const float* a = ws.acc(u) + h * (dv + 1);
    const float den = a[dv];
    if (!(den > 0.0f) || !std::isfinite(den))
      fail("oal_decode_kernel",
           "readout denominator not positive ({}) at query head {}: expected > 0", den, h0 + h);
    if (sums != nullptr)
      std::copy(a, a + dv + 1, sums + (b * plan.q_heads + h0 + h) * (dv + 1));
    else
      scaled_product(1.0f / den, a, nullptr, y + (b * plan.q_heads + h0 + h) * dv, dv);
  }
}

}  // namespace oal::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace oal::simd {
HWY_EXPORT(decode_unit);

namespace {
constexpr const char* k_op = "oal_decode_kernel";
}

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
  qrow_.assign(static_cast<size_t>(units * feature_dim_), 0.0f);
  acc_.assign(static_cast<size_t>(units * group * (value_dim + 1)), 0.0f);
}

void oal_decode_step_f32(const OalPlan& plan, int64_t kv_heads, const float* q, const float* k,
                         const float* v, float* y, float* state, OalDecodeWorkspace& ws,
                         int threads, float* sums) {
  check(ws.kv_heads() == kv_heads && ws.group() * kv_heads == plan.q_heads &&
            ws.dim() == plan.dim,
        k_op, "workspace for Hkv={} group={} d={} does not match Hkv={} Hq={} d={}",
        ws.kv_heads(), ws.group(), ws.dim(), kv_heads, plan.q_heads, plan.dim);
  parallel_items(ws.batch() * kv_heads, threads, [&](int64_t, int64_t u) {
    HWY_DYNAMIC_DISPATCH(decode_unit)(plan, kv_heads, q, k, v, y, state, ws, sums, u);
  });
}

}  // namespace oal::simd
#endif  // HWY_ONCE
