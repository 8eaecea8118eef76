#pragma once
// The token ids that end a generation by default: the end-of-sequence ids of the config
// (eos_token_id, eos_token_ids) and of the tokenizer; llama2.c models also stop at BOS,
// which they emit between stories (as run.c does). Sorted, without repeats.
#include <cstdint>
#include <vector>

#include "oal/model/config.h"
#include "oal/text/tokenizer.h"

namespace oal::formats {

std::vector<int32_t> default_stop_tokens(const model::ModelConfig& config,
                                         const text::Tokenizer& tokenizer);

}  // namespace oal::formats
