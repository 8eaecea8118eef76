#include "oal/io/gguf_summary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "oal/io/gguf_quants.h"

namespace oal::io {
namespace {

constexpr size_t k_json_array_limit = 16;

std::map<std::string, int64_t> type_counts(const GgufHeader& h) {
  std::map<std::string, int64_t> counts;
  for (const auto& t : h.tensors) ++counts[ggml_type_name(t.type)];
  return counts;
}

nlohmann::json value_json(const GgufValue& v) {
  if (const auto* a = std::get_if<std::vector<GgufValue>>(&v.value)) {
    if (a->size() > k_json_array_limit)
      return {{"type", "array[" + gguf_value_type_name(v.element_type) + "]"}, {"length", a->size()}};
    nlohmann::json out = nlohmann::json::array();
    for (const auto& x : *a) out.push_back(value_json(x));
    return out;
  }
  if (const auto* s = std::get_if<std::string>(&v.value)) return *s;
  if (const auto* b = std::get_if<bool>(&v.value)) return *b;
  if (const auto* d = std::get_if<double>(&v.value)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&v.value)) return *u;
  return std::get<int64_t>(v.value);
}

}  // namespace

std::string describe_gguf(const GgufHeader& h, bool tensors) {
  std::string out = fmt::format("gguf              version {}, alignment {}, {} metadata keys, {} tensors\n",
                                h.version, h.alignment, h.metadata.size(), h.tensors.size());
  for (const auto& [k, v] : h.metadata) out += fmt::format("  {:<44} {}\n", k, v.summary());
  std::vector<std::string> counts;
  for (const auto& [name, n] : type_counts(h)) counts.push_back(fmt::format("{} {}", name, n));
  out += fmt::format("tensor types      {}\n", fmt::join(counts, ", "));
  if (tensors)
    for (const auto& t : h.tensors)
      out += fmt::format("  {:<36} {:<6} [{}] {} bytes\n", t.name, ggml_type_name(t.type), fmt::join(t.ne, ", "),
                         t.nbytes);
  return out;
}

nlohmann::json gguf_summary_json(const GgufHeader& h, bool tensors) {
  nlohmann::json j = {{"version", h.version}, {"alignment", h.alignment}};
  j["metadata"] = nlohmann::json::object();
  for (const auto& [k, v] : h.metadata) j["metadata"][k] = value_json(v);
  j["tensor_types"] = type_counts(h);
  if (tensors) {
    j["tensors"] = nlohmann::json::array();
    for (const auto& t : h.tensors)
      j["tensors"].push_back({{"name", t.name}, {"type", ggml_type_name(t.type)}, {"ne", t.ne}, {"bytes", t.nbytes}});
  }
  return j;
}

}  // namespace oal::io
