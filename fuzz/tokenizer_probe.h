#pragma once
// Loads a tokenizer the way the CLI does and runs it over a fixed text with awkward
// bytes (multi-byte UTF-8, invalid UTF-8, whitespace runs, digits), so a file that loads
// but leaves the tokenizer inconsistent is caught too.
#include <filesystem>
#include <string>

#include "oal/text/tokenizer.h"

namespace oal::fuzz {

inline void load_and_use_tokenizer(const std::filesystem::path& path) {
  const auto tok = text::load_tokenizer(path);
  const std::string sample = "Hello, world!  12345 caf\xc3\xa9 \xe4\xb8\xad\t\r\n\xff\xfe <s></s> \xf0\x9f\x98\x80";
  const auto ids = tok->encode(sample, true);
  (void)tok->decode(ids);
  int32_t prev = -1;
  for (int32_t id : ids) {
    (void)tok->decode_token(prev, id);
    (void)tok->token_id(tok->token_string(id));
    prev = id;
  }
}

}  // namespace oal::fuzz
