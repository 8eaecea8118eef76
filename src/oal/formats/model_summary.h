#pragma once
// A summary of loaded weights for `oal info`: architecture fields, parameter count,
// bytes, dtypes; and of a built model's fast paths (model/fast_paths.h).
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "oal/model/fast_paths.h"
#include "oal/model/weights.h"

namespace oal::formats {

struct ModelSummary {
  model::ModelConfig config;
  int64_t tensors = 0;
  int64_t parameters = 0;                       // tied embeddings counted once
  int64_t bytes = 0;                            // as stored
  std::map<std::string, int64_t> dtype_params;  // "float32" → parameter count
};

ModelSummary summarize(const model::ModelWeights& w);

// Human-readable multi-line description (architecture, sizes, RoPE, dtypes, size).
std::string describe(const model::ModelWeights& w);

// The summary as JSON (for `oal info --json`): architecture fields under their
// ModelConfig names plus "tensors", "parameters", "bytes", "dtypes".
nlohmann::json summary_json(const model::ModelWeights& w);

// The fast paths as `oal info` prints them: a heading naming the SIMD target, then one
// line per entry ("  attention  layers 0-29  simd: flash, KV cache f32", or
// "reference: <detail> — <reason>").
std::string describe_fast_paths(const std::vector<model::FastPath>& paths);

// {"simd_target": "avx512", "ops": [{"op", "layers" (array), "layer_ranges" ("0-2,27-29"), "path"
// ("simd" or "reference"), "detail", "reason" (null on the SIMD path)}, ...]}.
nlohmann::json fast_paths_json(const std::vector<model::FastPath>& paths);

}  // namespace oal::formats
