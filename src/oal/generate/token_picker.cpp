#include "oal/generate/token_picker.h"

#include <algorithm>

namespace oal::generate {

bool fits_context(int64_t prompt_tokens, int64_t max_new_tokens, int64_t context) {
  return context <= 0 || prompt_tokens + max_new_tokens <= context;
}

TokenPicker::TokenPicker(SamplerOptions sampler, std::vector<int32_t> stop_tokens,
                         int64_t max_new_tokens, int64_t context)
    : sampler_(sampler), stop_tokens_(std::move(stop_tokens)), max_new_tokens_(max_new_tokens),
      context_(context) {}

TokenPicker::Pick TokenPicker::pick(const at::Tensor& logits, int64_t held) {
  const auto token = static_cast<int32_t>(sampler_.sample(logits));
  picked_ += 1;
  if (std::find(stop_tokens_.begin(), stop_tokens_.end(), token) != stop_tokens_.end())
    return {token, EndReason::stop};
  // Fed back, the token would take position `held`: there must be one left.
  const bool full = context_ > 0 && held >= context_;
  return {token, picked_ >= max_new_tokens_ || full ? EndReason::length : EndReason::none};
}

}  // namespace oal::generate
