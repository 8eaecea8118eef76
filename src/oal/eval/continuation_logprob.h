#pragma once
// The model side of multiple-choice scoring: log-likelihood of a continuation given a
// context, from one causal forward over context + continuation[:-1]. Only the
// continuation's tokens are scored.
#include <cstdint>
#include <vector>

#include "oal/model/transformer.h"

namespace oal::eval {

// sum_i log p(cont[i] | context, cont[:i]) in nats (fp64 sum of fp32 log-softmax).
// Throws oal::Error("[mc_score] ...") for an empty context or continuation, ids outside
// the vocabulary, or more tokens than max_position_embeddings.
double continuation_logprob(const model::Transformer& model, const std::vector<int64_t>& context,
                            const std::vector<int64_t>& continuation);

// Whether the model's argmax at every continuation position is that continuation
// token, i.e. greedy decoding after `context` would produce `continuation` (same forward
// and checks as above; used by the passkey task).
bool continuation_is_greedy(const model::Transformer& model, const std::vector<int64_t>& context,
                            const std::vector<int64_t>& continuation);

}  // namespace oal::eval
