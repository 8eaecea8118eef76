#pragma once
// The paper's pipeline as one library call (§3–§4, App. B–C): contribution analysis on
// the grouping prompts → grouping → coefficient fitting of every method on the train /
// val blocks → frozen-attention fidelity on the eval blocks, all from one Splits, so no
// two steps see the same data. A Run owns its directory and writes each step's file as
// the step finishes: pipeline.json (the settings, run_record.h), analysis.json,
// groups.json, calibration.json (+ kernels-*.json, baselines.safetensors; calibration.json
// last, so it marks a finished calibration), fidelity.json. A run can be resumed: the
// analysis and the calibration a previous run of the same settings finished are read
// back instead of recomputed (the grouping and the fidelity are re-run: deterministic,
// and cheap beside the fits). `oal linearize` is a thin CLI over it.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "oal/analysis/analyze.h"
#include "oal/analysis/grouping.h"
#include "oal/analysis/layer_groups.h"
#include "oal/calib/calibrate.h"
#include "oal/linearize/fidelity.h"
#include "oal/linearize/splits.h"
#include "oal/model/transformer.h"

namespace oal::linearize {

struct PipelineOptions {
  std::string model_name, text_name;   // recorded in the run's files
  std::string fingerprint;             // formats::model_fingerprint of the model
  std::vector<int64_t> layers;         // empty: all
  int64_t prompts = 40;                // grouping prompts (analysis::PromptOptions::calibration)
  analysis::GroupingOptions grouping;
  calib::CalibrationOptions calibration;  // methods, fit options, seed, world
  bool write = true;                      // false on the non-root ranks of a shared fit
  // Continue the run in the directory: the steps whose files it holds are read back.
  // The directory's pipeline.json must hold the same settings (else oal::Error naming
  // the first that differs); without one, every step runs.
  bool resume = false;
};

// One progress callback per step (any may be empty).
struct PipelineProgress {
  ProgressFn analyze, group, capture, calibrate, fidelity_capture, fidelity;
};

struct PipelineResult {
  analysis::AnalysisResult analysis;
  std::vector<analysis::LayerGroups> grouped;
  attn::ModelKernels groups;            // Taylor-initialised, what the fits start from
  calib::CalibrationResult calibration;
  FidelityResult fidelity;        // empty (no rows) on ranks with write = false
  nlohmann::json fidelity_json;         // what fidelity.json holds
  std::vector<std::string> resumed;     // steps read back ("analysis", "calibration")
};

// Runs every step on `model` over `stream` (the tokens of the text `splits` was made
// from) and writes the files into `dir` (created) when options.write. On a resumed run
// result.calibration holds the layers' methods only (no reports, no kernels).
PipelineResult run_pipeline(const model::Transformer& model, const std::vector<int32_t>& stream,
                            const text::Tokenizer& tokenizer, const Splits& splits,
                            const PipelineOptions& options, const std::filesystem::path& dir,
                            const PipelineProgress& progress = {});

}  // namespace oal::linearize
