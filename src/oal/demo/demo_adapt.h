#pragma once
// A section of `oal demo`: convert the middle layers of a small synthetic model (planted
// outlier q/k dimensions, fixtures/synthetic.h) to OAL — groups {bulk, planted dims},
// Taylor-initialised kernels — then adapt it briefly with LoRA + kernel training and
// show validation NLL (softmax model, converted, converted + LoRA) and the per-layer
// decode memory after short and long contexts (KV caches grow, HD states do not).
#include <cstdint>

#include "oal/core/progress.h"
#include "oal/demo/demo_report.h"

namespace oal::demo {

struct AdaptDemoOptions {
  int64_t layers = 4, heads = 4, kv_heads = 2, hidden = 64;
  int64_t ctx = 64;
  int64_t steps = 40;
  int64_t train_blocks = 32, val_blocks = 4;
  uint64_t seed = 0;
};

// Works in a fresh temporary directory (removed afterwards). Throws oal::Error on
// invalid sizes.
DemoSection adapt_demo(const AdaptDemoOptions& options, const ProgressFn& progress = {});

}  // namespace oal::demo
