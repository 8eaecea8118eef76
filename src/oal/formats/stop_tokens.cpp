#include "oal/formats/stop_tokens.h"

#include <algorithm>

namespace oal::formats {

std::vector<int32_t> default_stop_tokens(const model::ModelConfig& c, const text::Tokenizer& t) {
  std::vector<int32_t> s(c.eos_token_ids.begin(), c.eos_token_ids.end());
  if (c.eos_token_id) s.push_back(static_cast<int32_t>(*c.eos_token_id));
  if (t.eos_id() >= 0) s.push_back(t.eos_id());
  if (t.kind() == "llama2c" && t.bos_id() >= 0) s.push_back(t.bos_id());
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

}  // namespace oal::formats
