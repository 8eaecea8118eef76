// Synthetic checkpoints: determinism, the HF files they consist of, the options
// (Qwen2 biases, tied embeddings, Llama-3 rope scaling, shards, bf16), the planted
// outlier dimensions, and the tokenizer written beside them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/temp_dir.h"
#include "oal/core/error.h"
#include "oal/model/hf_config.h"
#include "oal/model/load.h"
#include "oal/model/synthetic.h"
#include "oal/model/synthetic_tokenizer.h"
#include "oal/text/tokenizer.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace oal::model;

namespace {

fs::path temp_dir(const std::string& sub) { return oal::test::test_dir("synth", sub); }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

std::set<std::string> file_names(const fs::path& d) {
  std::set<std::string> s;
  for (const auto& e : fs::directory_iterator(d)) s.insert(e.path().filename().string());
  return s;
}

}  // namespace

TEST(Synthetic, SameSeedGivesByteIdenticalFiles) {
  SyntheticOptions o;
  o.architecture = SyntheticArch::qwen2;
  o.shards = 2;
  o.seed = 42;
  auto a = temp_dir("a"), b = temp_dir("b"), c = temp_dir("c");
  write_synthetic_model(a, o);
  write_synthetic_model(b, o);
  const auto names = file_names(a);
  EXPECT_EQ(names, (std::set<std::string>{"config.json", "model-00001-of-00002.safetensors",
                                           "model-00002-of-00002.safetensors",
                                           "model.safetensors.index.json", "tokenizer.json",
                                           "tokenizer_config.json"}));
  EXPECT_EQ(file_names(b), names);
  for (const auto& n : names) EXPECT_EQ(slurp(a / n), slurp(b / n)) << n;
  o.seed = 43;
  write_synthetic_model(c, o);
  EXPECT_NE(slurp(a / "model-00001-of-00002.safetensors"), slurp(c / "model-00001-of-00002.safetensors"));
}

TEST(Synthetic, RewritingWithOtherLayoutLeavesOneCheckpoint) {
  SyntheticOptions o;
  auto d = temp_dir("d");
  o.shards = 3;
  write_synthetic_model(d, o);
  o.shards = 1;
  write_synthetic_model(d, o);
  EXPECT_EQ(file_names(d), (std::set<std::string>{"config.json", "model.safetensors",
                                                   "tokenizer.json", "tokenizer_config.json"}));
  EXPECT_NO_THROW(load_model(d.string()));
}

TEST(Synthetic, Qwen2HasBiasesAndConfigSaysSo) {
  SyntheticOptions o;
  o.architecture = SyntheticArch::qwen2;
  o.tie_word_embeddings = true;
  auto d = temp_dir("q");
  write_synthetic_model(d, o);
  ModelWeights w = load_model(d.string());
  EXPECT_EQ(w.config.architecture, "Qwen2ForCausalLM");
  EXPECT_TRUE(w.config.attention_bias);
  EXPECT_TRUE(w.config.tie_word_embeddings);
  EXPECT_EQ(w.tensors.count("lm_head.weight"), 0u);
  EXPECT_EQ(w.tensors.at("model.layers.1.self_attn.k_proj.bias").sizes(), (c10::IntArrayRef{32}));
  const json cfg = read_json(d / "config.json");
  EXPECT_EQ(cfg["model_type"], "qwen2");
  EXPECT_EQ(cfg["oal_synthetic"]["seed"], 0);
}

