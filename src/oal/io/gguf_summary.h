#pragma once
// What `oal info` shows of a GGUF file: version, alignment, every metadata key with a
// short value (large arrays as their type and length), the count of tensors per ggml
// type, and optionally every tensor (name, type, ggml dims, bytes).
#include <nlohmann/json.hpp>
#include <string>

#include "oal/io/gguf.h"

namespace oal::io {

// Text for a terminal; `tensors` lists every tensor too.
std::string describe_gguf(const GgufHeader& header, bool tensors);

// The same as JSON: {"version", "alignment", "metadata": {key: value or summary},
// "tensor_types": {type: count}, "tensors": [{name, type, ne, bytes}] (when asked)}.
// Strings and numbers are given whole (a byte that is not valid UTF-8, which GGUF does
// not forbid, as the text "\xNN"); arrays longer than 16 as {"type", "length"}.
nlohmann::json gguf_summary_json(const GgufHeader& header, bool tensors);

}  // namespace oal::io
