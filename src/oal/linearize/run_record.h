#pragma once
// The settings a linearize run directory was made with (pipeline.json), so that a
// resumed run (PipelineOptions::resume) continues only a run of the same settings: the
// model (by fingerprint), the text (by path and token count), the block split and
// context, the layers, the grouping and the fitting options. A step whose file a
// resumed run finds is read back instead of recomputed.
#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "oal/linearize/pipeline.h"
#include "oal/linearize/splits.h"

namespace oal::linearize {

// The record of a run of `options` over `splits` of a stream of `stream_tokens` tokens.
nlohmann::json run_record(const Splits& splits, const PipelineOptions& options,
                          int64_t stream_tokens);

// Throws oal::Error("[linearize] ...") naming the first setting in which `stored` (the
// record read from `dir`) differs from `current`, and what to do about it.
void check_same_record(const nlohmann::json& stored, const nlohmann::json& current,
                       const std::filesystem::path& dir);

}  // namespace oal::linearize
