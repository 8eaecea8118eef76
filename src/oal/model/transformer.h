#pragma once
// Decoder-only Llama / Qwen2 transformer built from a loaded checkpoint (ModelWeights):
//
//   x = embed[tokens]
//   per layer:  h = RMSNorm(x);  q, k, v = h Wqᵀ(+bq), h Wkᵀ(+bk), h Wvᵀ(+bv)
//               q, k = RoPE(q, k);  y = attention(q, k, v)  (the layer's AttentionMethod)
//               x = x + y Woᵀ;  h = RMSNorm(x);  x = x + W_down(silu(W_gate h) ⊙ W_up h)
//   logits = RMSNorm(x) W_lmᵀ   (W_lm = embed when embeddings are tied)
//
// Computation is fp32 whatever the checkpoint dtype (fp32, bf16, fp16, ggml blocks). Every
// projection is one GEMM over all B·T tokens (at::linear). The forward itself does not disable
// autograd, so a caller that makes parameters trainable (LoRA, kernel coefficients) can
// backpropagate through it; inference entry points (generate, perplexity, capture) use
// at::NoGradGuard.
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "oal/attention/method.h"
#include "oal/attention/softmax/softmax_method.h"
#include "oal/model/config.h"
#include "oal/model/linear.h"
#include "oal/model/rope.h"
#include "oal/model/weight_format.h"
#include "oal/model/weights.h"

namespace oal::model {

struct TransformerOptions {
  // How projection and embedding weights are held (weight_format.h): by default
  // quantized ones as stored (GGUF) and float ones widened to fp32 once (4 bytes/param);
  // `stored` keeps bf16/fp16 as loaded (2 bytes/param) and widens each just before its
  // GEMM (exact, slower); `q8_0` converts to 8.5 bits per weight.
  WeightFormat weights = WeightFormat::automatic;
  // Decode steps (one token per row, no autograd, kernel-ready weights) run each layer
  // on raw rows (decode_layer.h) instead of tensor operations; false keeps the tensor
  // layer everywhere — the reference the tests compare the row path with.
  bool rowwise_decode = true;
  // The KV cache of the softmax layers (the original model's, and a hybrid's kept ones):
  // fp32 (exact) or f16 (half the memory per cached token, as llama.cpp keeps it).
  attn::KvCacheType kv_cache = attn::KvCacheType::f32;
  // extend_hidden runs inputs longer than this many tokens in consecutive ubatches, each
  // through every layer before the next (as llama.cpp runs a prompt), so a prefill's
  // activations are O(ubatch) tokens while the states carry the context; 0 = all at once.
  // The result is the same function (fp32 summation order aside).
  int64_t ubatch = 0;
  // How decode passes multiply Q8_0/Q4_0/Q4_1 weights (simd/linear_quant.h): every
  // projection and the lm_head are built with it.
  simd::QuantDot quant_dot = simd::QuantDot::dequant;
  // Training (hidden_states under autograd): each layer checkpointed (layer_checkpoint.h)
  // — only its input kept, the layer run again in the backward: activation memory of one
  // layer instead of all of them, for one more forward pass.
  bool checkpoint_layers = false;
};

// Weights of one decoder layer (HF names in comments).
struct TransformerLayer {
  at::Tensor attn_norm;  // input_layernorm.weight [hidden] fp32
  at::Tensor mlp_norm;   // post_attention_layernorm.weight [hidden] fp32
  Linear q_proj;         // self_attn.q_proj [Hq*D, hidden] (+bias [Hq*D] for Qwen2)
  Linear k_proj;         // self_attn.k_proj [Hkv*D, hidden] (+bias)
  Linear v_proj;         // self_attn.v_proj [Hkv*D, hidden] (+bias)
  Linear o_proj;         // self_attn.o_proj [hidden, Hq*D]
  Linear gate_proj;      // mlp.gate_proj [intermediate, hidden]
  Linear up_proj;        // mlp.up_proj [intermediate, hidden]
  Linear down_proj;      // mlp.down_proj [hidden, intermediate]
  std::shared_ptr<attn::AttentionMethod> attention;  // SoftmaxAttention by default
};

// Receives intermediate tensors of chosen layers during a forward (capture, analysis).
// Tensors are fp32 and may be views; copy what you keep beyond the call.
class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  // Whether the forward should report layer `layer` at all.
  virtual bool wants(int64_t layer) const = 0;
  // q [B, Hq, T, D] and k [B, Hkv, T, D] post-RoPE, v [B, Hkv, T, D], the attention
  // output per head before W_o: head_out [B, Hq, T, D].
  virtual void attention(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                         const at::Tensor& v, const at::Tensor& head_out) {}
  // Residual stream after the whole layer (attention and MLP): [B, T, hidden].
  virtual void layer_output(int64_t layer, const at::Tensor& x) {}
};

class Transformer {
 public:
  // Validates that every expected tensor exists with the shape the config implies
  // (oal::Error "[transformer] ..." naming the tensor otherwise) and converts weights.
  explicit Transformer(const ModelWeights& weights, TransformerOptions options = {});

  const ModelConfig& config() const { return config_; }
  const TransformerOptions& options() const { return options_; }
  const Rope& rope() const { return rope_; }
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  // Parameter count and bytes held by the weights as stored now.
  int64_t num_parameters() const;
  int64_t weight_bytes() const;

