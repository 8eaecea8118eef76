// Models from GGUF files: the config read from llama.cpp's metadata keys, llama's Q/K
// row permutation undone (checked by hand on a 4-row head and by a round trip through
// the writer, where the loaded model must give the original's logits exactly), and
// metadata errors that name the key.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/error_of.h"
#include "common/sha256.h"
#include "common/temp_dir.h"
#include "common/tiny_model.h"
#include "oal/core/error.h"
#include "oal/fixtures/synthetic.h"
#include "oal/fixtures/synthetic_tokenizer.h"
#include "oal/formats/fingerprint.h"
#include "oal/formats/gguf_export.h"
#include "oal/formats/gguf_model.h"
#include "oal/formats/hf_config.h"
#include "oal/formats/load.h"
#include "oal/io/gguf_quants.h"
#include "oal/model/rope.h"
#include "oal/model/transformer.h"
#include "oal/text/tokenizer.h"

using namespace oal;

namespace {
constexpr uint32_t k_f32 = static_cast<uint32_t>(io::GgmlType::F32);
constexpr uint32_t k_f16 = static_cast<uint32_t>(io::GgmlType::F16);

using test::error_of;

std::string load_error(const std::filesystem::path& p) {
  try {
    formats::load_model(p.string());
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
  const at::Tensor hf = formats::unpermute_llama_qk(file_rows, 1);
  EXPECT_TRUE(hf.squeeze(1).equal(at::tensor({0.f, 1.f, 2.f, 3.f})));
  // Two heads: each head is permuted on its own.
  const at::Tensor two = at::tensor({0.f, 2.f, 1.f, 3.f, 4.f, 6.f, 5.f, 7.f});
  EXPECT_TRUE(formats::unpermute_llama_qk(two, 2).equal(at::arange(8, at::kFloat)));
  EXPECT_TRUE(formats::permute_llama_qk(at::arange(8, at::kFloat), 2).equal(two));
  EXPECT_THROW(formats::unpermute_llama_qk(at::zeros({6}), 2), Error);
}

TEST(GgufModel, RoundTripGivesTheSameTensorsAndLogits) {
  const auto dir = test::make_temp_dir("gguf_model");
  const model::ModelWeights w = test::tiny_weights(11);
  formats::write_gguf_model(dir / "tiny.gguf", w, k_f32);
  const model::ModelWeights g = formats::load_model((dir / "tiny.gguf").string());
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
  fixtures::SyntheticOptions o;
  o.hidden_size = 64;
  o.intermediate_size = 96;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.seed = 3;
  const model::ModelWeights w = fixtures::make_synthetic_weights(o);
  const auto dir = test::make_temp_dir("gguf_q8_0");
  const uint32_t q8 = static_cast<uint32_t>(io::GgmlType::Q8_0);
  formats::write_gguf_model(dir / "m.gguf", w, q8);
  const model::ModelWeights g =
      formats::load_model((dir / "m.gguf").string(), {.keep_quantized = true});
  ASSERT_EQ(g.quantized.size(), w.tensors.size() - g.tensors.size());
  for (const char* name :
       {"model.layers.0.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight",
        "model.layers.1.mlp.down_proj.weight", "lm_head.weight"}) {
    ASSERT_TRUE(g.quantized.count(name)) << name;
    const model::QuantWeight mine = model::quantize_q8_0(w.tensors.at(name), name);
    EXPECT_TRUE(g.quantized.at(name).bytes.equal(mine.bytes)) << name;
  }
  const at::Tensor tokens = at::tensor({1, 5, 9, 30, 2, 7, 11, 3, 8, 4}, at::kLong).unsqueeze(0);
  const model::Transformer from_file(g), in_memory(w, {.weights = model::WeightFormat::q8_0});
  EXPECT_TRUE(from_file.forward(tokens).equal(in_memory.forward(tokens)));
  // Decoded to fp32 it is the same model as well.
  const model::ModelWeights d = formats::load_model((dir / "m.gguf").string());
  EXPECT_TRUE(d.quantized.empty());
  EXPECT_TRUE(d.tensors.at("model.layers.0.self_attn.q_proj.weight")
                  .equal(g.quantized.at("model.layers.0.self_attn.q_proj.weight").dequantize()));
}

TEST(GgufModel, F16TensorsLoadAsViewsOfHalfPrecision) {
  const auto dir = test::make_temp_dir("gguf_model");
  const model::ModelWeights w = test::tiny_weights(3, 1);
  formats::write_gguf_model(dir / "tiny16.gguf", w, k_f16);
  const model::ModelWeights g = formats::load_model((dir / "tiny16.gguf").string());
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
    w.tensors[std::string("model.layers.0.self_attn.") + p + ".bias"] =
        at::arange(wt.size(0), at::kFloat);
  }
  formats::write_gguf_model(dir / "qwen.gguf", w, k_f32);
  const model::ModelWeights g = formats::load_model((dir / "qwen.gguf").string());
  EXPECT_EQ(g.config.architecture, "Qwen2ForCausalLM");
  EXPECT_TRUE(g.config.attention_bias);
  for (const auto& [name, t] : w.tensors) EXPECT_TRUE(g.tensors.at(name).equal(t)) << name;
}

TEST(GgufModel, MetadataErrorsNameTheKey) {
  const auto dir = test::make_temp_dir("gguf_model");
  const model::ModelWeights w = test::tiny_weights(5, 1);
  // (Not a structured binding: clang 14 cannot capture one in a lambda.)
  const auto parts = formats::gguf_model_parts(w, k_f32);
  const io::GgufMetadata& md = parts.first;
  const std::vector<io::GgufTensorData>& tensors = parts.second;
  auto write_without = [&](const std::string& key, const std::filesystem::path& p) {
    io::GgufMetadata m;
    for (const auto& kv : md)
      if (kv.first != key) m.push_back(kv);
    io::write_gguf(p, m, tensors);
  };
  write_without("llama.block_count", dir / "a.gguf");
  EXPECT_NE(load_error(dir / "a.gguf").find("metadata key 'llama.block_count' is missing"),
            std::string::npos);

  io::GgufMetadata m = md;
  m[0].second = io::gguf_str("gemma");
  io::write_gguf(dir / "b.gguf", m, tensors);
  EXPECT_NE(load_error(dir / "b.gguf").find("general.architecture 'gemma' is not supported"),
            std::string::npos);

  m = md;
  m.emplace_back("llama.rope.dimension_count", io::gguf_u32(4));
  m.erase(std::find_if(m.begin(), m.end(),
                       [](auto& kv) { return kv.first == "llama.rope.dimension_count"; }));
  io::write_gguf(dir / "c.gguf", m, tensors);
  EXPECT_NE(load_error(dir / "c.gguf").find("partial rotary"), std::string::npos);

  auto extra = tensors;
  extra.push_back({"blk.0.mystery.weight", {4}, k_f32, std::string(16, '\0')});
  io::write_gguf(dir / "d.gguf", md, extra);
  EXPECT_NE(load_error(dir / "d.gguf").find("tensor 'blk.0.mystery.weight' is not part of"),
            std::string::npos);

  auto missing = tensors;
  missing.pop_back();
  io::write_gguf(dir / "e.gguf", md, missing);
  EXPECT_NE(load_error(dir / "e.gguf").find("[load]"), std::string::npos);
}

namespace {
// The divisors llama.cpp's converter writes as rope_freqs.weight for Llama-3
// rope_scaling, written out here from the published rule (not from the code under test).
std::vector<double> llama3_divisors(const model::ModelConfig& c) {
  const model::RopeScaling& s = *c.rope_scaling;
  const double L = static_cast<double>(s.original_max_position_embeddings);
  std::vector<double> out;
  for (int64_t i = 0; i < c.head_dim / 2; ++i) {
    const double freq = std::pow(c.rope_theta, -2.0 * i / c.head_dim);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < L / s.high_freq_factor) {
      out.push_back(1.0);
    } else if (wavelen > L / s.low_freq_factor) {
      out.push_back(s.factor);
    } else {
      const double smooth =
          (L / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      out.push_back(1.0 / ((1 - smooth) / s.factor + smooth));
    }
  }
  return out;
}
}  // namespace

TEST(GgufModel, Llama3RopeScalingTravelsAsRopeFreqsAndGivesTheSameModel) {
  const auto dir = test::make_temp_dir("gguf_model");
  model::ModelWeights w = test::tiny_weights(13);
  // original length 100 puts the 4 pairs of d = 8 (wavelengths 6.3, 63, 628, 6283) in all
  // three regimes of the rule: unchanged, smoothed, divided by the factor.
  w.config.rope_scaling = model::RopeScaling{8.0, 1.0, 4.0, 100};
  formats::write_gguf_model(dir / "l3.gguf", w, k_f32);
  const model::ModelWeights g = formats::load_model((dir / "l3.gguf").string());
  EXPECT_FALSE(g.config.rope_scaling.has_value());
  const std::vector<double> want = llama3_divisors(w.config);
  ASSERT_EQ(g.config.rope_freq_factors.size(), want.size());
  EXPECT_EQ(want.front(), 1.0);
  EXPECT_EQ(want.back(), 8.0);
  EXPECT_GT(want[1], 1.0);
  EXPECT_LT(want[1], 8.0);
  // The file holds them as F32: equal to within fp32 rounding.
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(g.config.rope_freq_factors[i], want[i], 1e-7 * want[i]) << i;
  EXPECT_EQ(g.tensors.count("rope_freqs.weight"), 0u);
  // The same frequencies, so the same model: logits within fp32 noise of the factors'
  // rounding (angles of positions < 40 move by < 40 * 1e-7 rad), the same fingerprint.
  const at::Tensor tokens = at::arange(40, at::kLong).remainder(31).unsqueeze(0);
  const at::Tensor a = model::Transformer(w).forward(tokens);
  const at::Tensor b = model::Transformer(g).forward(tokens);
  EXPECT_LT((a - b).abs().max().item<double>(), 1e-4);
  EXPECT_EQ(formats::model_fingerprint(w), formats::model_fingerprint(g));
  // The scaling matters: without it the model is another one.
  model::ModelWeights plain = w;
  plain.config.rope_scaling.reset();
  EXPECT_GT((model::Transformer(plain).forward(tokens) - b).abs().max().item<double>(), 1e-3);
  EXPECT_NE(formats::model_fingerprint(plain), formats::model_fingerprint(g));
  // An HF directory written from the GGUF model (oal convert) keeps the factors.
  const model::ModelConfig back =
      formats::parse_hf_config(formats::hf_config_to_json(g.config), "test");
  EXPECT_EQ(back.rope_freq_factors, g.config.rope_freq_factors);
  // A config.json whose factors do not fit the head is refused, not half-applied.
  nlohmann::json bad = formats::hf_config_to_json(g.config);
  bad["oal_rope_freq_factors"] = {1.0, 2.0};
  EXPECT_NE(error_of([&] {
              formats::parse_hf_config(bad, "test");
            }).find("expected one per rotary pair (4)"),
            std::string::npos);
  bad["oal_rope_freq_factors"] = {1.0, 2.0, -1.0, 4.0};
  EXPECT_NE(
      error_of([&] { formats::parse_hf_config(bad, "test"); }).find("expected a finite value > 0"),
      std::string::npos);
}

TEST(GgufModel, LinearRopeScalingDividesEveryFrequency) {
  const auto dir = test::make_temp_dir("gguf_model");
  const model::ModelWeights w = test::tiny_weights(5, 1);
  auto parts = formats::gguf_model_parts(w, k_f32);
  parts.first.emplace_back("llama.rope.scaling.type", io::gguf_str("linear"));
  parts.first.emplace_back("llama.rope.scaling.factor", io::gguf_f32(4.0f));
  io::write_gguf(dir / "lin.gguf", parts.first, parts.second);
  const model::ModelWeights g = formats::load_model((dir / "lin.gguf").string());
  EXPECT_EQ(g.config.rope_freq_factors, std::vector<double>(4, 4.0));
  const at::Tensor base = model::Rope(w.config).inv_freq();
  EXPECT_TRUE(at::allclose(model::Rope(g.config).inv_freq(), base / 4.0, 1e-15, 0));
}

TEST(GgufModel, RopeScalingErrorsNameTheProblem) {
  const auto dir = test::make_temp_dir("gguf_model");
  const model::ModelWeights w = test::tiny_weights(5, 1);
  const auto parts = formats::gguf_model_parts(w, k_f32);
  auto with = [&](const std::string& file, const io::GgufMetadata& more,
                  const std::vector<io::GgufTensorData>& tensors) {
    io::GgufMetadata m = parts.first;
    m.insert(m.end(), more.begin(), more.end());
    io::write_gguf(dir / file, m, tensors);
    return load_error(dir / file);
  };
  const uint32_t f32 = k_f32;
  auto freqs = [&](std::vector<float> v) {
    auto t = parts.second;
    std::string bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    t.push_back({"rope_freqs.weight", {static_cast<int64_t>(v.size())}, f32, bytes});
    return t;
  };
  EXPECT_NE(with("yarn.gguf", {{"llama.rope.scaling.type", io::gguf_str("yarn")}}, parts.second)
                .find("rope.scaling.type 'yarn' is not supported"),
            std::string::npos);
  EXPECT_NE(
      with("nofactor.gguf", {{"llama.rope.scaling.type", io::gguf_str("linear")}}, parts.second)
          .find("needs a factor > 0"),
      std::string::npos);
  EXPECT_NE(
      with("short.gguf", {}, freqs({1, 2, 3})).find("expected one factor per rotary pair (4)"),
      std::string::npos);
  EXPECT_NE(with("neg.gguf", {}, freqs({1, 2, -3, 4})).find("expected a finite factor > 0"),
            std::string::npos);
  EXPECT_NE(with("both.gguf",
                 {{"llama.rope.scaling.type", io::gguf_str("linear")},
                  {"llama.rope.scaling.factor", io::gguf_f32(2.0f)}},
                 freqs({1, 2, 3, 4}))
                .find("scales it one way"),
            std::string::npos);
}

namespace {

// tests/model/data/synthetic_llamacpp.json: llama.cpp (llama-cpp-python 0.3.16) on the
// file `oal synth --shape tiny --seed 3 --vocab 320 --gguf f32` writes (scripts/
// llamacpp_synthetic_reference.py; llama.cpp is too slow to build in CI).
nlohmann::json synthetic_reference() {
  std::ifstream in(std::filesystem::path(OAL_SOURCE_DIR) /
                   "tests/model/data/synthetic_llamacpp.json");
  EXPECT_TRUE(in.good()) << "tests/model/data/synthetic_llamacpp.json missing";
  return nlohmann::json::parse(in);
}

// What `oal synth --shape tiny --seed 3 --vocab 320 --gguf f32` writes
// (tools/oal/cmd_synth.cpp): 31 unused padding tokens after the tokenizer's 289.
std::filesystem::path write_synth_tiny_gguf(const std::filesystem::path& dir) {
  fixtures::SyntheticOptions o;
  o.seed = 3;
  o.vocab_size = 320;
  const model::ModelWeights w = fixtures::make_synthetic_weights(o);
  const auto path = dir / "tiny.gguf";
  formats::write_gguf_model(path, w, k_f32,
                            fixtures::synthetic_gguf_tokenizer_metadata(w.config.vocab_size));
  return path;
}

}  // namespace

TEST(GgufModel, LlamaCppReadsTheFileOalWritesAsOalDoes) {
  // The same bytes llama.cpp read (the generator is deterministic), so the comparison is
  // about this file: llama.cpp's logits from oal's names, metadata, Q/K permutation and
  // tokenizer keys. F32 matrices: llama.cpp multiplies them in fp32 without quantizing
  // activations; its KV cache is f16 (rounding K and V to 11 significant bits), which on
  // this 2-layer model moved logits by 0.8–4·10⁻⁴ of their scale (|Δ| 2.5·10⁻⁴–1.1·10⁻³
  // at a scale of 2.6–3.6). 5·10⁻³ of the scale leaves a margin of 12×, while a wrong
  // permutation, head layout, RoPE pairing or norm moves logits by their own magnitude.
  const nlohmann::json ref = synthetic_reference();
  const auto dir = test::make_temp_dir("gguf_llamacpp");
  const auto path = write_synth_tiny_gguf(dir);
  std::ifstream f(path, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(f), {}};
  ASSERT_EQ(test::sha256_hex(bytes), ref["meta"]["gguf_sha256"].get<std::string>())
      << "the synthetic generator or the GGUF writer changed: re-run "
         "scripts/llamacpp_synthetic_reference.py";
  const model::ModelWeights w = formats::load_model(path.string());
  EXPECT_EQ(w.config.vocab_size, ref["meta"]["n_vocab"].get<int64_t>());
  const model::Transformer m(w);
  for (const auto& run : ref["runs"]) {
    const auto ids = run["ids"].get<std::vector<int64_t>>();
    const at::Tensor logits = m.forward(at::tensor(ids, at::kLong).unsqueeze(0))[0].to(at::kDouble);
    const auto argmax = logits.argmax(1);
    const auto want = run["argmax"].get<std::vector<int64_t>>();
    for (size_t t = 0; t < ids.size(); ++t) {
      // An argmax may only differ where llama.cpp's own top two are within the tolerance.
      if (argmax[t].item<int64_t>() == want[t]) continue;
      const double gap = (logits[t][argmax[t]] - logits[t][want[t]]).item<double>();
      EXPECT_LT(gap, 5e-3 * logits[t].abs().max().item<double>()) << "position " << t;
    }
    const auto positions = run["positions"].get<std::vector<int64_t>>();
    for (size_t i = 0; i < positions.size(); ++i) {
      const at::Tensor theirs =
          at::tensor(run["logits"][i].get<std::vector<double>>(), at::kDouble);
      const at::Tensor mine = logits[positions[i]];
      const double scale = theirs.abs().max().item<double>();
      EXPECT_LT((mine - theirs).abs().max().item<double>(), 5e-3 * scale)
          << "position " << positions[i] << ", logits up to " << scale;
    }
  }
  const auto tok = text::load_tokenizer(path);
  for (const auto& t : ref["tokenize"]) {
    const auto ids = tok->encode(t["text"].get<std::string>(), false);
    EXPECT_EQ(std::vector<int64_t>(ids.begin(), ids.end()), t["ids"].get<std::vector<int64_t>>())
        << t["text"];
  }
}
