#pragma once
// Token blocks as a tensor for the model: int64 [blocks, block_len].
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "oal/text/corpus.h"

namespace oal::text {

// make_blocks(tokens, block_len, range) as an int64 tensor [blocks, block_len] (CPU).
at::Tensor make_block_tensor(const std::vector<int32_t>& tokens, int64_t block_len,
                             BlockRange range = {});

}  // namespace oal::text
