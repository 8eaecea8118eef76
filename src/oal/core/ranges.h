#pragma once
// Lists written by users on the command line: layer lists such as "0,2,4-7", block
// ranges such as "0-15", and name lists such as "oal,global". Shared by every CLI
// command that selects layers, heads, blocks or methods.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace oal {

// Parses comma-separated items, each a non-negative integer "n" or an inclusive range
// "a-b" with a <= b; spaces around items are allowed. Returns the indices in the order
// written. Throws oal::Error("[<what>] ...") for empty text, empty items, non-numbers,
// descending ranges or repeated indices. When `limit` > 0 every index must be < limit
// (e.g. the model's layer count).
std::vector<int64_t> parse_index_list(std::string_view text, std::string_view what,
                                      int64_t limit = 0);

// Formats indices back into the compact form ("0,2,4-7"), consecutive runs merged.
std::string format_index_list(const std::vector<int64_t>& indices);

// "a,b,c" -> {"a", "b", "c"}: items in the order written, empty items dropped, no
// trimming (names are checked by whoever receives them).
std::vector<std::string> split_names(std::string_view text);

}  // namespace oal
