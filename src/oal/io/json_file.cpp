#include "oal/io/json_file.h"

#include <fstream>
#include <limits>

#include "oal/core/error.h"

namespace oal::io {

nlohmann::json read_json_file(const std::filesystem::path& path, std::string_view op,
                              std::string_view expected) {
  std::ifstream in(path, std::ios::binary);
  check(in.good() && !std::filesystem::is_directory(path), op, "'{}': cannot open{}",
        path.string(), expected.empty() ? "" : fmt::format(" (expected {})", expected));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(op, "'{}' is not valid JSON: {}", path.string(), e.what());
  }
}

namespace {

// "a non-integer number", "a string", ... for the error messages.
std::string kind_of(const nlohmann::json& v) {
  if (v.is_number_float()) return "a non-integer number";
  return fmt::format("{} {}", v.is_array() || v.is_object() ? "an" : "a", v.type_name());
}

}  // namespace

// (The messages are built only on failure: these run once per integer of large files.)
int64_t json_int(const nlohmann::json& v, std::string_view op, std::string_view what) {
  if (!v.is_number_integer()) fail(op, "{} must be an integer, got {}", what, kind_of(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    fail(op, "{} must be an integer below 2^63, got {}", what, v.dump());
  return v.get<int64_t>();
}

uint64_t json_uint(const nlohmann::json& v, std::string_view op, std::string_view what) {
  if (!v.is_number_unsigned())
    fail(op, "{} must be a non-negative integer, got {}", what,
         v.is_number_integer() ? v.dump() : kind_of(v));
  return v.get<uint64_t>();
}

int64_t json_int_or(const nlohmann::json& obj, const char* key, int64_t fallback,
                    std::string_view op, std::string_view what) {
  if (!obj.is_object() || !obj.contains(key)) return fallback;
  return json_int(obj.at(key), op, what);
}

std::vector<int64_t> json_int_list(const nlohmann::json& v, std::string_view op,
                                   std::string_view what) {
  if (!v.is_array()) fail(op, "{} must be a list of integers, got {}", what, kind_of(v));
  std::vector<int64_t> out;
  out.reserve(v.size());
  for (const auto& x : v) out.push_back(json_int(x, op, what));
  return out;
}

}  // namespace oal::io