TEST(Synthetic, Llama3RopeScalingTiedBf16) {
  SyntheticOptions o;
  o.llama3_rope_scaling = true;
  o.tie_word_embeddings = true;
  o.dtype = at::kBFloat16;
  o.max_position_embeddings = 256;
  auto d = temp_dir("l");
  write_synthetic_model(d, o);
  const json cfg = read_json(d / "config.json");
  EXPECT_EQ(cfg["rope_scaling"]["rope_type"], "llama3");
  EXPECT_EQ(cfg["torch_dtype"], "bfloat16");
  ModelWeights w = load_model(d.string());
  ASSERT_TRUE(w.config.rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(w.config.rope_scaling->factor, 8.0);
  EXPECT_EQ(w.config.rope_scaling->original_max_position_embeddings, 64);
  EXPECT_FALSE(w.config.attention_bias);
  for (const auto& [name, t] : w.tensors) EXPECT_EQ(t.scalar_type(), at::kBFloat16) << name;
}

TEST(Synthetic, InMemoryWeightsEqualTheWrittenFiles) {
  SyntheticOptions o;
  o.seed = 9;
  o.num_layers = 3;
  auto d = temp_dir("m");
  write_synthetic_model(d, o);
  ModelWeights mem = make_synthetic_weights(o), file = load_model(d.string());
  ASSERT_EQ(mem.tensors.size(), file.tensors.size());
  for (const auto& [name, t] : mem.tensors) EXPECT_TRUE(at::equal(t, file.tensors.at(name))) << name;
}

TEST(Synthetic, PlantedDimsAreRecordedAndArePairedLowFrequencyDims) {
  SyntheticOptions o;
  o.num_layers = 4;
  o.num_heads = 4;
  o.hidden_size = 128;  // head_dim 32
  o.planted_pairs = 2;
  o.seed = 3;
  auto d = temp_dir("p");
  write_synthetic_model(d, o);
  const auto dims = read_planted_dims(d);
  EXPECT_EQ(dims, synthetic_planted_dims(o));
  ASSERT_EQ(dims.size(), 4u);
  for (const auto& layer : dims) {
    ASSERT_EQ(layer.size(), 4u);
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_GE(layer[k], 8);   // pair index in [D/4, D/2) = [8, 16)
      EXPECT_LT(layer[k], 16);
      EXPECT_EQ(layer[k + 2], layer[k] + 16);  // its RoPE partner r + D/2
    }
  }
  // A model without the key reports no planted dims.
  json cfg = read_json(d / "config.json");
  cfg.erase("oal_synthetic");
  std::ofstream(d / "config.json") << cfg.dump();
  EXPECT_TRUE(read_planted_dims(d).empty());
  // A float where a dimension belongs is a named error, not a cast.
  cfg["oal_synthetic"] = {{"planted_dims", {{8, 3.5e32}}}};
  std::ofstream(d / "config.json") << cfg.dump();
  try {
    read_planted_dims(d);
    ADD_FAILURE() << "no error for a float planted dim";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("oal_synthetic.planted_dims must be an integer"),
              std::string::npos) << e.what();
  }
}

// The planted coordinates must dominate q·k: computed here independently from the
// loaded weights (embedding → RMSNorm → q/k projections) on random tokens.
TEST(Synthetic, PlantedDimsDominateQueryKeyProducts) {
  for (auto arch : {SyntheticArch::llama, SyntheticArch::qwen2}) {
    SyntheticOptions o;
    o.architecture = arch;
    o.seed = 17;
    o.planted_pairs = 1;
    auto d = temp_dir(arch == SyntheticArch::llama ? "llama" : "qwen2");
    write_synthetic_model(d, o);
    ModelWeights w = load_model(d.string());
    const auto& c = w.config;
    const auto planted = read_planted_dims(d)[0];
    ASSERT_EQ(planted.size(), 2u);
    at::Tensor ids = at::arange(0, c.vocab_size, 3, at::kLong);
    at::Tensor x = w.tensors.at("model.embed_tokens.weight").index_select(0, ids);
    x = x / (x.pow(2).mean(-1, true) + c.rms_norm_eps).sqrt() *
        w.tensors.at("model.layers.0.input_layernorm.weight");
    at::Tensor q = at::matmul(x, w.tensors.at("model.layers.0.self_attn.q_proj.weight").t());
    at::Tensor k = at::matmul(x, w.tensors.at("model.layers.0.self_attn.k_proj.weight").t());
    if (c.attention_bias) {
      q = q + w.tensors.at("model.layers.0.self_attn.q_proj.bias");
      k = k + w.tensors.at("model.layers.0.self_attn.k_proj.bias");
    }
    const int64_t n = ids.size(0), D = c.head_dim, group = c.num_heads / c.num_kv_heads;
    q = q.view({n, c.num_heads, D});
    k = k.view({n, c.num_kv_heads, D}).repeat_interleave(group, 1);
    // Mean over all (query, key) token pairs and heads of q_r k_r, per dim r.
    at::Tensor contrib = (q.mean(0) * k.mean(0)).mean(0);  // [D]
    std::set<int64_t> planted_set(planted.begin(), planted.end());
    double min_planted = 1e30, max_other = 0;
    for (int64_t r = 0; r < D; ++r) {
      const double v = contrib[r].item<double>();
      if (planted_set.count(r)) min_planted = std::min(min_planted, v);
      else max_other = std::max(max_other, std::abs(v));
    }
    EXPECT_GT(min_planted, 0.0);
    // Planted products are ~20 × scale² (q_r ≈ 0.8·scale·|x·û| ≈ 4.5 for hidden 64);
    // unplanted ones are ~0.5 in magnitude (row·û ~ N(0, 1/hidden)).
    EXPECT_GT(min_planted, 5.0 * max_other) << "min planted " << min_planted << " max other " << max_other;
  }
}

