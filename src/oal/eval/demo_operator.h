#pragma once
// Section 1 of `oal demo`: the attention operator on synthetic Q/K/V with planted
// outlier dimensions — exact softmax vs OAL (groups = planted outliers vs bulk) vs the
// learned global quadratic (G = 1) vs the unfitted Taylor kernel: output error against
// softmax and median timings (prefill and decode per token).
#include <cstdint>
#include <vector>

#include "oal/core/progress.h"
#include "oal/eval/demo_report.h"

namespace oal::eval {

struct OperatorDemoOptions {
  int64_t batch = 1, q_heads = 4, kv_heads = 2, dim = 64, value_dim = 64;
  int64_t length = 1024;                    // evaluation sequence length
  std::vector<int64_t> outlier_dims{3, 41};  // planted in q and k of every head
  double outlier_q_mean = 3.0;              // q_r = mean + N(0, 1) on outlier dims
  double outlier_k_std = 2.5;               // k_r = N(0, std²) on outlier dims
  int64_t fit_length = 0;                   // fitting sequence (another draw); 0 = length
  int64_t fit_steps = 30;                   // Adam steps per fitted kernel
  double lr = 0.02;                         // Adam learning rate (paper App. B)
  int64_t chunk = 64;                       // HD chunk size
  int64_t block = 128;                      // softmax tile size
  int64_t repeats = 3;                      // timed repeats (after one warm-up)
  int64_t decode_tokens = 32;               // tokens timed for decode
  uint64_t seed = 0;
};

// Runs the comparison (fp32, ATen paths). Throws oal::Error("demo_operator") on bad
// options (sizes < 1, outlier dims outside 0..dim-1, Hq % Hkv != 0, ...).
DemoSection operator_demo(const OperatorDemoOptions& options, const ProgressFn& progress = {});

}  // namespace oal::eval
