#pragma once
// Section 1 of `oal demo`: the attention operator. Accuracy on synthetic Q/K/V with
// planted outlier dimensions — exact softmax vs OAL (groups = planted outliers vs bulk)
// vs the learned global quadratic (G = 1) vs the unfitted Taylor kernel, fitted by the
// calibration code (calib/calibrate.h) — and speed at two sequence lengths through
// `oal bench`'s runner (bench/bench.h), so the table shows where OAL loses (short
// sequences) and what it is for (long ones).
#include <cstdint>
#include <vector>

#include "oal/core/progress.h"
#include "oal/demo/demo_report.h"

namespace oal::demo {

struct OperatorDemoOptions {
  int64_t batch = 1, q_heads = 4, kv_heads = 2, dim = 64, value_dim = 64;
  int64_t length = 1024;                     // accuracy: fitting and evaluation length
  std::vector<int64_t> outlier_dims{3, 41};  // planted in q and k of every head
  double outlier_q_mean = 3.0;               // q_r = mean + N(0, 1) on outlier dims
  double outlier_k_std = 2.5;                // k_r = N(0, std²) on outlier dims
  int64_t fit_sequences = 2;                 // training sequences (+1 for validation)
  int64_t fit_steps = 60;                    // fitter updates per kernel (calib::fit)
  int64_t chunk = 64;                        // HD chunk size
  std::vector<int64_t> speed_lengths{1024, 16384};  // prefill / decode timing lengths
  int repeats = 3;                           // timed prefill calls (median), after a warm-up
  int decode_steps = 16;                     // timed decode steps (median)
  uint64_t seed = 0;
};

// Runs the comparison (fp32). Throws oal::Error("demo_operator") on bad options (sizes
// < 1, outlier dims outside 0..dim-1, Hq % Hkv != 0, ...).
DemoSection operator_demo(const OperatorDemoOptions& options, const ProgressFn& progress = {});

}  // namespace oal::demo
