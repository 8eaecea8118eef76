#pragma once
// Autoregressive generation for one sequence: the decode loop (decode_loop.h) with one
// row reads the prompt, then samples one token at a time, calling back as each is
// produced (for streaming output).
#include <cstdint>
#include <functional>
#include <vector>

#include "oal/generate/sampler.h"
#include "oal/model/transformer.h"

namespace oal::generate {

struct GenerateOptions {
  int64_t max_new_tokens = 0;        // >= 0
  SamplerOptions sampler;            // greedy by default
  std::vector<int32_t> stop_tokens;  // generation ends after producing one of these
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // the new tokens (a stop token, if hit, included last)
  bool stopped = false;         // ended on a stop token
  double prefill_seconds = 0;   // prompt forward
  double decode_seconds = 0;    // all later steps
};

// Called with each new token as soon as it is chosen.
using TokenFn = std::function<void(int32_t token)>;

// prompt: token ids, non-empty (typically BOS + encoded text). Throws oal::Error
// "[generate] ..." for an empty prompt, negative max_new_tokens, or when prompt +
// max_new_tokens exceeds the model's max_position_embeddings.
GenerateResult generate(const model::Transformer& model, const std::vector<int32_t>& prompt,
                        const GenerateOptions& options, const TokenFn& on_token = {});

}  // namespace oal::generate
