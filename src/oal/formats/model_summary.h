#pragma once
// A summary of loaded weights for `oal info`: architecture fields, parameter count,
// bytes, dtypes.
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>

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

}  // namespace oal::formats