  // Per-layer weights, mutable so that adapters can be attached (Linear::delta).
  TransformerLayer& layer(int64_t i);
  const TransformerLayer& layer(int64_t i) const;
  // The token embedding [V, hidden] (dense or quantized, as the options hold it).
  const Linear& embed_tokens() const { return embed_; }
  const Linear& lm_head() const { return lm_head_; }  // [V, hidden], tied → embed
  // Rows idx [n] int64 of the embedding as fp32 [n, hidden] on the model's device.
  at::Tensor embedding_rows(const at::Tensor& idx) const;
  at::Device device() const;

  // Replaces layer `layer`'s attention (e.g. by an OAL method); method must be non-null.
  void set_attention(int64_t layer, std::shared_ptr<attn::AttentionMethod> method);
  const attn::AttentionMethod& attention(int64_t layer) const;

  // tokens [B, T] int64 (values in [0, vocab)) → logits [B, T, V] fp32, causal over each
  // row, positions 0..T-1.
  at::Tensor forward(const at::Tensor& tokens, ForwardObserver* observer = nullptr) const;

  // Final-normed hidden states [B, T, hidden] fp32 (forward without the lm_head), so
  // that callers can apply the lm_head to a few positions at a time.
  at::Tensor hidden_states(const at::Tensor& tokens, ForwardObserver* observer = nullptr) const;
  // One decoder layer over whole sequences (positions 0..T-1, no state): x [B, T, hidden]
  // fp32 → [B, T, hidden].
  at::Tensor layer(int64_t i, const at::Tensor& x) const;
  // Runs tokens [B, T] through layers 0..deepest only, where deepest is the last layer
  // observer->wants(): capture and analysis need nothing past it (a 24-layer model
  // captured at layer 4 runs 5 layers). No outputs; everything reaches the observer.
  void observe(const at::Tensor& tokens, ForwardObserver& observer) const;
  // h [..., hidden] fp32 → logits [..., V] fp32.
  at::Tensor logits(const at::Tensor& h) const { return lm_head_.forward(h); }

  // Streaming: one DecodeState per layer from its method's new_state(batch).
  std::vector<std::unique_ptr<attn::DecodeState>> new_states(int64_t batch) const;
  // tokens [B, T] that follow the states' n absorbed tokens (positions n..n+T-1) →
  // final-normed hidden states [B, T, hidden]; the states absorb the tokens (in
  // ubatches of options().ubatch tokens when T is longer).
  at::Tensor extend_hidden(const at::Tensor& tokens,
                           std::vector<std::unique_ptr<attn::DecodeState>>& states) const;
  // One step of R independent sequences at their own lengths (a server's continuous
  // batch): row r reads tokens[r] ([T_r] int64, T_r >= 1; one token for a decoding
  // sequence, a piece of the prompt for one still reading it) into rows[r], its layer
  // states (from new_states(1)) → final-normed hidden states of each row's last token
  // [R, hidden]. Projections and MLP run as one GEMM over all ΣT_r tokens (the weights
  // are read once per step); each row attends through its own states. Equal to R
  // extend_hidden calls (fp32 summation order aside).
  using LayerStates = std::vector<std::unique_ptr<attn::DecodeState>>;
  at::Tensor extend_rows(const std::vector<at::Tensor>& tokens,
                         const std::vector<LayerStates*>& rows) const;

 private:
  // extend_hidden on one ubatch: every layer on all of `tokens`.
  at::Tensor extend_once(const at::Tensor& tokens,
                         std::vector<std::unique_ptr<attn::DecodeState>>& states) const;
  // One decoder layer on x [B, T, hidden]; `state` null → whole-sequence attention.
  at::Tensor layer_forward(int64_t i, const at::Tensor& x, int64_t offset,
                           attn::DecodeState* state, ForwardObserver* observer) const;
  // Where extend_rows' rows lie in its ΣT_r tokens: row r is tokens
  // [starts[r], starts[r + 1]); positions[m] is token m's position in its sequence.
  struct RowSpans {
    std::vector<int64_t> starts;     // R + 1 offsets, starts[0] = 0
    std::vector<int64_t> positions;  // ΣT_r
  };
  // extend_rows' layer i: x [ΣT_r, 1, hidden].
  at::Tensor layer_rows(int64_t i, const at::Tensor& x, const RowSpans& spans,
                        const std::vector<LayerStates*>& rows) const;
  // The layer's residual after attention: x + y Woᵀ, then the MLP block; x [B, T, hidden],
  // y [B, Hq, T, D] (attention output per head).
  at::Tensor finish_layer(const TransformerLayer& L, const at::Tensor& x,
                          const at::Tensor& y) const;
  at::Tensor embed(const at::Tensor& tokens, int64_t offset) const;
  // Whether decode steps of layer L on x take the row path (decode_layer.h).
  bool rowwise(const TransformerLayer& L, const at::Tensor& x) const;

  ModelConfig config_;
  TransformerOptions options_;
  Rope rope_;
  Linear embed_;         // [V, hidden] (only weight or quant is used: a lookup table)
  at::Tensor final_norm_;  // [hidden] fp32
  Linear lm_head_;
  std::vector<TransformerLayer> layers_;
};

// RMSNorm as in HF Llama: x / sqrt(mean(x², -1) + eps) * weight; x [..., H] fp32.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

}  // namespace oal::model
