// Passkey retrieval: prompt construction (the needle where the depth says, the length
// bound kept, keys seeded and of the asked width), aggregation over a fake model whose
// answers are known, option errors, and one real forward on a tiny model.
#include <gtest/gtest.h>

#include "common/tiny_model.h"
#include "oal/core/error.h"
#include "oal/eval/continuation_logprob.h"
#include "oal/eval/passkey.h"

using namespace oal;

namespace {
// One "token" per byte: lengths and positions are then plain string arithmetic.
std::vector<int64_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<int64_t>& ids) { return {ids.begin(), ids.end()}; }
}  // namespace

TEST(Passkey, KeysAreSeededAndHaveTheirDigits) {
  const std::string a = eval::passkey_key(0, 1024, 0.5, 3, 5);
  EXPECT_EQ(a.size(), 5u);
  EXPECT_NE(a[0], '0');
  EXPECT_EQ(a, eval::passkey_key(0, 1024, 0.5, 3, 5));
  EXPECT_NE(a, eval::passkey_key(1, 1024, 0.5, 3, 5));
  EXPECT_NE(a, eval::passkey_key(0, 1024, 0.5, 4, 5));
  EXPECT_EQ(eval::passkey_key(0, 1, 0.0, 0, 12).size(), 12u);
}

TEST(Passkey, NeedleSitsAtItsDepthAndThePromptFits) {
  const std::string needle = " The pass key is 12345. Remember it. 12345 is the pass key.";
  const std::string filler = " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
  for (double depth : {0.0, 0.5, 1.0}) {
    const auto p = eval::make_passkey_prompt(bytes, 2000, depth, "12345");
    const std::string t = text(p.context);
    EXPECT_LE(p.context.size() + p.answer.size(), 2000u);
    // Another filler would not fit (byte tokens: nothing merges).
    EXPECT_GT(p.context.size() + p.answer.size() + filler.size(), 2000u);
    EXPECT_EQ(text(p.answer), " 12345");
    EXPECT_EQ(p.needle_after, std::llround(depth * p.fillers));
    const size_t at = t.find(needle);
    ASSERT_NE(at, std::string::npos);
    EXPECT_EQ(t.find(needle, at + 1), std::string::npos);  // exactly one needle
    // Fillers before the needle: the intro's length plus needle_after fillers.
    const size_t intro = t.find(" The grass");
    const size_t before = depth == 0.0 ? 0 : (at - intro) / filler.size();
    EXPECT_EQ(static_cast<int64_t>(before), p.needle_after);
    EXPECT_EQ(t.substr(t.size() - 38), " What is the pass key? The pass key is");
  }
}

TEST(Passkey, RunCountsWhatTheModelAnswers) {
  eval::PasskeyOptions o;
  o.lengths = {600, 900};
  o.depths = {0.0, 1.0};
  o.trials = 3;
  // A fake model that finds the key only when the needle is at the start.
  int64_t calls = 0;
  auto matches = [&](const std::vector<int64_t>& c, const std::vector<int64_t>& answer) {
    ++calls;
    const std::string t = text(c);
    return t.find("pass key is" + text(answer)) < 300;
  };
  int64_t last_done = 0;
  const auto cells = eval::run_passkey(o, bytes, matches, [&](int64_t d, int64_t n, auto, auto) {
    last_done = d;
    EXPECT_EQ(n, 12);
  });
  EXPECT_EQ(calls, 12);
  EXPECT_EQ(last_done, 12);
  ASSERT_EQ(cells.size(), 4u);
  EXPECT_EQ(cells[0].length, 600);
  EXPECT_EQ(cells[0].depth, 0.0);
  EXPECT_EQ(cells[0].correct, 3);
  EXPECT_EQ(cells[1].correct, 0);
  EXPECT_DOUBLE_EQ(cells[0].accuracy(), 1.0);
  EXPECT_LE(cells[3].tokens, 900);
}

TEST(Passkey, BadOptionsAreNamed) {
  auto fails = [](eval::PasskeyOptions o, const std::string& want) {
    try {
      eval::run_passkey(o, bytes, [](auto&, auto&) { return true; });
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "expected an error with " << want;
  };
  eval::PasskeyOptions o;
  o.depths = {1.5};
  fails(o, "depth 1.5 must be within [0, 1]");
  o = {};
  o.trials = 0;
  fails(o, "trials must be positive");
  o = {};
  o.lengths = {50};
  fails(o, "leave no room for filler");
  o = {};
  o.lengths = {};
  fails(o, "at least one length");
}

TEST(Passkey, GreedyCheckAgreesWithTheModelsArgmax) {
  const model::ModelWeights w = test::tiny_weights(3);
  const model::Transformer m(w);
  const std::vector<int64_t> context = {1, 4, 9, 16};
  // The model's own greedy continuation is greedy by definition; changing a token breaks it.
  std::vector<int64_t> ids = context;
  std::vector<int64_t> greedy;
  for (int i = 0; i < 3; ++i) {
    const at::Tensor logits = m.forward(at::tensor(ids, at::kLong).unsqueeze(0));
    greedy.push_back(logits[0][-1].argmax().item<int64_t>());
    ids.push_back(greedy.back());
  }
  EXPECT_TRUE(eval::continuation_is_greedy(m, context, greedy));
  std::vector<int64_t> wrong = greedy;
  wrong[1] = (wrong[1] + 1) % 32;
  EXPECT_FALSE(eval::continuation_is_greedy(m, context, wrong));
}
