#pragma once
// The rule the decode loop (decode_loop.h) applies to each sequence: sample the next token
// from its logits, and end the sequence on a stop token, after max_new_tokens, or when the
// model's context is full.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "oal/generate/sampler.h"

namespace oal::generate {

// Why a sequence ends with the token just picked (none: it goes on).
enum class EndReason { none, stop, length };

// Whether a prompt of `prompt_tokens` and `max_new_tokens` more fit in `context` positions
// (context <= 0: the model states no limit).
bool fits_context(int64_t prompt_tokens, int64_t max_new_tokens, int64_t context);

class TokenPicker {
 public:
  struct Pick {
    int32_t token = -1;
    EndReason end = EndReason::none;
  };

  // stop_tokens: ids that end the sequence (the stop token is picked, then it ends).
  // max_new_tokens: the sequence ends with its max_new_tokens-th token (a picker always
  // picks one: below 1 counts as 1; generate() returns before picking for 0). context: the
  // model's positions (max_position_embeddings; <= 0: unbounded). Throws what Sampler
  // throws for bad sampler options.
  TokenPicker(SamplerOptions sampler, std::vector<int32_t> stop_tokens, int64_t max_new_tokens,
              int64_t context);

  // logits [V] (any float dtype) of the next position; `held` = tokens the sequence's
  // states hold now (prompt and tokens fed back). A token that is neither a stop token
  // nor the last allowed one ends the sequence anyway when feeding it back would need a
  // position beyond the context.
  Pick pick(const at::Tensor& logits, int64_t held);
  // Tokens picked so far.
  int64_t picked() const { return picked_; }

 private:
  Sampler sampler_;
  std::vector<int32_t> stop_tokens_;
  int64_t max_new_tokens_, context_;
  int64_t picked_ = 0;
};

}  // namespace oal::generate
