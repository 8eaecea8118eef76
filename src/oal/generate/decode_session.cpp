#include "oal/generate/decode_session.h"

#include "oal/core/error.h"

namespace oal::generate {

DecodeSession::DecodeSession(const model::Transformer& model, int64_t batch)
    : model_(model), states_(model.new_states(batch)) {}

at::Tensor DecodeSession::extend(const at::Tensor& tokens) {
  at::NoGradGuard no_grad;
  return model_.logits(model_.extend_hidden(tokens, states_));
}

at::Tensor DecodeSession::extend_last(const at::Tensor& tokens) {
  at::NoGradGuard no_grad;
  at::Tensor h = model_.extend_hidden(tokens, states_);
  return model_.logits(h.select(1, h.size(1) - 1));
}

int64_t DecodeSession::position() const {
  return states_.front()->tokens();
}

int64_t DecodeSession::state_bytes() const {
  int64_t n = 0;
  for (const auto& s : states_) n += s->state_bytes();
  return n;
}

}  // namespace oal::generate
