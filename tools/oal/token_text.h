#pragma once
// Text helpers of `oal tokenize` / `oal detokenize`.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace oal::cli {

// A token's bytes for a one-line display: \n, \r, \t, \\ and \' escaped, other control
// bytes and bytes that are not part of valid UTF-8 as \xNN.
std::string escaped_piece(std::string_view bytes);

// Ids separated by whitespace and/or commas, optionally inside [ ]: "[1, 2, 3]",
// "1 2 3". Throws oal::Error("detokenize") naming the first thing that is not an id.
std::vector<int32_t> parse_token_ids(std::string_view text);

}  // namespace oal::cli
