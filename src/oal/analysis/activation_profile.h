#pragma once
// Layer-wise activation profile of the residual stream (paper Fig. 7): for each hidden
// dimension, its maximum absolute activation over all tokens and prompts at a layer's
// output; summarised by the three largest per-dimension maxima (top-1/2/3) and their
// median across dimensions.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace oal::analysis {

// Running per-dimension max |x| of one layer's output.
class ActivationMax {
 public:
  // x [B, T, hidden] (any floating dtype). The first call fixes `hidden`.
  void update(const at::Tensor& x);
  bool empty() const { return max_abs_.empty(); }
  // Per-dimension maxima [hidden] (fp64 values).
  const std::vector<double>& max_abs() const { return max_abs_; }

 private:
  std::vector<double> max_abs_;
};

struct ActivationSummary {
  std::vector<double> max_abs;   // [hidden] per-dimension max |activation|
  std::vector<int64_t> top_dims; // up to 3 dims with the largest maxima, largest first
  std::vector<double> top_values;// their maxima (top-1, top-2, top-3)
  double median = 0.0;           // median of max_abs (mean of the middle two when even)
};

// Summary of per-dimension maxima [hidden], hidden >= 1.
ActivationSummary summarize_activations(const std::vector<double>& max_abs);

}  // namespace oal::analysis
