#include "oal/io/json_file.h"

#include <fstream>

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

}  // namespace oal::io
