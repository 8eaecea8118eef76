#include "oal/text/block_tensor.h"

#include <ATen/ATen.h>

namespace oal::text {

at::Tensor make_block_tensor(const std::vector<int32_t>& tokens, int64_t block_len,
                             BlockRange range) {
  const auto blocks = make_blocks(tokens, block_len, range);
  at::Tensor out = at::empty({static_cast<int64_t>(blocks.size()), block_len}, at::kLong);
  int64_t* p = out.data_ptr<int64_t>();
  for (const auto& block : blocks)
    for (int32_t id : block) *p++ = id;
  return out;
}

}  // namespace oal::text
