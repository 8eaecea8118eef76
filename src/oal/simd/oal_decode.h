#pragma once
// One OAL decode step on the CPU: absorb one token into the HD state and read it out for
// every query head, in place, without allocating (paper Eq. 5-6; state layout
// attention/oal/recurrent_state.h).
#include <cstdint>
#include <vector>

#include "oal/simd/oal_plan.h"

namespace oal::simd {

// Buffers one step needs, sized once for (batch, Hkv, group = Hq/Hkv, d, Dv).
class OalDecodeWorkspace {
 public:
  OalDecodeWorkspace(int64_t batch, int64_t kv_heads, int64_t group, int64_t dim,
                     int64_t value_dim);
  int64_t batch() const { return batch_; }
  int64_t kv_heads() const { return kv_heads_; }
  int64_t group() const { return group_; }
  int64_t dim() const { return dim_; }
  int64_t value_dim() const { return value_dim_; }
  // Per KV head: phiQᵀ [Df, group_pad], phiK [Df], a phiQ row [Df], accumulators
  // [group, Dv + 1].
  float* phiq_t(int64_t unit) { return phiq_t_.data() + unit * feature_dim_ * group_pad_; }
  float* phik(int64_t unit) { return phik_.data() + unit * feature_dim_; }
  // One query head's phiQ row [Df] while it is built.
  float* qrow(int64_t unit) { return qrow_.data() + unit * feature_dim_; }
  float* acc(int64_t unit) { return acc_.data() + unit * group_ * (value_dim_ + 1); }
  int64_t group_pad() const { return group_pad_; }

 private:
  int64_t batch_, kv_heads_, group_, dim_, value_dim_, feature_dim_, group_pad_;
  std::vector<float> phiq_t_, phik_, qrow_, acc_;
};

// q [B, Hq, d], k [B, Hkv, d], v [B, Hkv, Dv] -> y [B, Hq, Dv], fp32 contiguous;
// state [B, Hkv, Df, Dv+1] fp32 (attention/oal/recurrent_state.h layout), updated in place:
//   S += phiK(k) [v; 1]ᵀ,  then  y_h = (phiQ_h(q_h) · S)[:Dv] / (phiQ_h(q_h) · S)[Dv].
// One fused pass over each KV head's state rows does the update and all its query
// heads' readouts (the state is read once per token). KV heads run in parallel.
// Throws oal::Error("oal_decode_kernel") when the workspace does not match or a
// denominator is not positive and finite. With `sums` ([B, Hq, Dv + 1]) the readout is
// left unnormalised there (numerators, then the denominator) and y may be nullptr: the
// windowed decode step (window_exact.h) adds its exact part first.
void oal_decode_step_f32(const OalPlan& plan, int64_t kv_heads, const float* q, const float* k,
                         const float* v, float* y, float* state, OalDecodeWorkspace& ws,
                         int threads = 0, float* sums = nullptr);

}  // namespace oal::simd
