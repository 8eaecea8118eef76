#include "oal/generate/generate.h"

#include <chrono>

#include "oal/core/error.h"
#include "oal/generate/decode_loop.h"

namespace oal::generate {
namespace {

constexpr const char* k_op = "generate";

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

GenerateResult generate(const model::Transformer& model, const std::vector<int32_t>& prompt,
                        const GenerateOptions& options, const TokenFn& on_token) {
  check(!prompt.empty(), k_op, "empty prompt; expected at least one token (e.g. BOS)");
  check(options.max_new_tokens >= 0, k_op, "max_new_tokens must be >= 0, got {}",
        options.max_new_tokens);
  const int64_t max_pos = model.config().max_position_embeddings;
  const auto n = static_cast<int64_t>(prompt.size());
  check(fits_context(n, options.max_new_tokens, max_pos), k_op,
        "prompt ({} tokens) + {} new tokens = {} exceeds max_position_embeddings {}", n,
        options.max_new_tokens, n + options.max_new_tokens, max_pos);
  // Built first: bad sampler options fail even when nothing is generated.
  TokenPicker picker(options.sampler, options.stop_tokens, options.max_new_tokens, max_pos);
  GenerateResult result;
  if (options.max_new_tokens == 0) return result;
  // The decode loop with one row; the prompt in ubatch-sized steps as extend_hidden
  // reads it (the whole prompt when the model sets no ubatch).
  DecodeRow row(prompt, model.new_states(1), std::move(picker));
  const int64_t ubatch = model.options().ubatch;
  const std::vector<DecodeRow*> rows{&row};
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const StepResult step = run_step(model, plan_step(rows, ubatch > 0 ? ubatch : n));
    if (step.picks.empty()) continue;  // a prompt piece before the last
    if (result.tokens.empty()) {
      result.prefill_seconds = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
    }
    const TokenPicker::Pick p = step.picks.front().pick;
    result.tokens.push_back(p.token);
    if (on_token) on_token(p.token);
    result.stopped = p.end == EndReason::stop;
    if (p.end != EndReason::none) break;
  }
  result.decode_seconds = seconds_since(t0);
  return result;
}

}  // namespace oal::generate
