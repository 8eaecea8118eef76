#include "oal/io/gguf_summary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "oal/io/gguf_quants.h"

namespace oal::io {
namespace {

constexpr size_t k_json_array_limit = 16;

// Length of the valid UTF-8 sequence starting at s[i] (1-4), or 0 when it is not one.
size_t utf8_sequence(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  const size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
  if (n == 0 || c > 0xf4 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xc0) != 0x80) return 0;
  // Overlong 3/4-byte forms, surrogates and code points above U+10FFFF.
  if ((c == 0xe0 && b(i + 1) < 0xa0) || (c == 0xed && b(i + 1) >= 0xa0) ||
      (c == 0xf0 && b(i + 1) < 0x90) || (c == 0xf4 && b(i + 1) >= 0x90))
    return 0;
  return n;
}

// GGUF strings are meant to be UTF-8 but nothing enforces it, and JSON must be: a byte
// that is not part of a valid sequence is written as the text "\xNN".
std::string json_safe(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i]));
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

std::map<std::string, int64_t> type_counts(const GgufHeader& h) {
  std::map<std::string, int64_t> counts;
  for (const auto& t : h.tensors) ++counts[ggml_type_name(t.type)];
  return counts;
}

nlohmann::json value_json(const GgufValue& v) {
  if (const auto* a = std::get_if<std::vector<GgufValue>>(&v.value)) {
    if (a->size() > k_json_array_limit)
      return {{"type", "array[" + gguf_value_type_name(v.element_type) + "]"},
              {"length", a->size()}};
    nlohmann::json out = nlohmann::json::array();
    for (const auto& x : *a) out.push_back(value_json(x));
    return out;
  }
  if (const auto* s = std::get_if<std::string>(&v.value)) return json_safe(*s);
  if (const auto* b = std::get_if<bool>(&v.value)) return *b;
  if (const auto* d = std::get_if<double>(&v.value)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&v.value)) return *u;
  return std::get<int64_t>(v.value);
}

}  // namespace

std::string describe_gguf(const GgufHeader& h, bool tensors) {
  std::string out =
      fmt::format("gguf              version {}, alignment {}, {} metadata keys, {} tensors\n",
                  h.version, h.alignment, h.metadata.size(), h.tensors.size());
  for (const auto& [k, v] : h.metadata) out += fmt::format("  {:<44} {}\n", k, v.summary());
  std::vector<std::string> counts;
  for (const auto& [name, n] : type_counts(h)) counts.push_back(fmt::format("{} {}", name, n));
  out += fmt::format("tensor types      {}\n", fmt::join(counts, ", "));
  if (tensors)
    for (const auto& t : h.tensors)
      out += fmt::format("  {:<36} {:<6} [{}] {} bytes\n", t.name, ggml_type_name(t.type),
                         fmt::join(t.ne, ", "), t.nbytes);
  return out;
}

nlohmann::json gguf_summary_json(const GgufHeader& h, bool tensors) {
  nlohmann::json j = {{"version", h.version}, {"alignment", h.alignment}};
  j["metadata"] = nlohmann::json::object();
  for (const auto& [k, v] : h.metadata) j["metadata"][json_safe(k)] = value_json(v);
  j["tensor_types"] = type_counts(h);
  if (tensors) {
    j["tensors"] = nlohmann::json::array();
    for (const auto& t : h.tensors)
      j["tensors"].push_back({{"name", json_safe(t.name)},
                              {"type", ggml_type_name(t.type)},
                              {"ne", t.ne},
                              {"bytes", t.nbytes}});
  }
  return j;
}

}  // namespace oal::io
