// open_model: every part of a model opened with one read of each file, and the same
// parts as the separate loaders give (formats/open_model.h).
#include "oal/formats/open_model.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/shared_data.h"
#include "common/temp_dir.h"
#include "oal/core/error.h"
#include "oal/fixtures/synthetic.h"
#include "oal/fixtures/synthetic_tokenizer.h"
#include "oal/formats/converted.h"
#include "oal/formats/find_tokenizer.h"
#include "oal/formats/gguf_export.h"
#include "oal/formats/stop_tokens.h"
#include "oal/io/gguf.h"
#include "oal/io/gguf_quants.h"
#include "oal/text/gguf_tokenizer.h"

namespace oal {
namespace {

namespace fs = std::filesystem;

constexpr const char* k_template = "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}";

// A synthetic llama GGUF (f32) carrying the synthetic tokenizer and a chat template.
fs::path write_gguf_with_template(const fs::path& dir) {
  fixtures::SyntheticOptions o;
  o.seed = 5;
  const model::ModelWeights w = fixtures::make_synthetic_weights(o);
  io::GgufMetadata extra = fixtures::synthetic_gguf_tokenizer_metadata(w.config.vocab_size);
  extra.emplace_back("tokenizer.chat_template", io::gguf_str(k_template));
  const fs::path path = dir / "model.gguf";
  formats::write_gguf_model(path, w, static_cast<uint32_t>(io::GgmlType::F32), extra);
  return path;
}

// Logits of the first few tokens of `text`: the same model gives the same numbers.
at::Tensor logits_of(const model::Transformer& m, const text::Tokenizer& tok) {
  const std::vector<int32_t> ids = tok.encode("the cat sat on the mat", /*add_bos=*/true);
  return m.forward(at::tensor(std::vector<int64_t>(ids.begin(), ids.end())).unsqueeze(0));
}

TEST(OpenModel, GgufIsParsedOnceForWeightsTokenizerTemplateAndStopTokens) {
  const auto dir = test::make_temp_dir("open_model_gguf");
  const fs::path path = write_gguf_with_template(dir);
  const uint64_t before = io::gguf_headers_parsed();
  const formats::OpenedModel m = formats::open_model(path);
  // One parse: the weights, the tokenizer and the template come from the same header.
  EXPECT_EQ(io::gguf_headers_parsed() - before, 1u);

  EXPECT_EQ(m.chat_template, k_template);
  const auto tok = formats::open_tokenizer(path);  // the separate loaders, for comparison
  const auto model = formats::load_transformer(path.string());
  EXPECT_EQ(m.tokenizer->encode("the cat sat", true), tok->encode("the cat sat", true));
  EXPECT_EQ(m.stop_tokens, formats::default_stop_tokens(model->config(), *tok));
  EXPECT_EQ(m.stop_tokens, std::vector<int32_t>{int32_t(fixtures::synthetic_endoftext_id())});
  // Same weights, same kernels: equal to the bit.
  EXPECT_TRUE(at::equal(logits_of(*m.model, *m.tokenizer), logits_of(*model, *tok)));
}

TEST(OpenModel, TokenizerGgufBesideAModelIsParsedOnceForTokenizerAndTemplate) {
  // A converted directory from a GGUF source keeps tokenizer.gguf (tokenizer keys and the
  // template) beside HF files: the one file serves both.
  const auto dir = test::make_temp_dir("open_model_dir");
  fixtures::SyntheticOptions o;
  o.seed = 5;
  fixtures::write_synthetic_model(dir / "m", o);
  text::write_gguf_tokenizer(write_gguf_with_template(dir), dir / "m" / "tokenizer.gguf");
  fs::remove(dir / "m" / "tokenizer.json");  // else tokenizer.json is found first
  const uint64_t before = io::gguf_headers_parsed();
  const formats::OpenedModel m = formats::open_model(dir / "m");
  EXPECT_EQ(io::gguf_headers_parsed() - before, 1u);
  EXPECT_EQ(m.chat_template, k_template);
  EXPECT_EQ(m.tokenizer->kind(), formats::open_tokenizer(dir / "m")->kind());
}

TEST(OpenModel, HfDirectoryTakesTheTemplateOfTokenizerConfig) {
  const auto dir = test::make_temp_dir("open_model_hf");
  fixtures::SyntheticOptions o;
  o.seed = 5;
  fixtures::write_synthetic_model(dir, o);
  EXPECT_EQ(formats::open_model(dir).chat_template, "");  // the synthetic one has none
  nlohmann::json cfg;
  std::ifstream(dir / "tokenizer_config.json") >> cfg;
  cfg["chat_template"] = k_template;
  std::ofstream(dir / "tokenizer_config.json") << cfg.dump();
  const uint64_t before = io::gguf_headers_parsed();
  const formats::OpenedModel m = formats::open_model(dir);
  EXPECT_EQ(io::gguf_headers_parsed() - before, 0u);
  EXPECT_EQ(m.chat_template, k_template);
  EXPECT_EQ(m.stop_tokens, std::vector<int32_t>{int32_t(fixtures::synthetic_endoftext_id())});
}

TEST(OpenModel, MissingModelAndTokenizerSayWhatToPass) {
  const auto dir = test::make_temp_dir("open_model_missing");
  try {
    formats::open_model(dir / "absent.gguf");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[model]"), std::string::npos) << e.what();
  }
  fixtures::SyntheticOptions o;
  fixtures::write_synthetic_model(dir / "m", o);
  fs::remove(dir / "m" / "tokenizer.json");
  try {
    formats::open_model(dir / "m");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--tokenizer"), std::string::npos) << e.what();
  }
}

TEST(OpenModel, SmolLM2GgufIsParsedOnce) {
  const fs::path path = test::model_cache_file("SmolLM2-135M-Instruct.Q4_1.gguf");
  OAL_REQUIRE_PATH(path, "SmolLM2 GGUF (scripts/fetch-models.sh)");
  const uint64_t before = io::gguf_headers_parsed();
  const formats::OpenedModel m = formats::open_model(path);
  EXPECT_EQ(io::gguf_headers_parsed() - before, 1u);
  EXPECT_NE(m.chat_template.find("<|im_start|>"), std::string::npos);
  // SmolLM2's end of sequence is <|im_end|> (id 2), its BOS/EOS pair <|endoftext|> (0)
  // is not listed by the GGUF as EOS: 2 must be there.
  EXPECT_NE(std::find(m.stop_tokens.begin(), m.stop_tokens.end(), 2), m.stop_tokens.end());
  EXPECT_EQ(m.tokenizer->vocab_size(), 49152);
}

TEST(StopTokens, ConfigAndTokenizerIdsSortedWithoutRepeats) {
  const auto dir = test::make_temp_dir("stop_tokens");
  fixtures::write_synthetic_model(dir, {});
  const auto tok = formats::open_tokenizer(dir);
  const int32_t eot = int32_t(fixtures::synthetic_endoftext_id());
  model::ModelConfig c;
  c.eos_token_id = 7;
  c.eos_token_ids = {9, 7, eot};
  // 7 twice and the tokenizer's EOS (also in the list) once: {7, 9, eot}.
  EXPECT_EQ(formats::default_stop_tokens(c, *tok), (std::vector<int32_t>{7, 9, eot}));
  c.eos_token_id.reset();
  c.eos_token_ids.clear();
  EXPECT_EQ(formats::default_stop_tokens(c, *tok), std::vector<int32_t>{eot});
}

}  // namespace
}  // namespace oal
