// Checkpoint loading: HF config parsing, HF directories (single file, sharded, bf16),
// shape/name validation, llama2.c legacy files (stories260K and hand-built files).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/shared_data.h"
#include "common/temp_dir.h"
#include "oal/core/error.h"
#include "oal/fixtures/synthetic.h"
#include "oal/formats/hf_config.h"
#include "oal/formats/llama2c.h"
#include "oal/formats/load.h"
#include "oal/formats/model_summary.h"
#include "oal/formats/weight_layout.h"
#include "oal/io/safetensors.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace oal::model;
using namespace oal::fixtures;
using namespace oal::formats;

namespace {

fs::path temp_dir(const std::string& sub = "") {
  return oal::test::test_dir("load", sub);
}

// Runs `f`, expecting an oal::Error whose message contains every part of `expect`.
template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> expect) {
  try {
    f();
    FAIL() << "expected an oal::Error";
  } catch (const oal::Error& e) {
    const std::string msg = e.what();
    for (const auto& part : expect) EXPECT_NE(msg.find(part), std::string::npos) << msg;
  }
}

// The published Qwen2.5-0.5B config.json (abridged to the keys that matter).
json qwen25_config() {
  return json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151643,
    "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
    "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
    "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true,
    "use_sliding_window": false, "vocab_size": 151936})");
}

// The published Llama-3.2-1B-Instruct config.json (abridged).
json llama32_config() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64,
    "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 8192,
    "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "vocab_size": 128256})");
}

// A tiny Llama config for hand-built directories.
ModelConfig tiny_config() {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 50;
  c.max_position_embeddings = 128;
  return c;
}

// Writes `tensors` + `config` as an HF directory.
void write_dir(const fs::path& dir, const ModelConfig& c,
               const std::map<std::string, at::Tensor>& tensors) {
  write_hf_config(dir / "config.json", c, json::object());
  oal::io::write_safetensors(dir / "model.safetensors", tensors);
}

std::map<std::string, at::Tensor> random_tensors(const ModelConfig& c) {
  std::map<std::string, at::Tensor> m;
  for (const auto& [name, shape] : expected_tensor_shapes(c)) m[name] = at::randn(shape);
  return m;
}

}  // namespace

TEST(HfConfig, ParsesQwen2WithBiases) {
  ModelConfig c = parse_hf_config(qwen25_config(), "qwen");
  EXPECT_EQ(c.architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.intermediate_size, 4864);
  EXPECT_EQ(c.num_layers, 24);
  EXPECT_EQ(c.num_heads, 14);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);  // 896 / 14, not given explicitly
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.attention_bias);  // Qwen2 always has q/k/v biases
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_style, RopeStyle::half);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.eos_token_id, 151643);
}

TEST(HfConfig, ParsesLlama3WithRopeScalingAndEosList) {
  ModelConfig c = parse_hf_config(llama32_config(), "llama");
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling->low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_EQ(c.eos_token_id, 128001);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  // Older configs spell the scaling type as "type".
  json j = llama32_config();
  j["rope_scaling"].erase("rope_type");
  j["rope_scaling"]["type"] = "llama3";
  EXPECT_TRUE(parse_hf_config(j, "llama").rope_scaling.has_value());
}

TEST(HfConfig, DefaultsAndLlamaBiasKey) {
  json j = llama32_config();
  for (const char* k : {"num_key_value_heads", "head_dim", "rope_theta", "rms_norm_eps",
                        "tie_word_embeddings", "max_position_embeddings", "rope_scaling"})
    j.erase(k);
  j["attention_bias"] = true;
  ModelConfig c = parse_hf_config(j, "llama");
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_TRUE(c.attention_bias);
}

TEST(HfConfig, RejectsBadConfigs) {
  json j = qwen25_config();
  j["architectures"] = {"MistralForCausalLM"};
  expect_error([&] { parse_hf_config(j, "cfg"); },
               {"[hf_config] cfg", "unsupported architecture 'MistralForCausalLM'"});
  j = qwen25_config();
  j.erase("hidden_size");
  expect_error([&] { parse_hf_config(j, "cfg"); }, {"missing required field 'hidden_size'"});
  j = qwen25_config();
  j["num_key_value_heads"] = 3;
  expect_error([&] { parse_hf_config(j, "cfg"); },
               {"num_attention_heads 14", "multiple of num_key_value_heads 3"});
  j = qwen25_config();
  j["hidden_size"] = 900;
  expect_error([&] { parse_hf_config(j, "cfg"); },
               {"hidden_size 900 is not divisible by num_attention_heads 14"});
  j = llama32_config();
  j["rope_scaling"]["rope_type"] = "yarn";
  expect_error([&] { parse_hf_config(j, "cfg"); }, {"unsupported rope_scaling type 'yarn'"});
  j = llama32_config();
  j["rope_scaling"].erase("factor");
  expect_error([&] { parse_hf_config(j, "cfg"); },
               {"rope_scaling", "missing required field 'factor'"});
  j = llama32_config();
  j["hidden_size"] = "2048";
  expect_error([&] { parse_hf_config(j, "cfg"); }, {"'hidden_size' must be an integer"});
  j = llama32_config();
  j["mlp_bias"] = true;
  expect_error([&] { parse_hf_config(j, "cfg"); }, {"mlp_bias"});
}

