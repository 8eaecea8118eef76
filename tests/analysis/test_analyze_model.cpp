// The analysis pipeline on real forwards: a synthetic model with planted outlier
// dimensions (they must leave the bulk group), stories260K end to end, bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "common/shared_data.h"
#include "oal/analysis/analyze.h"
#include "oal/analysis/layer_groups.h"
#include "oal/core/error.h"
#include "oal/fixtures/synthetic.h"
#include "oal/formats/load.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"
#include "planted_model.h"

namespace oa = oal::analysis;
namespace om = oal::model;

namespace {

// Deterministic token sequences (ids in [3, vocab)) of varying lengths.
std::vector<std::vector<int32_t>> token_prompts(int64_t count, int64_t vocab, uint64_t seed) {
  std::vector<std::vector<int32_t>> out;
  uint64_t x = seed * 2654435761u + 1;
  for (int64_t p = 0; p < count; ++p) {
    std::vector<int32_t> ids(static_cast<size_t>(16 + (p * 7) % 21));
    for (auto& id : ids) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      id = static_cast<int32_t>(3 + (x >> 33) % static_cast<uint64_t>(vocab - 3));
    }
    out.push_back(ids);
  }
  return out;
}

oal::fixtures::SyntheticOptions planted_options() {
  return oal::test::planted_model_options(2);
}

}  // namespace

TEST(AnalyzeModel, PlantedOutlierDimensionsLeaveTheBulk) {
  const oal::fixtures::SyntheticOptions so = planted_options();
  const om::Transformer model(oal::fixtures::make_synthetic_weights(so));
  const auto planted = oal::fixtures::synthetic_planted_dims(so);
  oa::PromptSet prompts;
  prompts.calibration = token_prompts(16, model.config().vocab_size, 1);
  prompts.heldout = token_prompts(8, model.config().vocab_size, 2);
  prompts.prefix_sequence = token_prompts(1, model.config().vocab_size, 3)[0];
  oa::AnalyzeOptions ao;
  ao.top_k = 2;
  const oa::AnalysisResult r = oa::analyze_model(model, prompts, ao);
  ASSERT_EQ(r.layers.size(), 2u);
  oa::GroupingOptions go;
  go.bootstrap = 200;
  const auto groups = oa::group_analysis(r, go);
  for (size_t l = 0; l < r.layers.size(); ++l) {
    const std::set<int64_t> want(planted[l].begin(), planted[l].end());
    for (size_t h = 0; h < r.layers[l].heads.size(); ++h) {
      const auto& head = r.layers[l].heads[h];
      const auto& g = groups[l].heads[h];
      SCOPED_TRACE(testing::Message() << "layer " << l << " head " << h);
      for (int64_t r_dim : planted[l]) EXPECT_NE(g.group_of[r_dim], 0) << "planted dim " << r_dim;
      // The two largest χ are exactly the planted pair.
      EXPECT_EQ(std::set<int64_t>(head.top_dims.begin(), head.top_dims.end()), want);
      EXPECT_GT(head.top_share, head.gaussian_top_share);
      EXPECT_EQ(head.heldout_top_overlap, 2);
      // The bulk dims of random-token prompts rank almost at random, so ρ itself is only
      // checked for range here (its arithmetic is tested in test_profile_stats).
      EXPECT_GE(head.heldout_spearman, -1.0);
      EXPECT_LE(head.heldout_spearman, 1.0);
      EXPECT_EQ(head.chi_per_prompt.size(), 16u);
      EXPECT_EQ(head.kv_head, static_cast<int64_t>(h) / 2);
    }
    EXPECT_EQ(r.layers[l].activation.max_abs.size(), 64u);
  }
}

