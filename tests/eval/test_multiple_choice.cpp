// Multiple-choice scoring (App. F.3): parsing of the three public JSONL layouts, the
// HellaSwag preprocessing, candidate token splitting and acc / acc_norm ranking.
// Fixtures in tests/eval/data/*_synthetic.jsonl are hand-written, not dataset rows.
#include <gtest/gtest.h>

#include <map>

#include "oal/core/error.h"
#include "oal/eval/multiple_choice.h"

namespace {

using namespace oal::eval;
const std::string k_data = std::string(OAL_SOURCE_DIR) + "/tests/eval/data/";

// One token per byte, no specials.
std::vector<int64_t> byte_tokens(const std::string& s) {
  return std::vector<int64_t>(s.begin(), s.end());
}
std::string bytes_text(const std::vector<int64_t>& t) { return std::string(t.begin(), t.end()); }

TEST(MultipleChoice, HellaswagPreprocessMatchesLmEvalRules) {
  EXPECT_EQ(hellaswag_preprocess("  a [title] b  "), "a. b");
  EXPECT_EQ(hellaswag_preprocess("x [step] y"), "x y");
  EXPECT_EQ(hellaswag_preprocess("[a] [b]"), " ");
  EXPECT_EQ(hellaswag_preprocess("a [b\n] c"), "a [b\n] c");  // '.' does not cross '\n'
  EXPECT_EQ(hellaswag_preprocess("a   b"), "a  b");           // one replace pass
  EXPECT_EQ(hellaswag_preprocess("[x] [y] z"), " z");  // ' ' + ' z' -> one pass gives " z"
  EXPECT_EQ(hellaswag_preprocess("a [unclosed"), "a [unclosed");
  EXPECT_EQ(python_capitalize("he PICKS up"), "He picks up");
  EXPECT_EQ(python_capitalize(""), "");
}

TEST(MultipleChoice, LoadsPiqaFixture) {
  auto ex = load_mc_examples(McTask::piqa, k_data + "piqa_synthetic.jsonl");
  ASSERT_EQ(ex.size(), 3u);  // the blank line is skipped
  EXPECT_EQ(ex[0].context, "Question: SYNTHETIC: keep a drink cold\nAnswer:");
  EXPECT_EQ(ex[1].choices, (std::vector<std::string>{"wave them in water", "use a towel"}));
  EXPECT_EQ(ex[1].label, 1);
  EXPECT_EQ(load_mc_examples(McTask::piqa, k_data + "piqa_synthetic.jsonl", 2).size(), 2u);
}

TEST(MultipleChoice, LoadsHellaswagFixtureWithPreprocessing) {
  auto ex = load_mc_examples(McTask::hellaswag, k_data + "hellaswag_synthetic.jsonl");
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].context,
            "Synthetic cooking: A man stands in a kitchen. He picks up a knife");
  EXPECT_EQ(ex[0].choices, (std::vector<std::string>{"and cuts the bread. slowly.",
                                                     "and flies away.", "and sings",
                                                     "then sleeps."}));
  EXPECT_EQ(ex[0].label, 0);  // string label "0"
  EXPECT_EQ(ex[1].context, "Synthetic sports: A girl runs on a track. She jumps");
  EXPECT_EQ(ex[1].choices.size(), 3u);
}

TEST(MultipleChoice, LoadsArcFixtureMappingAnswerKeys) {
  auto ex = load_mc_examples(McTask::arc_easy, k_data + "arc_easy_synthetic.jsonl");
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].context, "Question: SYNTHETIC: Which is a liquid?\nAnswer:");
  EXPECT_EQ(ex[0].label, 0);
  EXPECT_EQ(ex[1].label, 0);  // numeric-style keys "1".."4"
  EXPECT_EQ(ex[0].choices[2], "a very long wooden plank");
}

