// Models from GGUF files: the config read from llama.cpp's metadata keys, llama's Q/K
// row permutation undone (checked by hand on a 4-row head and by a round trip through
// the writer, where the loaded model must give the original's logits exactly), and
// metadata errors that name the key.
#include <gtest/gtest.h>

#include "common/temp_dir.h"
#include "common/tiny_model.h"
#include "oal/core/error.h"
#include "oal/io/gguf_quants.h"
#include "oal/model/gguf_export.h"
#include "oal/model/gguf_model.h"
#include "oal/model/load.h"
#include "oal/model/synthetic.h"
#include "oal/model/transformer.h"

using namespace oal;

namespace {
constexpr uint32_t k_f32 = static_cast<uint32_t>(io::GgmlType::F32);
constexpr uint32_t k_f16 = static_cast<uint32_t>(io::GgmlType::F16);

std::string load_error(const std::filesystem::path& p) {
  try {
    model::load_model(p.string());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(GgufModel, UnpermuteRestoresHfRowOrderByHand) {
  // One head of d = 4. HF rows h0..h3 pair (h0, h2) and (h1, h3) for RoPE; llama.cpp
  // stores row 2i + p = HF row p·2 + i, i.e. the file holds h0, h2, h1, h3.
  const at::Tensor file_rows = at::tensor({0.f, 2.f, 1.f, 3.f}).unsqueeze(1);
  const at::Tensor hf = model::unpermute_llama_qk(file_rows, 1);
  EXPECT_TRUE(hf.squeeze(1).equal(at::tensor({0.f, 1.f, 2.f, 3.f})));
  // Two heads: each head is permuted on its own.
  const at::Tensor two = at::tensor({0.f, 2.f, 1.f, 3.f, 4.f, 6.f, 5.f, 7.f});
  EXPECT_TRUE(model::unpermute_llama_qk(two, 2).equal(at::arange(8, at::kFloat)));
  EXPECT_TRUE(model::permute_llama_qk(at::arange(8, at::kFloat), 2).equal(two));
  EXPECT_THROW(model::unpermute_llama_qk(at::zeros({6}), 2), Error);
}

TEST(GgufModel, RoundTripGivesTheSameTensorsAndLogits) {
  const auto dir = test::make_temp_dir("gguf_model");
  const model::ModelWeights w = test::tiny_weights(11);
  model::write_gguf_model(dir / "tiny.gguf", w, k_f32);
  const model::ModelWeights g = model::load_model((dir / "tiny.gguf").string());
  EXPECT_EQ(g.config.architecture, "LlamaForCausalLM");
  EXPECT_EQ(g.config.num_layers, 3);
  EXPECT_EQ(g.config.num_heads, 2);
  EXPECT_EQ(g.config.num_kv_heads, 1);
  EXPECT_EQ(g.config.head_dim, 8);
  EXPECT_TRUE(g.config.tie_word_embeddings);
  EXPECT_EQ(g.config.rope_style, model::RopeStyle::half);
  ASSERT_EQ(g.tensors.size(), w.tensors.size());
  for (const auto& [name, t] : w.tensors) {
    ASSERT_TRUE(g.tensors.count(name)) << name;
    EXPECT_TRUE(g.tensors.at(name).to(at::kFloat).equal(t)) << name;
  }
  // F32 round trip: the same weights, so bit-identical logits.
  const at::Tensor tokens = at::tensor({1, 5, 9, 30, 2, 7}, at::kLong).unsqueeze(0);
  const at::Tensor a = model::Transformer(w).forward(tokens);
  const at::Tensor b = model::Transformer(g).forward(tokens);
  EXPECT_TRUE(a.equal(b));
}

TEST(GgufModel, Q8_0FileKeptQuantizedIsTheSameModelAsQ8_0InMemory) {
  // A float model written as Q8_0 and loaded with keep_quantized: every matrix stays a
  // Q8_0 block matrix, Q and K rows back in HF order (the permutation moves whole rows
  // of blocks), so the bytes equal quantizing the original in memory, and the two
  // transformers run the same kernels on the same bytes: identical logits.
  model::SyntheticOptions o;
  o.hidden_size = 64;
  o.intermediate_size = 96;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.seed = 3;
  const model::ModelWeights w = model::make_synthetic_weights(o);
  const auto dir = test::make_temp_dir("gguf_q8_0");
  const uint32_t q8 = static_cast<uint32_t>(io::GgmlType::Q8_0);
  model::write_gguf_model(dir / "m.gguf", w, q8);
  const model::ModelWeights g = model::load_model((dir / "m.gguf").string(), {.keep_quantized = true});
  ASSERT_EQ(g.quantized.size(), w.tensors.size() - g.tensors.size());
  for (const char* name : {"model.layers.0.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight",
                           "model.layers.1.mlp.down_proj.weight", "lm_head.weight"}) {
    ASSERT_TRUE(g.quantized.count(name)) << name;
    const model::QuantWeight mine = model::quantize_q8_0(w.tensors.at(name), name);
    EXPECT_TRUE(g.quantized.at(name).bytes.equal(mine.bytes)) << name;
  }
  const at::Tensor tokens = at::tensor({1, 5, 9, 30, 2, 7, 11, 3, 8, 4}, at::kLong).unsqueeze(0);
  const model::Transformer from_file(g), in_memory(w, {.weights = model::WeightFormat::q8_0});
  EXPECT_TRUE(from_file.forward(tokens).equal(in_memory.forward(tokens)));
  // Decoded to fp32 it is the same model as well.
  const model::ModelWeights d = model::load_model((dir / "m.gguf").string());
  EXPECT_TRUE(d.quantized.empty());
  EXPECT_TRUE(d.tensors.at("model.layers.0.self_attn.q_proj.weight")
                  .equal(g.quantized.at("model.layers.0.self_attn.q_proj.weight").dequantize()));
}

TEST(GgufModel, F16TensorsLoadAsViewsOfHalfPrecision) {
  const auto dir = test::make_temp_dir("gguf_model");
  const model::ModelWeights w = test::tiny_weights(3, 1);
  model::write_gguf_model(dir / "tiny16.gguf", w, k_f16);
  const model::ModelWeights g = model::load_model((dir / "tiny16.gguf").string());
  const at::Tensor& up = g.tensors.at("model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(up.scalar_type(), at::kHalf);
  EXPECT_TRUE(up.equal(w.tensors.at("model.layers.0.mlp.up_proj.weight").to(at::kHalf)));
  // 1-D tensors stay F32 as llama.cpp writes them.
  EXPECT_EQ(g.tensors.at("model.norm.weight").scalar_type(), at::kFloat);
}

TEST(GgufModel, Qwen2KeepsItsRowOrderAndBiases) {
  const auto dir = test::make_temp_dir("gguf_model");
  model::ModelWeights w = test::tiny_weights(5, 1);
  w.config.architecture = "Qwen2ForCausalLM";
  w.config.attention_bias = true;
  for (const char* p : {"q_proj", "k_proj", "v_proj"}) {
    const auto& wt = w.tensors.at(std::string("model.layers.0.self_attn.") + p + ".weight");
    w.tensors[std::string("model.layers.0.self_attn.") + p + ".bias"] = at::arange(wt.size(0), at::kFloat);
  }
  model::write_gguf_model(dir / "qwen.gguf", w, k_f32);
  const model::ModelWeights g = model::load_model((dir / "qwen.gguf").string());
  EXPECT_EQ(g.config.architecture, "Qwen2ForCausalLM");
  EXPECT_TRUE(g.config.attention_bias);
  for (const auto& [name, t] : w.tensors) EXPECT_TRUE(g.tensors.at(name).equal(t)) << name;
}

TEST(GgufModel, MetadataErrorsNameTheKey) {
  const auto dir = test::make_temp_dir("gguf_model");
  const model::ModelWeights w = test::tiny_weights(5, 1);
  // (Not a structured binding: clang 14 cannot capture one in a lambda.)
  const auto parts = model::gguf_model_parts(w, k_f32);
  const io::GgufMetadata& md = parts.first;
  const std::vector<io::GgufTensorData>& tensors = parts.second;
  auto write_without = [&](const std::string& key, const std::filesystem::path& p) {
    io::GgufMetadata m;
    for (const auto& kv : md)
      if (kv.first != key) m.push_back(kv);
    io::write_gguf(p, m, tensors);
  };
  write_without("llama.block_count", dir / "a.gguf");
  EXPECT_NE(load_error(dir / "a.gguf").find("metadata key 'llama.block_count' is missing"), std::string::npos);

  io::GgufMetadata m = md;
  m[0].second = io::gguf_str("gemma");
  io::write_gguf(dir / "b.gguf", m, tensors);
  EXPECT_NE(load_error(dir / "b.gguf").find("general.architecture 'gemma' is not supported"), std::string::npos);

  m = md;
  m.emplace_back("llama.rope.dimension_count", io::gguf_u32(4));
  m.erase(std::find_if(m.begin(), m.end(), [](auto& kv) { return kv.first == "llama.rope.dimension_count"; }));
  io::write_gguf(dir / "c.gguf", m, tensors);
  EXPECT_NE(load_error(dir / "c.gguf").find("partial rotary"), std::string::npos);

  auto extra = tensors;
  extra.push_back({"blk.0.mystery.weight", {4}, k_f32, std::string(16, '\0')});
  io::write_gguf(dir / "d.gguf", md, extra);
  EXPECT_NE(load_error(dir / "d.gguf").find("tensor 'blk.0.mystery.weight' is not part of"), std::string::npos);

  auto missing = tensors;
  missing.pop_back();
  io::write_gguf(dir / "e.gguf", md, missing);
  EXPECT_NE(load_error(dir / "e.gguf").find("[load]"), std::string::npos);
}
