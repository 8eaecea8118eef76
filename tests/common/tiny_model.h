#pragma once
// The small models of the tests, in one place: tiny_weights (a hand-built random
// Llama-style checkpoint for fast training, serving and evaluation tests) and the
// library's synthetic models at the size the transformer and decode-path tests use
// (small_synthetic), with deterministic token ids to feed them.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "oal/fixtures/synthetic.h"
#include "oal/formats/load.h"
#include "oal/formats/weight_layout.h"
#include "oal/model/weights.h"

namespace oal::test {

// 3 layers (or `layers`), hidden 16, 2 query heads sharing 1 KV head of dim 8, vocab 32.
// Deterministic for a seed.
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
  for (const auto& [name, shape] : formats::expected_tensor_shapes(c)) {
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

// Writes a synthetic HF checkpoint and loads it back through the real loader.
inline oal::model::ModelWeights synthetic_checkpoint(const oal::fixtures::SyntheticOptions& o,
                                                     const std::string& tag) {
  const auto dir = make_temp_dir("model_" + tag);
  oal::fixtures::write_synthetic_model(dir, o);
  return oal::formats::load_model(dir.string());
}

// The small two-layer model of the transformer and decode-path tests: hidden 64, 4 query
// / 2 KV heads of dim 16, planted outlier pairs of scale 4 (so attention is not flat).
inline oal::fixtures::SyntheticOptions small_synthetic(oal::fixtures::SyntheticArch arch,
                                                       uint64_t seed) {
  oal::fixtures::SyntheticOptions o;
  o.architecture = arch;
  o.hidden_size = 64;
  o.intermediate_size = 96;
  o.num_layers = 2;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.max_position_embeddings = 128;
  o.planted_scale = 4.0;
  o.seed = seed;
  return o;
}

// Deterministic token ids in [0, vocab): [rows, len] int64.
inline at::Tensor test_tokens(int64_t rows, int64_t len, int64_t vocab, uint64_t seed = 1) {
  std::vector<int64_t> ids(rows * len);
  uint64_t s = seed;
  for (auto& id : ids) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int64_t>((s >> 33) % static_cast<uint64_t>(vocab));
  }
  return at::tensor(ids, at::kLong).view({rows, len});
}

inline std::vector<int64_t> row(const at::Tensor& tokens, int64_t r) {
  at::Tensor t = tokens[r].contiguous();
  return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()};
}

}  // namespace oal::test
