#pragma once
// One interface for every attention method (softmax, oal, global, baselines).
//
// Shapes (all row-major, causal):
//   q [B, Hq, T, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv]  ->  y [B, Hq, T, Dv]
// with Hq a multiple of Hkv (grouped-query attention: query head h reads KV head
// h / (Hq / Hkv)). dtype: fp64, fp32 or bf16 in, same dtype out; accumulation in fp32
// or wider. q and k are post-RoPE.
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "oal/attention/simd_path.h"
#include "oal/attention/state_snapshot.h"

namespace oal::attn {


// Streaming state of one method for one batch of sequences: a KV cache for softmax,
// a constant-size HD state for OAL. Absorbs tokens in order.
class DecodeState {
 public:
  virtual ~DecodeState() = default;
  // Attends T new tokens that follow everything absorbed so far, then absorbs them.
  // q [B, Hq, T, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv] -> [B, Hq, T, Dv].
  virtual at::Tensor extend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) = 0;
  // One token: q [B, Hq, D], k [B, Hkv, D], v [B, Hkv, Dv] -> [B, Hq, Dv].
  at::Tensor step(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    return extend(q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2)).squeeze(2);
  }
  // Absorbs T context tokens whose outputs are not needed (priming a decoder with a
  // prompt): shapes as extend. Default: extend() with the outputs discarded; a KV cache
  // only appends and the HD state skips its readout.
  virtual void absorb(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    extend(q, k, v);
  }
  // Tokens absorbed so far.
  virtual int64_t tokens() const = 0;
  // Bytes held by the state now (grows with tokens for a KV cache, constant for HD).
  virtual int64_t state_bytes() const = 0;
  // The contents as copies; restore() on a fresh state of the same method and batch
  // gives a state that continues exactly as this one would.
  virtual StateSnapshot snapshot() const = 0;
  // Loads a snapshot into this state, which must be empty (fresh from new_state). Throws
  // oal::Error naming what does not fit (tensor names, shapes, dtypes, token count).
  virtual void restore(const StateSnapshot& snapshot) = 0;
};

class AttentionMethod {
 public:
  virtual ~AttentionMethod() = default;
  // Short stable name: "softmax", "oal", "global", "taylorshift", "performer", ...
  virtual std::string name() const = 0;
  // Causal attention over whole sequences (see shapes above). Differentiable with
  // respect to q, k, v and parameters() where the method supports autograd.
  virtual at::Tensor forward(const at::Tensor& q, const at::Tensor& k,
                             const at::Tensor& v) const = 0;
  // An empty streaming state for `batch` sequences.
  virtual std::unique_ptr<DecodeState> new_state(int64_t batch) const = 0;
  // Differs between two methods whose decode states are not interchangeable: name() by
  // default; kernel-backed methods add a hash of their coefficients (oal serve refuses a
  // saved state made under another model's attention).
  virtual std::string fingerprint() const { return name(); }
  // Trainable parameters (tensors with requires_grad); empty for fixed methods.
  virtual std::vector<at::Tensor> parameters() const { return {}; }
  // The path forward() and the decode states take for inference inputs (simd_path.h),
  // from what the method holds. Default: a method with no SIMD code.
  virtual PathChoice cpu_path() const {
    return {false, "ATen", "the method has no SIMD code (" + name() + ")"};
  }
};

}  // namespace oal::attn
