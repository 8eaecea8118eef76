#pragma once
// A tiny random Llama-style checkpoint for fast training tests (3 layers, hidden 16,
// 2 query heads sharing 1 KV head of dim 8, vocab 32). Deterministic for a seed.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "oal/model/weight_layout.h"
#include "oal/model/weights.h"

namespace oal::test {

inline model::ModelWeights tiny_weights(uint64_t seed = 7, int64_t layers = 3) {
  model::ModelWeights w;
  auto& c = w.config;
  c.architecture = "LlamaForCausalLM";
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_layers = layers;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 8;
  c.vocab_size = 32;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = true;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (const auto& [name, shape] : model::expected_tensor_shapes(c)) {
    at::Tensor t = at::empty(shape, at::kFloat);
    if (shape.size() == 1)
      t.fill_(1.0);
    else
      t.normal_(0.0, 0.3, gen);
    w.tensors[name] = t;
  }
  return w;
}

// Blocks [n, ctx] of token ids in [0, 32) drawn from a fixed pattern plus noise, so that
// a model can learn something in a few updates.
inline at::Tensor tiny_blocks(int64_t n, int64_t ctx, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor base = (at::arange(ctx, at::kLong) * 3) % 32;
  at::Tensor out = base.unsqueeze(0).repeat({n, 1});
  at::Tensor noise = at::empty({n, ctx}, at::kLong);
  noise.random_(0, 32, gen);
  at::Tensor mask = at::empty({n, ctx}).uniform_(0, 1, gen) < 0.2;
  return at::where(mask, noise, out);
}

}  // namespace oal::test
