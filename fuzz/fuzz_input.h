#pragma once
// Shared by the fuzz targets: the input as files in a private temporary directory (the
// parsers under test read paths, exactly as the CLI calls them) and the rule that a
// hostile input may only fail with oal::Error. Any other exception escapes
// LLVMFuzzerTestOneInput, which libFuzzer reports as a crash (deadly signal), as it does
// for sanitizer reports, timeouts and out-of-memory.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "oal/core/error.h"

namespace oal::fuzz {

// Separates the files of a multi-file input (a run directory, a checkpoint, a model
// directory): part i of the input becomes names[i]; missing or empty parts are absent
// files.
inline constexpr std::string_view k_part_separator = "\n--oal-fuzz-part--\n";

// The input bytes split at k_part_separator (at most `max_parts` parts; the last one
// keeps any further separators).
std::vector<std::string_view> split_parts(const uint8_t* data, size_t size, size_t max_parts);

// This process's scratch directory (created on first use, under /dev/shm when it
// exists, removed at exit), emptied on every call.
std::filesystem::path fresh_dir();

// The input as bytes.
inline std::string_view as_bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Writes `bytes` to `dir / name`, creating parent directories.
void write_file(const std::filesystem::path& dir, const std::string& name, std::string_view bytes);

// Writes part i of the input to dir / names[i]; an empty part (like a missing one)
// leaves the file absent, so one seed layout covers optional files.
void write_parts(const std::filesystem::path& dir, const uint8_t* data, size_t size,
                 const std::vector<std::string>& names);

// Whether OAL_FUZZ_VERBOSE is set: expected errors are then printed (to check that
// seeds load, e.g. `OAL_FUZZ_VERBOSE=1 fuzz_run_dir seeds/run_dir/*`).
bool verbose();

// Runs `fn`; an oal::Error is the expected outcome for a malformed input and is
// swallowed, anything else propagates (a finding).
template <typename Fn>
void expect_only_oal_errors(Fn&& fn) {
  try {
    fn();
    if (verbose()) std::fprintf(stderr, "fuzz: input accepted\n");
  } catch (const oal::Error& e) {
    if (verbose()) std::fprintf(stderr, "fuzz: %s\n", e.what());
  }
}

}  // namespace oal::fuzz
