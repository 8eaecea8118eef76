#pragma once
// analysis.json: the file `oal analyze` writes and `oal group` reads (format in
// docs/analysis.md). It holds every statistic of AnalysisResult, including each head's
// per-prompt χ, so grouping (and its bootstrap) can run from the file alone.
#include <nlohmann/json.hpp>

#include <filesystem>

#include "oal/analysis/analyze.h"

namespace oal::analysis {

inline constexpr const char* k_analysis_format = "oal-analysis";
inline constexpr int k_analysis_version = 1;

nlohmann::json analysis_to_json(const AnalysisResult& result);

// Validates the format tag and version, shapes (chi [d], chi_per_prompt [P][d] with
// P >= 1, d == head_dim) and finiteness; throws oal::Error("[analysis json] ...").
AnalysisResult analysis_from_json(const nlohmann::json& j);

// Atomic write (temp + rename) and read of the file.
void write_analysis(const std::filesystem::path& path, const AnalysisResult& result);
AnalysisResult read_analysis(const std::filesystem::path& path);

}  // namespace oal::analysis