TEST(HfConfig, WriteReadRoundTrip) {
  for (const json& src : {qwen25_config(), llama32_config()}) {
    ModelConfig a = parse_hf_config(src, "src");
    auto p = temp_dir() / "config.json";
    write_hf_config(p, a, json{{"extra_key", 7}});
    ModelConfig b = read_hf_config(p);
    EXPECT_EQ(b.architecture, a.architecture);
    EXPECT_EQ(b.hidden_size, a.hidden_size);
    EXPECT_EQ(b.intermediate_size, a.intermediate_size);
    EXPECT_EQ(b.num_layers, a.num_layers);
    EXPECT_EQ(b.num_heads, a.num_heads);
    EXPECT_EQ(b.num_kv_heads, a.num_kv_heads);
    EXPECT_EQ(b.head_dim, a.head_dim);
    EXPECT_EQ(b.vocab_size, a.vocab_size);
    EXPECT_EQ(b.max_position_embeddings, a.max_position_embeddings);
    EXPECT_EQ(b.rope_theta, a.rope_theta);
    EXPECT_EQ(b.rms_norm_eps, a.rms_norm_eps);
    EXPECT_EQ(b.attention_bias, a.attention_bias);
    EXPECT_EQ(b.tie_word_embeddings, a.tie_word_embeddings);
    EXPECT_EQ(b.rope_scaling.has_value(), a.rope_scaling.has_value());
    EXPECT_EQ(b.bos_token_id, a.bos_token_id);
    EXPECT_EQ(b.eos_token_ids, a.eos_token_ids);
    std::ifstream in(p);
    EXPECT_EQ(json::parse(in)["extra_key"], 7);
  }
}

