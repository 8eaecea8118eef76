#pragma once
// A section of `oal demo`: the contribution analysis and App. B grouping of a small
// synthetic model with planted outlier query/key dimensions (fixtures/synthetic.h) — per
// head, its top dimensions by χ, top-k share against the Gaussian control, held-out
// stability, the groups found and whether the planted dimensions left the bulk.
#include <cstdint>

#include "oal/core/progress.h"
#include "oal/demo/demo_report.h"

namespace oal::demo {

struct AnalysisDemoOptions {
  int64_t layers = 2, heads = 4, kv_heads = 2, head_dim = 16, hidden = 64;
  int64_t planted_pairs = 1;   // RoPE pairs planted per layer (2 dims each)
  double planted_scale = 2.0;
  int64_t prompts = 16;        // calibration prompts (random token ids, 16–36 tokens)
  int64_t heldout = 8;
  int64_t bootstrap = 200;     // B (the paper: 1000)
  uint64_t seed = 0;
};

// Throws oal::Error on invalid sizes (from the synthetic generator or the analysis).
DemoSection analysis_demo(const AnalysisDemoOptions& options, const ProgressFn& progress = {});

}  // namespace oal::demo
