#pragma once
// A windowed layer as an AttentionMethod (window.h, windowed_reference.h for the
// formula): exact softmax weights on the sinks and the recent window, the linear
// method's kernel for every older key, one normaliser. The linear method is OAL or the
// learned global kernel (a QuadraticAttention: HD state, CPU kernels) or a feature-map
// baseline (a FeatureMapMethod: its prefix state, through ATen).
//
// Linear time, constant memory. For T new tokens after p0 absorbed ones:
//   exact part   every query against its sinks and its band of keys [i - W + 1, i]:
//                O(T (S + W) D), the row maximum subtracted (any |s| is safe); on the
//                CPU kernel (simd/window_exact.h) for fp32/bf16 inputs without autograd,
//                else as ATen ops on blocks of query rows (exact_sums.h; under
//                autograd a function that recomputes each block in the backward)
//   linear part  the key at position j enters the linear method W positions late: the
//                queries from position S + W on read the method's unnormalised sums
//                (hd_extend_parts, or feature_sums_chunked) over the keys [S, i - W],
//                continuing its HD state (or feature prefix)
//   combined     y = (e^(m - c) a + n) / (e^(m - c) z + r) with (a, z) the exact sums
//                shifted by the row max m and (n, r) the kernel's, both rescaled by the
//                larger of the two parts before adding (no overflow, no 0/0)
// The decode state holds S sink rows, a ring of the last W rows (a row leaving it is
// absorbed into the HD state or feature prefix) and that state: its bytes do not depend
// on the position.
// forward() is a fresh state's extend(), so prefill and decode are one code path.
//
// Shapes as in method.h. Compute dtype: fp64 for fp64 inputs, fp32 otherwise.
#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oal/attention/baselines/feature_method.h"
#include "oal/attention/method.h"
#include "oal/attention/oal/chunked_attention.h"
#include "oal/attention/oal/recurrent_state.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/windowed/full_heads.h"
#include "oal/attention/windowed/window.h"
#include "oal/simd/oal_decode.h"

namespace oal::attn {

// c_h of the windowed-only rule kept beside a kernel: e^-30 of an exact key's weight per
// far key, under 1e-8 of the exact part's even over 32K keys, so the layer is the
// windowed-only method at any context while keeping its kernel (and its stored form).
inline constexpr double k_window_only_log_scale = -30.0;

class WindowedAttention : public AttentionMethod {
 public:
  // base: the linear method of R (a QuadraticAttention: OAL or the learned global kernel,
  // or a FeatureMapMethod); nullptr: no linear part (the windowed-only method,
  // StreamingLLM's rule), which needs W >= 1. log_scale [Hq] (c_h; fp32 or fp64: copied
  // into a leaf that requires grad when `trainable`, else kept as given, so a graph
  // through it reaches the caller). Throws oal::Error("windowed_attention") on a bad
  // window or shape, or a base of another kind.
  WindowedAttention(std::shared_ptr<const AttentionMethod> base, Window window,
                    at::Tensor log_scale, bool trainable = false);

  // The base's name ("oal", "global", "performer", ...), or "window" without a base.
  std::string name() const override;
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k,
                     const at::Tensor& v) const override;
  std::unique_ptr<DecodeState> new_state(int64_t batch) const override;
  // name(), the window, c_h, the kept heads and the base's fingerprint.
  std::string fingerprint() const override;
  // The base's parameters and log_scale, when trainable.
  std::vector<at::Tensor> parameters() const override;

  // Replaces c_h (a stored or fitted value): [Hq] finite, else oal::Error.
  void load_log_scale(const at::Tensor& c);
  // KV heads attended exactly over every key (full_heads.h; retrieval heads), set when
  // the layer is built: forward() and new_state() replace their outputs by softmax's.
  // Throws oal::Error unless ascending without repeats.
  void set_full_heads(FullHeads heads);
  const FullHeads& full_heads() const { return full_heads_; }

  // Why the exact part cannot run on the CPU kernel whatever the inputs ("" when it
  // can): a feature-map base (ATen only), or autograd recording through c_h or L.
  std::string method_blocker() const;
  // The sinks and window exactly and the base beyond them, on the CPU kernels unless
  // method_blocker() says why not.
  PathChoice cpu_path() const override;

  const Window& window() const { return window_; }
  const at::Tensor& log_scale() const { return log_scale_; }
  const std::shared_ptr<const AttentionMethod>& base() const { return base_; }
  // The base as what it is: at most one of the two is non-null (none without a base).
  const QuadraticAttention* quadratic() const { return quadratic_; }
  const FeatureMapMethod* feature_map() const { return feature_map_; }
  int64_t q_heads() const { return log_scale_.numel(); }

 private:
  std::shared_ptr<const AttentionMethod> base_;
  const QuadraticAttention* quadratic_ = nullptr;   // base_ viewed as one, decided once
  const FeatureMapMethod* feature_map_ = nullptr;
  Window window_;
  at::Tensor log_scale_;
  bool trainable_;
  FullHeads full_heads_;
};

