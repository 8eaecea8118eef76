#pragma once
// Retrieval heads kept exact beside a windowed layer (DuoAttention's split, ICLR 2025):
// the few KV heads that copy far tokens (a passkey answer reading the key; measured by
// `oal layer-scores --retrieval-probes`) attend every key with softmax and keep a KV
// cache, the layer's other heads run the windowed method. A windowed layer cannot carry
// one far token's weight through its kernel: on SmolLM2 the windowed conversions
// retrieve 0–3 of 15 passkeys, the original 11.
//
// The windowed method still runs on every head (its parameters are per query head, and
// slicing them per method is not worth the code); the kept heads' outputs are then
// replaced. So a layer with kept heads costs its windowed part plus softmax on those
// heads, and its decode state is constant except for their KV cache.
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "oal/attention/method.h"
#include "oal/attention/softmax/softmax_method.h"

namespace oal::attn {

struct FullHeads {
  std::vector<int64_t> kv;  // KV heads attended exactly, ascending, no repeats

  bool none() const { return kv.empty(); }
  // Throws oal::Error naming `op` unless the list is ascending without repeats and every
  // head is >= 0 (and < kv_heads when kv_heads > 0).
  void validate(std::string_view op, int64_t kv_heads = 0) const;
  // "0,2" (reports, fingerprints); "" when none.
  std::string describe() const;
  bool operator==(const FullHeads&) const = default;
};

// The query heads of the kept KV heads: [n·G] int64, G = q_heads / kv_heads.
at::Tensor full_query_heads(const FullHeads& heads, int64_t q_heads, int64_t kv_heads);

// y [B, Hq, T, Dv] with the kept heads' rows replaced by causal softmax attention of
// q [B, Hq, T, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv] on those heads (differentiable;
// out of place). Throws oal::Error("full_heads") when a head is >= Hkv.
at::Tensor attend_full_heads(const FullHeads& heads, const at::Tensor& y, const at::Tensor& q,
                             const at::Tensor& k, const at::Tensor& v);

// The decode state of a windowed layer with kept heads: the windowed state (every head)
// and a KV cache of the kept heads, whose outputs replace the windowed ones.
class FullHeadsDecodeState : public DecodeState {
 public:
  FullHeadsDecodeState(std::unique_ptr<DecodeState> windowed, FullHeads heads, int64_t batch);
  at::Tensor extend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override;
  void absorb(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override;
  int64_t tokens() const override { return windowed_->tokens(); }
  // The windowed state's bytes plus the kept heads' cache (grows with the tokens).
  int64_t state_bytes() const override;
  // The windowed state's tensors, and "full_k" [B, n, tokens, D], "full_v" [B, n,
  // tokens, Dv] (the kept heads' cache) once tokens were absorbed.
  StateSnapshot snapshot() const override;
  void restore(const StateSnapshot& snapshot) override;

 private:
  std::unique_ptr<DecodeState> windowed_;
  FullHeads heads_;
  SoftmaxKvCache cache_;
  int64_t batch_;
  at::Tensor q_index_, kv_index_;  // the kept heads' indices, built on the first tokens
};

}  // namespace oal::attn