TEST(WeightLayout, ExpectedShapesByHand) {
  ModelConfig c = tiny_config();
  c.attention_bias = true;
  auto m = expected_tensor_shapes(c);
  // 1 embedding + 2 layers × (2 norms + 4 attn + 3 biases + 3 mlp) + final norm + lm_head
  EXPECT_EQ(m.size(), 1u + 2 * 12 + 1 + 1);
  EXPECT_EQ(m.at("model.embed_tokens.weight"), (std::vector<int64_t>{50, 64}));
  EXPECT_EQ(m.at("model.layers.1.self_attn.q_proj.weight"), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(m.at("model.layers.1.self_attn.k_proj.weight"), (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(m.at("model.layers.1.self_attn.v_proj.bias"), (std::vector<int64_t>{32}));
  EXPECT_EQ(m.at("model.layers.0.self_attn.o_proj.weight"), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(m.at("model.layers.0.mlp.gate_proj.weight"), (std::vector<int64_t>{96, 64}));
  EXPECT_EQ(m.at("model.layers.0.mlp.down_proj.weight"), (std::vector<int64_t>{64, 96}));
  EXPECT_EQ(m.at("lm_head.weight"), (std::vector<int64_t>{50, 64}));
  c.tie_word_embeddings = true;
  EXPECT_EQ(expected_tensor_shapes(c).count("lm_head.weight"), 0u);
}

TEST(LoadHf, RoundTripKeepsValuesAndDtype) {
  auto dir = temp_dir();
  ModelConfig c = tiny_config();
  auto tensors = random_tensors(c);
  tensors["model.norm.weight"] = tensors["model.norm.weight"].to(at::kHalf);  // mixed dtypes
  write_dir(dir, c, tensors);
  ModelWeights w = load_model(dir.string());
  EXPECT_EQ(w.config.hidden_size, 64);
  ASSERT_EQ(w.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    EXPECT_EQ(w.tensors.at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(at::equal(w.tensors.at(name), t)) << name;
  }
  // A file inside the directory loads the directory.
  EXPECT_EQ(load_model((dir / "config.json").string()).tensors.size(), tensors.size());
  EXPECT_EQ(load_model((dir / "model.safetensors").string()).tensors.size(), tensors.size());
}

TEST(LoadHf, ShapeMismatchNamesTensorAndShapes) {
  auto dir = temp_dir();
  ModelConfig c = tiny_config();
  auto tensors = random_tensors(c);
  tensors["model.layers.0.self_attn.q_proj.weight"] = at::randn({64, 32});
  write_dir(dir, c, tensors);
  expect_error(
      [&] { load_model(dir.string()); },
      {"[load]",
       "tensor 'model.layers.0.self_attn.q_proj.weight': expected [64, 64], file has [64, 32]"});
}

TEST(LoadHf, MissingAndUnexpectedTensors) {
  auto dir = temp_dir();
  ModelConfig c = tiny_config();
  auto tensors = random_tensors(c);
  tensors.erase("model.layers.1.mlp.up_proj.weight");
  write_dir(dir, c, tensors);
  expect_error([&] { load_model(dir.string()); },
               {"[load]", "missing tensor 'model.layers.1.mlp.up_proj.weight'", "[96, 64]"});

  tensors = random_tensors(c);
  tensors["model.layers.0.self_attn.q_proj.bias"] = at::randn({64});  // config has no biases
  write_dir(dir, c, tensors);
  expect_error([&] { load_model(dir.string()); },
               {"unexpected tensor 'model.layers.0.self_attn.q_proj.bias'"});

  // Integer weights are not a model.
  tensors = random_tensors(c);
  tensors["model.norm.weight"] = at::ones({64}, at::kInt);
  write_dir(dir, c, tensors);
  expect_error([&] { load_model(dir.string()); },
               {"tensor 'model.norm.weight'", "F32, BF16 or F16"});
}

TEST(LoadHf, TiedCheckpointWithRedundantHeadAndRotaryBuffers) {
  auto dir = temp_dir();
  ModelConfig c = tiny_config();
  c.tie_word_embeddings = true;
  auto tensors = random_tensors(c);
  tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone();
  tensors["model.layers.0.self_attn.rotary_emb.inv_freq"] = at::ones({8});
  write_dir(dir, c, tensors);
  ModelWeights w = load_model(dir.string());
  EXPECT_EQ(w.tensors.count("lm_head.weight"), 0u);
  EXPECT_EQ(w.tensors.count("model.layers.0.self_attn.rotary_emb.inv_freq"), 0u);
  EXPECT_EQ(w.tensors.size(), tensors.size() - 2);
}

TEST(LoadHf, MissingFilesAreClearErrors) {
  auto dir = temp_dir();
  expect_error([&] { load_model(dir.string()); }, {"missing config.json"});
  write_hf_config(dir / "config.json", tiny_config(), json::object());
  expect_error([&] { load_model(dir.string()); },
               {"model.safetensors", "model.safetensors.index.json"});
  expect_error([&] { load_model((dir / "nope").string()); }, {"no such file or directory"});
}

TEST(LoadHf, ShardedLoadsSameTensorsAsSingleFile) {
  SyntheticOptions o;
  o.architecture = SyntheticArch::qwen2;
  o.seed = 11;
  auto single = temp_dir("single"), sharded = temp_dir("sharded");
  write_synthetic_model(single, o);
  o.shards = 3;
  write_synthetic_model(sharded, o);
  EXPECT_TRUE(fs::exists(sharded / "model-00003-of-00003.safetensors"));
  EXPECT_FALSE(fs::exists(sharded / "model.safetensors"));
  ModelWeights a = load_model(single.string()), b = load_model(sharded.string());
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : a.tensors) EXPECT_TRUE(at::equal(t, b.tensors.at(name))) << name;
  // Each shard holds only part of the model.
  auto h = oal::io::read_safetensors_header(sharded / "model-00001-of-00003.safetensors");
  EXPECT_GT(h.tensors.size(), 0u);
  EXPECT_LT(h.tensors.size(), a.tensors.size());
}

TEST(LoadHf, ShardIndexErrors) {
  SyntheticOptions o;
  o.shards = 2;
  auto dir = temp_dir();
  write_synthetic_model(dir, o);
  std::ifstream in(dir / "model.safetensors.index.json");
  json index = json::parse(in);
  in.close();
  auto rewrite = [&](const json& j) {
    std::ofstream(dir / "model.safetensors.index.json") << j.dump();
  };
  json bad = index;
  bad["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors";
  bad["weight_map"]["model.embed_tokens.weight"] = "model-00002-of-00002.safetensors";
  rewrite(bad);
  expect_error([&] { load_model(dir.string()); },
               {"is listed in the index for this shard but the file does not hold it"});
  bad = index;
  bad["weight_map"]["model.norm.weight"] = "../elsewhere.safetensors";
  rewrite(bad);
  expect_error([&] { load_model(dir.string()); }, {"must be a relative path inside the directory"});
  bad = index;
  bad["weight_map"]["model.norm.weight"] = "missing.safetensors";
  rewrite(bad);
  expect_error([&] { load_model(dir.string()); }, {"does not exist"});
}

TEST(LoadHf, Bf16IsKeptAsStored) {
  SyntheticOptions o;
  o.seed = 5;
  auto f32 = temp_dir("f32"), bf16 = temp_dir("bf16");
  write_synthetic_model(f32, o);
  o.dtype = at::kBFloat16;
  write_synthetic_model(bf16, o);
  ModelWeights a = load_model(f32.string()), b = load_model(bf16.string());
  for (const auto& [name, t] : b.tensors) {
    EXPECT_EQ(t.scalar_type(), at::kBFloat16) << name;
    // bf16 file = fp32 values rounded to bf16 (round-to-nearest-even, exact compare).
    EXPECT_TRUE(at::equal(t, a.tensors.at(name).to(at::kBFloat16))) << name;
  }
  EXPECT_EQ(summarize(b).bytes * 2, summarize(a).bytes);
}

TEST(Summary, CountsParametersAndDescribes) {
  ModelConfig c = tiny_config();
  ModelWeights w;
  w.config = c;
  w.tensors = random_tensors(c);
  ModelSummary s = summarize(w);
  // By hand: embed 50·64, lm_head 50·64, norms 64·(2·2+1), per layer q 64·64, k,v 32·64
  // each, o 64·64, mlp 3·96·64.
  const int64_t expected = 2 * 50 * 64 + 64 * 5 + 2 * (64 * 64 * 2 + 2 * 32 * 64 + 3 * 96 * 64);
  EXPECT_EQ(s.parameters, expected);
  EXPECT_EQ(s.bytes, expected * 4);
  EXPECT_EQ(s.dtype_params.at("Float"), expected);
  const std::string text = describe(w);
  EXPECT_NE(text.find("LlamaForCausalLM"), std::string::npos) << text;
  EXPECT_NE(text.find(std::to_string(expected)), std::string::npos) << text;
  EXPECT_EQ(summary_json(w)["parameters"], expected);
}

// --- llama2.c legacy files ---------------------------------------------------------

namespace {

// A hand-built legacy file: header, then each tensor filled with a distinct constant
// (its position in the file's order + 1), so the name mapping can be checked exactly.
std::string make_llama2c(int32_t vocab, bool untied, int trim = 0) {
  const int32_t dim = 8, hidden = 12, layers = 2, heads = 2, kv = 1, seq = 4;
  const int32_t hs = dim / heads, kvd = kv * hs;
  int32_t header[7] = {dim, hidden, layers, heads, kv, untied ? -vocab : vocab, seq};
  std::string out(reinterpret_cast<const char*>(header), sizeof(header));
  auto block = [&](float value, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n), value);
    out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  };
  block(1, int64_t{vocab} * dim);               // embedding
  block(2, layers * dim);                       // rms_att
  block(3, layers * dim * dim);                 // wq
  block(4, layers * kvd * dim);                 // wk
  block(5, layers * kvd * dim);                 // wv
  block(6, layers * dim * dim);                 // wo
  block(7, layers * dim);                       // rms_ffn
  block(8, layers * hidden * dim);              // w1
  block(9, layers * dim * hidden);              // w2
  block(10, layers * hidden * dim);             // w3
  block(11, dim);                               // rms_final
  block(-1, seq * hs);                          // RoPE table (skipped)
  if (untied) block(12, int64_t{vocab} * dim);  // classifier
  out.resize(out.size() - static_cast<size_t>(trim));
  return out;
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST(Llama2c, MapsEveryBlockOntoHfNames) {
  for (bool untied : {false, true}) {
    auto p = temp_dir() / (untied ? "untied.bin" : "tied.bin");
    write_file(p, make_llama2c(10, untied));
    ModelWeights w = load_model(p.string());
    EXPECT_EQ(w.config.tie_word_embeddings, !untied);
    EXPECT_EQ(w.config.rope_style, RopeStyle::adjacent);
    EXPECT_DOUBLE_EQ(w.config.rms_norm_eps, 1e-5);
    EXPECT_EQ(w.config.vocab_size, 10);
    const std::map<std::string, float> expect = {
        {"model.embed_tokens.weight", 1},
        {"model.layers.1.input_layernorm.weight", 2},
        {"model.layers.1.self_attn.q_proj.weight", 3},
        {"model.layers.1.self_attn.k_proj.weight", 4},
        {"model.layers.0.self_attn.v_proj.weight", 5},
        {"model.layers.0.self_attn.o_proj.weight", 6},
        {"model.layers.0.post_attention_layernorm.weight", 7},
        {"model.layers.1.mlp.gate_proj.weight", 8},  // w1
        {"model.layers.0.mlp.down_proj.weight", 9},  // w2
        {"model.layers.1.mlp.up_proj.weight", 10},   // w3
        {"model.norm.weight", 11}};
    for (const auto& [name, v] : expect) {
      const at::Tensor& t = w.tensors.at(name);
      EXPECT_EQ(t.min().item<float>(), v) << name;
      EXPECT_EQ(t.max().item<float>(), v) << name;
    }
    EXPECT_EQ(w.tensors.at("model.layers.0.self_attn.k_proj.weight").sizes(),
              (c10::IntArrayRef{4, 8}));
    EXPECT_EQ(w.tensors.at("model.layers.0.mlp.down_proj.weight").sizes(),
              (c10::IntArrayRef{8, 12}));
    if (untied)
      EXPECT_EQ(w.tensors.at("lm_head.weight").min().item<float>(), 12.0f);
    else
      EXPECT_EQ(w.tensors.count("lm_head.weight"), 0u);
  }
}

TEST(Llama2c, TruncatedPaddedAndForeignFiles) {
  auto p = temp_dir() / "m.bin";
  write_file(p, make_llama2c(10, false, 4));
  expect_error([&] { load_model(p.string()); }, {"[llama2c]", "truncated", "implies"});
  write_file(p, make_llama2c(10, false) + "xx");
  expect_error([&] { load_model(p.string()); }, {"[llama2c]", "2 trailing bytes"});
  write_file(p, "abc");
  expect_error([&] { load_model(p.string()); }, {"[llama2c]", "at least 28"});
  std::string magic = make_llama2c(10, false);
  uint32_t m = 0x616b3432;
  std::memcpy(magic.data(), &m, 4);
  write_file(p, magic);
  expect_error([&] { load_model(p.string()); }, {"[llama2c]", "ak42"});
  std::string bad = make_llama2c(10, false);
  int32_t heads = 3;  // dim 8 not divisible by 3 heads
  std::memcpy(bad.data() + 12, &heads, 4);
  write_file(p, bad);
  expect_error([&] { load_model(p.string()); }, {"[llama2c]", "divisible"});
}

TEST(Llama2c, Stories260K) {
  auto path = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  ModelWeights w = load_model(path.string());
  const ModelConfig& c = w.config;
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_style, RopeStyle::adjacent);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  // The file is consumed exactly: header + weights + the 512 × 8 RoPE table (README).
  const int64_t weights =
      512 * 64 + 5 * (64 + 64 * 64 + 2 * 32 * 64 + 64 * 64 + 64 + 3 * 172 * 64) + 64;
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(path)), 28 + 4 * (weights + 512 * 8));
  EXPECT_EQ(fs::file_size(path), 1056540u);
  EXPECT_EQ(summarize(w).parameters, weights);
  EXPECT_EQ(w.tensors.size(), 1u + 5 * 9 + 1);
  for (const auto& [name, t] : w.tensors) {
    EXPECT_EQ(t.scalar_type(), at::kFloat) << name;
    const double sum = t.sum().item<double>();
    EXPECT_TRUE(std::isfinite(sum)) << name;
    EXPECT_GT(t.abs().max().item<float>(), 0.0f) << name;  // no all-zero block from a misread
  }
  // RMSNorm gains of a trained model sit around 1; projections are much smaller. A
  // shifted read would mix the two.
  const double norm_mean =
      w.tensors.at("model.layers.2.input_layernorm.weight").mean().item<double>();
  EXPECT_GT(norm_mean, 0.2);
  EXPECT_LT(std::abs(w.tensors.at("model.layers.2.self_attn.q_proj.weight").mean().item<double>()),
            0.1);
  // A truncated copy is an error, not a crash.
  auto copy = temp_dir() / "cut.bin";
  fs::copy_file(path, copy);
  fs::resize_file(copy, fs::file_size(path) - 100);
  expect_error([&] { load_model(copy.string()); }, {"truncated", "1056540"});
}

// Every truncation length of a llama2.c file is an error naming the expected size.
TEST(Llama2c, EveryTruncationIsAnError) {
  const std::string full = make_llama2c(10, true);
  auto p = temp_dir() / "cut.bin";
  for (size_t len = 0; len < full.size(); len += 37) {
    write_file(p, full.substr(0, len));
    expect_error([&] { load_model(p.string()); }, {"[llama2c]"});
  }
}
