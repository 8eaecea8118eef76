// The one decode loop (generate/decode_loop.h): what a step reads, and sequences stepped
// together against the full forward of each sequence alone.
#include <gtest/gtest.h>

#include <memory>

#include "common/error_of.h"
#include "common/tiny_model.h"
#include "oal/generate/decode_loop.h"
#include "oal/generate/generate.h"
#include "oal/model/transformer.h"

using namespace oal::generate;
using oal::model::Transformer;
using oal::test::error_of;

namespace {

std::unique_ptr<DecodeRow> row_of(std::vector<int32_t> prompt, int64_t max_new = 8,
                                  std::vector<int32_t> stop = {}) {
  return std::make_unique<DecodeRow>(std::move(prompt), Transformer::LayerStates{},
                                     TokenPicker({}, std::move(stop), max_new, 0));
}

std::vector<int64_t> ids(const at::Tensor& t) {
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

// Greedy next token of `seq` by the full forward (no states, no loop): the reference.
int32_t argmax_next(const Transformer& model, const std::vector<int32_t>& seq) {
  const std::vector<int64_t> s(seq.begin(), seq.end());
  const at::Tensor logits = model.forward(at::tensor(s, at::kLong).unsqueeze(0));
  return static_cast<int32_t>(logits[0][-1].argmax().item<int64_t>());
}

}  // namespace

TEST(DecodeLoop, PlanReadsDecodingTokensAndSharesThePromptBudgetInOrder) {
  auto a = row_of({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  auto b = row_of({4, 4});
  b->prefilled = 2;
  b->next_token = 5;  // decoding
  auto c = row_of({7, 8, 9, 10});
  auto d = row_of({1});
  d->finished = true;
  auto e = row_of({3});
  e->prefilled = 1;  // prompt read, nothing picked yet: waits
  const std::vector<DecodeRow*> rows{a.get(), b.get(), c.get(), d.get(), e.get()};

  const StepPlan small = plan_step(rows, 6);
  ASSERT_EQ(small.rows, (std::vector<DecodeRow*>{a.get(), b.get()}));
  EXPECT_EQ(ids(small.tokens[0]), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(ids(small.tokens[1]), (std::vector<int64_t>{5}));
  EXPECT_EQ(small.prompt_tokens, 6);
  EXPECT_EQ(small.decoding, 1);

  const StepPlan big = plan_step(rows, 100);
  ASSERT_EQ(big.rows, (std::vector<DecodeRow*>{a.get(), b.get(), c.get()}));
  EXPECT_EQ(big.tokens[0].numel(), 10);
  EXPECT_EQ(ids(big.tokens[2]), (std::vector<int64_t>{7, 8, 9, 10}));
  EXPECT_EQ(big.prompt_tokens, 14);

  a->prefilled = 7;  // the rest of a's prompt only
  EXPECT_EQ(ids(plan_step(rows, 2).tokens[0]), (std::vector<int64_t>{8, 9}));

  EXPECT_NE(error_of([&] { plan_step(rows, 0); }).find("prompt budget must be >= 1"),
            std::string::npos);
  EXPECT_TRUE(plan_step({d.get(), e.get()}, 4).rows.empty());
}

// Three sequences of different prompt lengths stepped together with a small prompt
// budget (prompt pieces beside decoding rows, rows ending at different steps): each
// greedy token equals the argmax of the full forward of that sequence alone, exactly
// (fp32 both; the argmax of a synthetic model's logits has no near ties at these
// prompts, as the generate test of the same model shows).
TEST(DecodeLoop, RowsSteppedTogetherEqualTheFullForwardOfEachAlone) {
  oal::fixtures::SyntheticOptions o;
  o.planted_scale = 2.0;
  const Transformer model(oal::test::synthetic_checkpoint(o, "loop"));
  const std::vector<std::vector<int32_t>> prompts{{5, 17, 3}, {9, 1, 2, 8, 30, 4, 7}, {11}};
  const std::vector<int64_t> max_new{6, 4, 9};
  std::vector<std::unique_ptr<DecodeRow>> rows;
  std::vector<DecodeRow*> ptrs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    rows.push_back(std::make_unique<DecodeRow>(prompts[i], model.new_states(1),
                                               TokenPicker({}, {}, max_new[i], 0)));
    ptrs.push_back(rows.back().get());
  }
  std::vector<std::vector<int32_t>> picked(prompts.size());
  int64_t steps = 0;
  for (;; ++steps) {
    const StepPlan plan = plan_step(ptrs, 3);
    if (plan.rows.empty()) break;
    for (const StepPick& p : run_step(model, plan).picks) {
      for (size_t r = 0; r < ptrs.size(); ++r)
        if (p.row == ptrs[r]) {
          picked[r].push_back(p.pick.token);
          if (p.pick.end != EndReason::none) ptrs[r]->finished = true;
          EXPECT_EQ(ptrs[r]->next_token, p.pick.end == EndReason::none ? p.pick.token : -1);
        }
    }
  }
  EXPECT_GT(steps, 9);  // the prompts took several steps beside decoding rows
  for (size_t r = 0; r < prompts.size(); ++r) {
    ASSERT_EQ(static_cast<int64_t>(picked[r].size()), max_new[r]) << "row " << r;
    std::vector<int32_t> seq = prompts[r];
    for (int32_t t : picked[r]) {
      EXPECT_EQ(t, argmax_next(model, seq)) << "row " << r << " at " << seq.size();
      seq.push_back(t);
    }
    // The states read the prompt and every token fed back (not the last one picked).
    std::vector<int32_t> fed = prompts[r];
    fed.insert(fed.end(), picked[r].begin(), picked[r].end() - 1);
    EXPECT_EQ(rows[r]->fed, fed) << "row " << r;
    EXPECT_EQ(rows[r]->states.front()->tokens(), static_cast<int64_t>(fed.size()));
    // generate() runs the same loop with one row: the same tokens.
    GenerateOptions g;
    g.max_new_tokens = max_new[r];
    EXPECT_EQ(generate(model, prompts[r], g).tokens, picked[r]) << "row " << r;
  }
}

TEST(DecodeLoop, AStopTokenEndsItsRowOnly) {
  oal::fixtures::SyntheticOptions o;
  const Transformer model(oal::test::synthetic_checkpoint(o, "loop_stop"));
  const int32_t first = argmax_next(model, {1, 2, 3});
  DecodeRow a({1, 2, 3}, model.new_states(1), TokenPicker({}, {first}, 5, 0));
  DecodeRow b({1, 2, 3}, model.new_states(1), TokenPicker({}, {}, 5, 0));
  const auto picks = run_step(model, plan_step({&a, &b}, 6)).picks;
  ASSERT_EQ(picks.size(), 2u);
  EXPECT_EQ(picks[0].pick.token, first);
  EXPECT_EQ(picks[0].pick.end, EndReason::stop);
  EXPECT_EQ(a.next_token, -1);  // ended: nothing to read next
  EXPECT_EQ(picks[1].pick.end, EndReason::none);
  EXPECT_EQ(b.next_token, first);
  EXPECT_EQ(plan_step({&a, &b}, 6).rows, (std::vector<DecodeRow*>{&b}));
  EXPECT_NE(error_of([&] { run_step(model, StepPlan{}); }).find("the plan has no rows"),
            std::string::npos);
}
