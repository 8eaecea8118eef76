#pragma once
// Incremental decoding of a batch of sequences: one DecodeState per layer (a KV cache
// for softmax layers, a constant-size state for linearised ones), fed a prompt and then
// one token at a time. Runs under at::NoGradGuard.
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "oal/attention/method.h"
#include "oal/model/transformer.h"

namespace oal::generate {

class DecodeSession {
 public:
  // `model` must outlive the session; batch > 0.
  DecodeSession(const model::Transformer& model, int64_t batch);
  // tokens [B, T] following everything fed so far → logits [B, T, V] fp32 of those
  // positions (the prefill of a prompt, or T = 1 per decode step).
  at::Tensor extend(const at::Tensor& tokens);
  // Like extend, but only the last position's logits: [B, V] fp32 (saves the lm_head
  // over the whole prompt).
  at::Tensor extend_last(const at::Tensor& tokens);
  // Tokens fed so far (the next position).
  int64_t position() const;
  // Bytes held by all layer states.
  int64_t state_bytes() const;

 private:
  const model::Transformer& model_;
  std::vector<std::unique_ptr<attn::DecodeState>> states_;
};

}  // namespace oal::generate
