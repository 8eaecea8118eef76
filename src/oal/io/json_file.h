#pragma once
// Reading a whole JSON file, with the errors every reader of the project's JSON inputs
// (configs, tokenizers, kernel JSON, analysis, run directories, checkpoints) gives.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

namespace oal::io {

// The parsed file. Throws oal::Error(op): "'path': cannot open (expected <expected>)"
// when the file cannot be read (the parenthesis only when `expected` is given), or
// "'path' is not valid JSON: <parser message>".
nlohmann::json read_json_file(const std::filesystem::path& path, std::string_view op,
                              std::string_view expected = {});

// Integers from JSON. nlohmann's get<int64_t>() static_casts a float (3e32 as a layer
// index is undefined behaviour, found by the fuzz targets) and wraps an unsigned above
// INT64_MAX, so every integer field the project reads goes through these: only JSON
// integers in range are accepted. Errors are oal::Error(op): "<what> must be an integer,
// got <a non-integer number | a string | ...>"; `what` names the file and field.

// `v` as an int64.
int64_t json_int(const nlohmann::json& v, std::string_view op, std::string_view what);

// `v` as a uint64 (seeds): a JSON integer >= 0.
uint64_t json_uint(const nlohmann::json& v, std::string_view op, std::string_view what);

// `obj[key]` as an int64, or `fallback` when `obj` is not an object or has no `key`.
int64_t json_int_or(const nlohmann::json& obj, const char* key, int64_t fallback,
                    std::string_view op, std::string_view what);

// `v` as a list of int64 (a JSON array of integers).
std::vector<int64_t> json_int_list(const nlohmann::json& v, std::string_view op,
                                   std::string_view what);

}  // namespace oal::io
