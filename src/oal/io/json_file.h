#pragma once
// Reading a whole JSON file, with the errors every reader of the project's JSON inputs
// (configs, tokenizers, kernel JSON, analysis, run directories, checkpoints) gives.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string_view>

namespace oal::io {

// The parsed file. Throws oal::Error(op): "'path': cannot open (expected <expected>)"
// when the file cannot be read (the parenthesis only when `expected` is given), or
// "'path' is not valid JSON: <parser message>".
nlohmann::json read_json_file(const std::filesystem::path& path, std::string_view op,
                              std::string_view expected = {});

}  // namespace oal::io
