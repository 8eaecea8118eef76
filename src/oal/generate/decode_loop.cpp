#include "oal/generate/decode_loop.h"

#include <algorithm>
#include <chrono>

#include "oal/core/error.h"

namespace oal::generate {
namespace {

at::Tensor token_tensor(const int32_t* ids, int64_t n) {
  at::Tensor t = at::empty({n}, at::kLong);
  int64_t* d = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) d[i] = ids[i];
  return t;
}

// Notes that `row` read `n` tokens of the plan; true when it picks a token now (it
// decoded, or its prompt is complete).
bool absorb(DecodeRow& row, int64_t n) {
  if (!row.prefilling()) {
    row.fed.push_back(row.next_token);
    return true;
  }
  const auto begin = row.prompt.begin() + row.prefilled;
  row.fed.insert(row.fed.end(), begin, begin + n);
  row.prefilled += n;
  return !row.prefilling();
}

}  // namespace

StepPlan plan_step(const std::vector<DecodeRow*>& rows, int64_t prompt_budget) {
  check(prompt_budget >= 1, "generate", "plan_step: prompt budget must be >= 1, got {}",
        prompt_budget);
  StepPlan plan;
  for (DecodeRow* row : rows) {
    if (row->decoding()) {
      plan.tokens.push_back(token_tensor(&row->next_token, 1));
      plan.decoding += 1;
    } else if (!row->finished && row->prefilling() && prompt_budget > 0) {
      const int64_t n = std::min(prompt_budget, row->prompt_size() - row->prefilled);
      plan.tokens.push_back(token_tensor(row->prompt.data() + row->prefilled, n));
      prompt_budget -= n;
      plan.prompt_tokens += n;
    } else {
      continue;
    }
    plan.rows.push_back(row);
  }
  return plan;
}

StepResult run_step(const model::Transformer& model, const StepPlan& plan) {
  check(!plan.rows.empty(), "generate", "run_step: the plan has no rows");
  at::NoGradGuard no_grad;
  std::vector<model::Transformer::LayerStates*> states;
  for (DecodeRow* row : plan.rows) states.push_back(&row->states);
  const at::Tensor h = model.extend_rows(plan.tokens, states);
  std::vector<int64_t> emit;  // the rows that pick a token now: logits for them only
  for (size_t r = 0; r < plan.rows.size(); ++r)
    if (absorb(*plan.rows[r], plan.tokens[r].size(0))) emit.push_back(static_cast<int64_t>(r));
  StepResult result;
  if (emit.empty()) return result;
  const bool all = emit.size() == plan.rows.size();
  const at::Tensor logits = model.logits(all ? h : h.index_select(0, at::tensor(emit)));
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t e = 0; e < emit.size(); ++e) {
    DecodeRow& row = *plan.rows[static_cast<size_t>(emit[e])];
    const TokenPicker::Pick p =
        row.picker.pick(logits[static_cast<int64_t>(e)], row.states.front()->tokens());
    row.next_token = p.end == EndReason::none ? p.token : -1;
    result.picks.push_back({&row, p});
  }
  result.pick_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace oal::generate