// log κ of a feature-map baseline beside a window, for query rows at `positions`
// (strictly increasing, in [0, T)) against all T keys: q [B, Hq, T, D], k [B, Hkv, T, D]
// -> [B, Hq, P, T] in the method's feature dtype, differentiable in its parameters.
// κ is the method's φ(q)·φ(k) as its features() computes them, with the key log-shift
// (Performer's) added back: the same κ as a WindowedAttention over it, up to rounding
// (FeatureMapMethod::log_kernel may differ by a constant per row, which a window's exact
// part does not cancel).
at::Tensor windowed_log_kappa(const FeatureMapMethod& method, const at::Tensor& q,
                              const at::Tensor& k, const std::vector<int64_t>& positions);

// The decode state of a WindowedAttention (which must outlive it).
class WindowedDecodeState : public DecodeState {
 public:
  WindowedDecodeState(const WindowedAttention& method, int64_t batch);
  at::Tensor extend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override;
  int64_t tokens() const override { return tokens_; }
  // Sinks, ring and HD state: at most S + W rows and one HD state, whatever tokens().
  int64_t state_bytes() const override;
  // "sink_k", "sink_v" [B, Hkv, min(S, tokens), D|Dv], "ring_k", "ring_v"
  // [B, Hkv, min(W, tokens - S), D|Dv] and, once keys left the ring, with a quadratic
  // base "S" (its HD state). With a feature-map base: "ring_phi" [B, Hf, ring, F] (the
  // ring rows' key features), "S" [B, Hf, F, Dv] and "z" [B, Hf, F] (its prefix,
  // feature_linear.h) once keys left the ring, and "log_shift" [B, Hf] (the key shift of
  // both) once set. None when empty.
  StateSnapshot snapshot() const override;
  void restore(const StateSnapshot& snapshot) override;

 private:
  // Whether the exact part can run on the CPU kernel (simd/window_exact.h): fp32/bf16
  // CPU inputs, fp32 rows, no autograd through them, c_h or L. "" when it can.
  std::string exact_blocker(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) const;
  // Whether one token can take the fused CPU step: exact_blocker, the window full, and
  // the kernel's inputs the fused OAL decode step takes. "" when it can.
  std::string step_blocker(const AttentionDims& s, const at::Tensor& q, const at::Tensor& k,
                           const at::Tensor& v) const;
  // A quadratic base's unnormalised sums for queries q [B, Hq, n, D] whose keys k, v
  // [B, Hkv, n, D|Dv] enter the HD state one per query (compute dtype), the state advanced.
  HdParts quadratic_sums(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);
  // A feature-map base's: features of the T new tokens q, k (compute dtype), the ring's
  // and the new non-sink keys' features pending (values pend_v), the first `absorbed` of
  // them entering the prefix for the queries from `delay` on (sums for those rows and
  // the prefix's key log-shift [B, Hq, 1] into `shift`), the rest kept as ring_phi_.
  HdParts feature_sums(const at::Tensor& q, const at::Tensor& k, int64_t new_sinks,
                       const at::Tensor& pend_v, int64_t delay, int64_t absorbed,
                       at::Tensor& shift);
  // restore()'s checked copy of a feature-map base's state.
  struct FeatureState {
    FeaturePrefix prefix;
    at::Tensor ring_phi;
  };
  FeatureState checked_features(const StateSnapshot& snapshot, int64_t ring,
                                int64_t value_dim) const;
  // The CPU step: the ring's oldest row into the HD state and its unnormalised readout
  // (oal_decode_step_f32), the new row written in its place (the ring is circular from
  // ring_head_), the exact part and the combination (window_exact_step_f32). Same numbers
  // as extend() up to fp32 summation order.
  at::Tensor step_simd(const AttentionDims& s, const at::Tensor& q, const at::Tensor& k,
                       const at::Tensor& v);

  // The ring rows in position order (ring_head_ rotated to the front).
  at::Tensor ring_in_order(const at::Tensor& ring) const;

  const WindowedAttention& method_;
  int64_t batch_;
  int64_t tokens_ = 0;
  at::Tensor sink_k_, sink_v_, ring_k_, ring_v_;  // compute dtype, created at first tokens
  // Row of ring_k_/ring_v_ holding the oldest position: 0 except after CPU steps, which
  // overwrite the oldest row in place; every other reader puts the ring back in order.
  int64_t ring_head_ = 0;
  std::optional<HdState> hd_;                      // quadratic base, once keys leave the ring
  FeaturePrefix prefix_;                           // feature-map base, likewise
  at::Tensor ring_phi_;  // its ring rows' key features [B, Hf, ring, F], at prefix_'s key shift
  std::unique_ptr<simd::OalDecodeWorkspace> ws_;   // the CPU step's, sized at its first use
  std::vector<float> leaving_;  // the CPU step's ring rows entering the HD state [B·Hkv·(D+Dv)]
};

}  // namespace oal::attn
