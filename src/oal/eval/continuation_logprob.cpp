#include "oal/eval/continuation_logprob.h"

#include "oal/core/error.h"

namespace oal::eval {

namespace {

struct ContinuationLogits {
  at::Tensor logits;   // [m, V] at the positions that predict the continuation
  at::Tensor targets;  // [m] the continuation tokens
};

ContinuationLogits continuation_logits(const model::Transformer& model,
                                       const std::vector<int64_t>& context,
                                       const std::vector<int64_t>& continuation) {
  check(!context.empty() && !continuation.empty(), "mc_score",
        "context and continuation must be non-empty (got {} and {} tokens)", context.size(),
        continuation.size());
  const auto& cfg = model.config();
  const int64_t n = int64_t(context.size() + continuation.size()) - 1;
  check(cfg.max_position_embeddings <= 0 || n <= cfg.max_position_embeddings, "mc_score",
        "{} tokens exceed the model's {} positions", n, cfg.max_position_embeddings);
  std::vector<int64_t> ids(context);
  ids.insert(ids.end(), continuation.begin(), continuation.end());
  for (int64_t id : ids)
    check(id >= 0 && id < cfg.vocab_size, "mc_score", "token id {} outside [0, {})", id,
          cfg.vocab_size);
  at::NoGradGuard no_grad;
  const at::Device dev = model.device();
  const at::Tensor all = at::tensor(ids, at::kLong).to(dev);
  const at::Tensor input = all.narrow(0, 0, n).unsqueeze(0);
  // Positions whose next token is a continuation token: context.size()-1 .. n-1.
  const int64_t first = int64_t(context.size()) - 1;
  const int64_t m = int64_t(continuation.size());
  const at::Tensor h = model.hidden_states(input).narrow(1, first, m);
  return {model.logits(h).squeeze(0), all.narrow(0, int64_t(context.size()), m)};
}

}  // namespace

double continuation_logprob(const model::Transformer& model, const std::vector<int64_t>& context,
                            const std::vector<int64_t>& continuation) {
  const ContinuationLogits c = continuation_logits(model, context, continuation);
  const at::Tensor logp = at::log_softmax(c.logits, -1);  // [m, V]
  return logp.gather(1, c.targets.unsqueeze(1)).to(at::kDouble).sum().item<double>();
}

bool continuation_is_greedy(const model::Transformer& model, const std::vector<int64_t>& context,
                            const std::vector<int64_t>& continuation) {
  const ContinuationLogits c = continuation_logits(model, context, continuation);
  return c.logits.argmax(-1).equal(c.targets);
}

}  // namespace oal::eval
