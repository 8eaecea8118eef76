#pragma once
// A calibration run directory (what `oal calibrate` writes and `oal fidelity` reads):
//   calibration.json     format "oal-calibration" v1: methods, layers with their shapes,
//                        model path and model_fingerprint, seed, ctx, block split, fit
//                        settings, one report per fit
//   kernels-oal.json     fitted OAL kernels (kernel JSON, docs/formats.md)
//   kernels-global.json  fitted learned-global kernels (kernel JSON)
//   baselines.safetensors  "<method>.layers.<i>.<param>" for TaylorShift (tau),
//                        Performer (projection), DiJiang (projection, theta),
//                        SpectraFormer (B, G, S, perm)
// Every file is written atomically.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <map>
#include <memory>
#include <string>
#include <vector>

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
  std::string fingerprint;  // model_fingerprint() of the model (model/fingerprint.h)
  std::optional<Shard> shard;  // written as calibration.json "shard" for partial runs
};

void write_run(const std::filesystem::path& dir, const CalibrationResult& result,
               const CalibrationOptions& options, const RunInfo& info);

struct LoadedRun {
  std::vector<std::string> methods;
  std::vector<LayerMethods> layers;  // layer order as written
  nlohmann::json meta;               // calibration.json
};

// Reads a run directory; oal::Error("calibration_run") when a file is missing, of the
// wrong format, or disagrees with calibration.json.
LoadedRun read_run(const std::filesystem::path& dir);

// The fit reports as JSON (calibration.json "fits").
nlohmann::json reports_json(const std::vector<FitReport>& reports);

}  // namespace oal::calib
