#include "oal/generate/generate.h"

#include <algorithm>
#include <chrono>

#include "oal/core/error.h"
#include "oal/generate/decode_session.h"

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
  const int64_t total = static_cast<int64_t>(prompt.size()) + options.max_new_tokens;
  check(max_pos <= 0 || total <= max_pos, k_op,
        "prompt ({} tokens) + {} new tokens = {} exceeds max_position_embeddings {}", prompt.size(),
        options.max_new_tokens, total, max_pos);
  Sampler sampler(options.sampler);
  DecodeSession session(model, 1);
  GenerateResult result;
  if (options.max_new_tokens == 0) return result;

  auto t0 = std::chrono::steady_clock::now();
  at::Tensor ids =
      at::tensor(std::vector<int64_t>(prompt.begin(), prompt.end()), at::kLong).unsqueeze(0);
  at::Tensor logits = session.extend_last(ids);  // [1, V]
  result.prefill_seconds = seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    const auto next = static_cast<int32_t>(sampler.sample(logits[0]));
    result.tokens.push_back(next);
    if (on_token) on_token(next);
    const auto& stops = options.stop_tokens;
    if (std::find(stops.begin(), stops.end(), next) != stops.end()) {
      result.stopped = true;
      break;
    }
    if (i + 1 < options.max_new_tokens)
      logits = session.extend_last(at::full({1, 1}, next, at::kLong));
  }
  result.decode_seconds = seconds_since(t0);
  return result;
}

}  // namespace oal::generate
