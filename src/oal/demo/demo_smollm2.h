#pragma once
// The tour's section on a real pretrained head_dim-64 model (SmolLM2-135M-Instruct,
// GGUF Q4_1, fetched by scripts/fetch-models.sh): one middle layer through the paper's
// pipeline (linearize::run_pipeline) — its heads' outlier dimensions, the layer's
// frozen-attention fidelity for every method after short fits — and a greedy
// continuation from the original and from the model with that layer converted to OAL.
#include <cstdint>
#include <string>

#include "oal/core/progress.h"
#include "oal/demo/demo_report.h"

namespace oal::demo {

struct SmolLM2DemoOptions {
  std::string model = ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::string text = "../shared/data/wikitext2-test.raw";
  int64_t layer = 15;           // of 30
  int64_t ctx = 512;
  int64_t prompts = 12;         // grouping prompts
  int64_t max_updates = 40;     // per fit (the paper's 1000 in `oal linearize`)
  int64_t new_tokens = 24;      // greedy continuation
  std::string prompt = "Once upon a time, there was a little girl named Lily. She";
  uint64_t seed = 0;
};

// Throws oal::Error when the model or text cannot be read. Writes its run directory
// under the system's temporary directory (removed afterwards).
DemoSection smollm2_demo(const SmolLM2DemoOptions& options, const ProgressFn& progress = {});

}  // namespace oal::demo
