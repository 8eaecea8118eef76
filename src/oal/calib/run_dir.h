#pragma once
// A calibration run directory (what `oal calibrate` writes and `oal fidelity` reads): the
// fitted methods in the attention level's method store (attention/method_store.h:
// calibration.json, kernels-<method>.json, baselines.safetensors), whose manifest also
// holds the run's model path and model_fingerprint, text, ctx, block split, fit settings
// and one report per fit. Read one back with attn::read_method_store.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oal/attention/method_store.h"
#include "oal/calib/block_split.h"
#include "oal/calib/calibrate.h"

namespace oal::calib {

// One of `count` partial runs (`oal calibrate --shard index/count`): it fitted every
// count-th of `layers` from the index-th; run_merge.h combines the partial runs.
struct Shard {
  int64_t index = 0, count = 1;
  std::vector<int64_t> layers;  // every layer of the whole run, in order
};
// "i/n" with 0 <= i < n; oal::Error("calibrate") otherwise.
Shard parse_shard(const std::string& spec);

struct RunInfo {
  std::string model, text;
  int64_t ctx = 0;
  BlockSplit split;
  std::string fingerprint;     // model_fingerprint() of the model (formats/fingerprint.h)
  std::optional<Shard> shard;  // written as calibration.json "shard" for partial runs
};

// Writes the run into `dir` (created); oal::Error("calibration_run") when it cannot.
void write_run(const std::filesystem::path& dir, const CalibrationResult& result,
               const CalibrationOptions& options, const RunInfo& info);

// The fit reports as JSON (calibration.json "fits").
nlohmann::json reports_json(const std::vector<FitReport>& reports);

}  // namespace oal::calib
