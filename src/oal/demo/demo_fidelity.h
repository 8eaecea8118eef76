#pragma once
// The last section of `oal demo`: frozen-attention fidelity (Table 2 layout) of every
// method on a real model — groups from a fixed-budget split of each head's contribution
// profile, all methods calibrated with a reduced update budget, evaluated on held-out
// blocks. Defaults: stories260K and tinystories-dev.txt from ../shared/data.
#include <cstdint>
#include <string>

#include "oal/core/progress.h"
#include "oal/demo/demo_report.h"
#include "oal/linearize/fidelity.h"

namespace oal::demo {

struct FidelityDemoOptions {
  std::string model = "../shared/data/stories260K.bin";
  std::string text = "../shared/data/tinystories-dev.txt";
  std::string tokenizer;        // default: beside the model
  int64_t ctx = 256;
  int64_t max_updates = 100;    // the paper's 1000 in `oal calibrate`; reduced for a tour
  int64_t group_budget = 2;     // G per head (fixed-budget grouping of the χ profile)
  uint64_t seed = 0;
};

// The Table 2 columns and rows of `f` (and its JSON) into `s`, as both fidelity
// sections show them.
void put_fidelity_table(const linearize::FidelityResult& f, DemoSection& s);

// Throws oal::Error when the model or text cannot be read.
DemoSection fidelity_demo(const FidelityDemoOptions& options, const ProgressFn& progress = {});

}  // namespace oal::demo