TEST(MultipleChoice, BadInputNamesFileLineAndField) {
  try {
    load_mc_examples(McTask::piqa, k_data + "bad_label.jsonl");
    FAIL() << "expected an error";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad_label.jsonl:2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("label"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_mc_examples(McTask::piqa, k_data + "missing.jsonl"), oal::Error);
  EXPECT_THROW(parse_mc_line(McTask::arc_easy, R"({"question":{"stem":"q","choices":[{"text":"a","label":"A"}]},"answerKey":"B"})"),
               oal::Error);
  EXPECT_THROW(parse_mc_line(McTask::piqa, R"({"goal":"g","sol1":"a","label":0})"), oal::Error);
  EXPECT_THROW(parse_mc_line(McTask::piqa, "not json"), oal::Error);
  EXPECT_THROW(parse_mc_task("boolq"), oal::Error);
}

// Labels beyond int64: a 20-digit string made std::stoll throw std::out_of_range, a float
// label would be a cast; both are named errors now.
TEST(MultipleChoice, HugeOrFloatLabelsAreNamedErrors) {
  for (const char* label : {R"("99999999999999999999")", "2.5", "1e300", "18446744073709551615"}) {
    const std::string line =
        std::string(R"({"goal":"g","sol1":"a","sol2":"b","label":)") + label + "}";
    try {
      parse_mc_line(McTask::piqa, line);
      ADD_FAILURE() << "no error for label " << label;
    } catch (const oal::Error& e) {
      EXPECT_NE(std::string(e.what()).find("field 'label'"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not an oal::Error for label " << label << ": " << e.what();
    }
  }
}

TEST(MultipleChoice, SplitScoresOnlyCandidateTokensAndTruncatesContextLeft) {
  // A tokenizer with a dummy-prefix token 0 in front, like llama2.c's.
  auto tok = [](const std::string& s) {
    auto t = byte_tokens(s);
    t.insert(t.begin(), 0);
    return t;
  };
  auto c = split_candidate(tok, "ab", "c", 0);
  EXPECT_EQ(c.context, (std::vector<int64_t>{0, 'a', 'b'}));
  EXPECT_EQ(c.continuation, (std::vector<int64_t>{' ', 'c'}));
  auto t = split_candidate(tok, "ab", "c", 3);  // 2 continuation tokens + 1 context token
  EXPECT_EQ(t.context, (std::vector<int64_t>{'b'}));
  EXPECT_EQ(t.continuation, (std::vector<int64_t>{' ', 'c'}));
  EXPECT_THROW(split_candidate(tok, "ab", "cdef", 3), oal::Error);
}

TEST(MultipleChoice, AccAndAccNormRankDifferently) {
  // Example 0 (label 0): choice 0 has the higher sum, choice 1 the higher per-token mean.
  // Example 1 (label 1): choice 1 wins both.  Example 2 (label 0): choice 1 wins both.
  // Expected by hand: acc = 2/3 (ex 0, ex 1), acc_norm = 1/3 (ex 1).
  std::map<std::string, double> lp = {
      {" put ice in it", -14.0},        // 14 tokens -> -1.0 per token
      {" put it in the oven", -15.2},   // 19 tokens -> -0.8 per token
      {" wave them in water", -30.0},  {" use a towel", -5.0},
      {" twist the lid", -20.0},       {" shout at it", -3.0}};
  auto examples = load_mc_examples(McTask::piqa, k_data + "piqa_synthetic.jsonl");
  std::vector<std::string> seen_contexts;
  auto logprob = [&](const std::vector<int64_t>& ctx, const std::vector<int64_t>& cont) {
    seen_contexts.push_back(bytes_text(ctx));
    return lp.at(bytes_text(cont));
  };
  auto r = score_multiple_choice(McTask::piqa, LengthNorm::tokens, examples, byte_tokens,
                                 logprob, 0);
  EXPECT_EQ(r.total, 3);
  EXPECT_EQ(r.correct, 2);
  EXPECT_EQ(r.correct_norm, 1);
  EXPECT_EQ(r.examples[0].pred, 0);
  EXPECT_EQ(r.examples[0].pred_norm, 1);
  EXPECT_EQ(r.examples[0].choices[1].tokens, 19);
  EXPECT_DOUBLE_EQ(r.examples[0].choices[1].normalized, -0.8);
  EXPECT_EQ(seen_contexts[0], "Question: SYNTHETIC: keep a drink cold\nAnswer:");
}

TEST(MultipleChoice, CharNormalisationCountsCodePointsWithoutTheSpace) {
  // "café" is 4 code points (5 bytes); "ab" is 2.  Sums -4.4 and -2.4: acc picks "ab"
  // (higher sum), per-char -1.1 vs -1.2 picks "café".
  std::vector<McExample> ex = {{"Question: q\nAnswer:", {"café", "ab"}, 0}};
  auto logprob = [](const std::vector<int64_t>&, const std::vector<int64_t>& cont) {
    return bytes_text(cont) == " ab" ? -2.4 : -4.4;
  };
  auto r = score_multiple_choice(McTask::arc_easy, LengthNorm::chars, ex, byte_tokens, logprob, 0);
  EXPECT_EQ(r.examples[0].choices[0].chars, 4);
  EXPECT_EQ(r.examples[0].pred, 1);
  EXPECT_EQ(r.examples[0].pred_norm, 0);
  EXPECT_EQ(r.correct, 0);
  EXPECT_EQ(r.correct_norm, 1);
  EXPECT_EQ(default_length_norm(McTask::arc_easy), LengthNorm::chars);
  EXPECT_EQ(default_length_norm(McTask::hellaswag), LengthNorm::tokens);
}

TEST(MultipleChoice, TiesGoToTheFirstChoiceAndNanIsRejected) {
  auto r = rank_choices({{-1.0, 1, 1, 0}, {-1.0, 1, 1, 0}}, 1, LengthNorm::tokens);
  EXPECT_EQ(r.pred, 0);
  EXPECT_THROW(rank_choices({{std::nan(""), 1, 1, 0}}, 0, LengthNorm::tokens), oal::Error);
}

}  // namespace