TEST(AnalyzeModel, BadInputGetsClearErrors) {
  const oal::fixtures::SyntheticOptions so = planted_options();
  const om::Transformer model(oal::fixtures::make_synthetic_weights(so));
  oa::PromptSet prompts;
  prompts.calibration = token_prompts(3, model.config().vocab_size, 1);
  oa::AnalyzeOptions ao;
  ao.layers = {2};
  try {
    oa::analyze_model(model, prompts, ao);
    FAIL() << "expected an unknown-layer error";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 2 does not exist"), std::string::npos) << e.what();
  }
  ao.layers = {1, 1};
  EXPECT_THROW(oa::analyze_model(model, prompts, ao), oal::Error);
  ao.layers = {};
  prompts.calibration.resize(1);
  EXPECT_THROW(oa::analyze_model(model, prompts, ao), oal::Error);
  prompts.calibration = {{5, 6}, {}};
  EXPECT_THROW(oa::analyze_model(model, prompts, ao), oal::Error);
  prompts.calibration = {std::vector<int32_t>(600, 5), {5}};  // longer than 512 positions
  EXPECT_THROW(oa::analyze_model(model, prompts, ao), oal::Error);

  const auto dir = std::filesystem::temp_directory_path() / "oal_test_analyze_tok";
  oal::fixtures::write_synthetic_model(dir, so);
  auto tok = oal::text::load_tokenizer(dir);
  oa::PromptOptions po;
  po.calibration = 4;
  po.heldout_fraction = 0.5;
  const std::vector<std::string> five{"a b", "c d", "e f", "g h", "i j"};
  EXPECT_THROW(oa::make_prompt_set({}, *tok, po), oal::Error);  // empty text
  try {
    oa::make_prompt_set(five, *tok, po);  // needs 4 + 2
    FAIL() << "expected a too-few-prompts error";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected at least 6"), std::string::npos) << e.what();
  }
  po.heldout_fraction = 0.25;  // 4 + 1 fits
  const oa::PromptSet ok = oa::make_prompt_set(five, *tok, po);
  EXPECT_EQ(ok.calibration.size(), 4u);
  EXPECT_EQ(ok.heldout.size(), 1u);
  EXPECT_FALSE(ok.prefix_sequence.empty());
  po.heldout_fraction = 1.5;
  EXPECT_THROW(oa::make_prompt_set(five, *tok, po), oal::Error);
  po.heldout_fraction = 0.0;
  po.calibration = 1;
  EXPECT_THROW(oa::make_prompt_set(five, *tok, po), oal::Error);
  std::filesystem::remove_all(dir);
}

TEST(AnalyzeModel, Stories260KEndToEndGivesEveryHeadAtLeastGMinGroups) {
  const auto model_path = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const auto tok_path = OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const auto text_path = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const om::Transformer model(oal::formats::load_model(model_path.string()));
  auto tok = oal::text::load_tokenizer(tok_path);
  oa::PromptOptions po;  // the paper's 40 calibration prompts, 10 held out
  po.calibration = 40;
  po.heldout_fraction = 0.25;
  po.ctx = 128;
  const auto paragraphs = oal::text::split_paragraphs(oal::text::read_text_file(text_path));
  const oa::PromptSet prompts = oa::make_prompt_set(paragraphs, *tok, po);
  const oa::AnalysisResult r = oa::analyze_model(model, prompts, {});
  ASSERT_EQ(r.layers.size(), 5u);
  oa::GroupingOptions go;
  go.bootstrap = 200;
  const auto groups = oa::group_analysis(r, go);
  for (const auto& l : groups)
    for (const auto& g : l.heads) {
      EXPECT_GE(g.num_groups(), go.g_min);
      int64_t dims = 0;
      for (const auto& grp : g.groups) dims += static_cast<int64_t>(grp.size());
      EXPECT_EQ(dims, 8);  // a partition of the head dim
    }
  for (const auto& l : r.layers) {
    for (const auto& h : l.heads) {
      EXPECT_EQ(h.chi_per_prompt.size(), 40u);
      EXPECT_FALSE(h.chi_heldout.empty());
      EXPECT_FALSE(h.prefix.empty());
      EXPECT_EQ(h.prefix.back().length, 128);
    }
    EXPECT_EQ(l.activation.max_abs.size(), 64u);
  }
}

TEST(AnalyzeModel, GroupingPromptsStartAfterTheFittingAndEvaluationBlocks) {
  // The paper's default split uses blocks 0..25 of 256 tokens; the prompts must come from
  // text the blocks never cover: the first kept paragraph is absent from the decoded
  // blocks and present in the rest of the stream.
  const auto tok_path = OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const auto text_path = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  auto tok = oal::text::load_tokenizer(tok_path);
  const std::string text = oal::text::read_text_file(text_path);
  const auto paragraphs = oal::text::split_paragraphs(text);
  const std::vector<int32_t> stream = tok->encode(text, false);
  const int64_t covered = 26 * 256;
  const auto kept = oa::paragraphs_after_tokens(paragraphs, *tok, covered);
  ASSERT_LT(kept.size(), paragraphs.size());
  ASSERT_GE(kept.size(), 60u);
  EXPECT_EQ(kept.back(), paragraphs.back());  // a suffix of the paragraphs
  const std::string blocks = tok->decode({stream.begin(), stream.begin() + covered});
  const std::string rest = tok->decode({stream.begin() + covered, stream.end()});
  const std::string& first = kept.front();  // whole paragraph: openings repeat in TinyStories
  EXPECT_EQ(blocks.find(first), std::string::npos) << first;
  EXPECT_NE(rest.find(first), std::string::npos) << first;
  // The paragraph before it is the margin; nothing is skipped without blocks.
  EXPECT_EQ(oa::paragraphs_after_tokens(paragraphs, *tok, 0).size(), paragraphs.size());
  try {
    oa::paragraphs_after_tokens(paragraphs, *tok, static_cast<int64_t>(stream.size()) * 2);
    FAIL() << "expected a no-paragraph-left error";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("separate prompt file"), std::string::npos) << e.what();
  }
}