TEST(Synthetic, RejectsImpossibleOptions) {
  SyntheticOptions o;
  o.vocab_size = 100;  // smaller than the tokenizer
  EXPECT_THROW(make_synthetic_weights(o), oal::Error);
  o = SyntheticOptions{};
  o.num_heads = 3;  // 64 not divisible by 3
  EXPECT_THROW(make_synthetic_weights(o), oal::Error);
  o = SyntheticOptions{};
  o.planted_pairs = 5;  // head_dim 16 has only 4 low-frequency pairs
  EXPECT_THROW(make_synthetic_weights(o), oal::Error);
  o = SyntheticOptions{};
  o.dtype = at::kDouble;
  EXPECT_THROW(make_synthetic_weights(o), oal::Error);
  o = SyntheticOptions{};
  o.num_kv_heads = 3;
  EXPECT_THROW(make_synthetic_weights(o), oal::Error);
}

TEST(SyntheticTokenizer, VocabularyAndMergesAreConsistent) {
  const json t = synthetic_tokenizer_json();
  const json& vocab = t["model"]["vocab"];
  const json& merges = t["model"]["merges"];
  EXPECT_EQ(t["model"]["type"], "BPE");
  EXPECT_EQ(static_cast<int64_t>(vocab.size()) + 1, synthetic_tokenizer_size());
  EXPECT_EQ(vocab.size(), 256u + merges.size());
  EXPECT_EQ(vocab["Ġ"], 32);  // the space byte in GPT-2's byte→unicode spelling
  EXPECT_EQ(vocab["A"], 65);
  for (const auto& m : merges) {
    ASSERT_TRUE(m.is_array() && m.size() == 2) << m.dump();
    const std::string a = m[0], b = m[1];
    EXPECT_TRUE(vocab.contains(a) && vocab.contains(b) && vocab.contains(a + b)) << m.dump();
  }
  EXPECT_EQ(t["added_tokens"][0]["id"], synthetic_endoftext_id());
  EXPECT_EQ(t["added_tokens"][0]["content"], "<|endoftext|>");
}

TEST(SyntheticTokenizer, LoadsWithTheProjectTokenizerAndRoundTrips) {
  SyntheticOptions o;
  auto d = temp_dir("t");
  write_synthetic_model(d, o);
  auto tok = oal::text::load_tokenizer(d);
  const ModelConfig cfg = read_hf_config(d / "config.json");
  EXPECT_EQ(tok->vocab_size(), cfg.vocab_size);
  EXPECT_EQ(tok->eos_id(), cfg.eos_token_id);
  for (const std::string text : {"Once upon a time, the cat and the dog!", "tab\there\r\nüñï 😀", ""}) {
    auto ids = tok->encode(text, false);
    EXPECT_EQ(tok->decode(ids), text);
    for (int32_t id : ids) EXPECT_LT(id, cfg.vocab_size);
  }
  EXPECT_EQ(tok->encode(" the", false), (std::vector<int32_t>{*tok->token_id("Ġthe")}));
}
