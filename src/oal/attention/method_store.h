#pragma once
// The attention methods of some layers on disk: the one format a calibration run
// (calib/run_dir.h adds its settings and fit reports) and a converted model's
// oal_attention/ directory (formats/converted.h) share, so that loading a converted model
// needs only the attention level.
//
//   calibration.json       the manifest, written last: format "oal-calibration", version 1,
//                          "methods" (registered names), "seed" (the random baselines'
//                          draws), "layers" [{"layer", and with a feature-map method
//                          "q_heads", "kv_heads", "head_dim"}], plus the writer's own fields
//   kernels-<name>.json    each quadratic-kernel method's kernels (kernel JSON)
//   baselines.safetensors  "<method>.layers.<i>.<param>": the feature-map methods'
//                          parameters (TaylorShift tau, Performer projection, DiJiang
//                          projection and theta, SpectraFormer B, G, S, perm)
//   window.safetensors     with a window ("sinks" and "window" in the manifest, both 0
//                          when absent): "<method>.layers.<i>.log_scale" [Hq] fp32, the
//                          c_h of each windowed quadratic-kernel method; a layer entry's
//                          "full_kv_heads" [...] lists the KV heads its windowed methods
//                          attend exactly (windowed/full_heads.h), absent when none
// Every file is written atomically.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oal/attention/method.h"
#include "oal/attention/oal/kernel_json.h"
#include "oal/attention/windowed/window.h"

namespace oal::attn {

// The methods of one layer, by registered name.
struct LayerMethods {
  int64_t layer = 0;
  std::map<std::string, std::shared_ptr<AttentionMethod>> methods;
};

struct MethodStore {
  std::vector<std::string> methods;  // registered names, in the manifest's order
  uint64_t seed = 0;                 // seed of the random baselines' draws
  Window window{};                   // the exact window beside every linear method
  std::vector<LayerMethods> layers;  // in the manifest's order
  // The quadratic-kernel methods' kernels by name (the files kernels-<name>.json).
  std::map<std::string, ModelKernels> kernels;
  // Reading: the whole manifest. Writing: the writer's own fields (provenance,
  // settings); the store's fields above overwrite any of the same name.
  nlohmann::json meta = nlohmann::json::object();
};

// Writes `store` into `dir` (created), the manifest last. Throws
// oal::Error("calibration_run") when the directory cannot be made.
void write_method_store(const std::filesystem::path& dir, const MethodStore& store);

// Reads a store back: every layer's methods built through the registry with the stored
// parameters. Throws oal::Error("calibration_run") naming the file when one is missing,
// of the wrong format, or disagrees with the manifest.
MethodStore read_method_store(const std::filesystem::path& dir);

}  // namespace oal::attn
