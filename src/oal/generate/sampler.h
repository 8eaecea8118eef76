#pragma once
// Next-token sampling: greedy (temperature 0), temperature, top-k, nucleus (top-p), with a
// seeded generator whose sequence is the same on every platform (SplitMix64 → uniform
// doubles in [0, 1) built from the top 53 bits), so a seed reproduces a generation.
#include <ATen/ATen.h>

#include <cstdint>

namespace oal::generate {

struct SamplerOptions {
  double temperature = 0.0;  // 0 → greedy (argmax, lowest id on ties); must be >= 0
  double top_p = 1.0;  // keep the smallest set of most likely tokens whose mass >= top_p; (0, 1]
  int64_t top_k = 0;   // keep only the k most likely tokens (ties by id); 0 = all; >= 0
  uint64_t seed = 0;
};

class Sampler {
 public:
  // Throws oal::Error("[sampler] ...") for a negative/NaN temperature, top_p outside (0, 1]
  // or a negative top_k.
  explicit Sampler(SamplerOptions options);
  // logits [V] (any float dtype, finite) → token id in [0, V).
  int64_t sample(const at::Tensor& logits);
  // Probabilities actually sampled from for `logits` [V] → [V] fp64 (after temperature
  // top-k, then top-p; zeros outside the kept set). Greedy gives a one-hot vector.
  at::Tensor distribution(const at::Tensor& logits) const;
  const SamplerOptions& options() const { return options_; }

 private:
  double uniform();  // [0, 1)
  // sample() at temperature 0 for fp32 contiguous CPU logits [V], V >= 1.
  int64_t greedy_f32(const at::Tensor& logits) const;
  SamplerOptions options_;
  uint64_t state_;
};

}  // namespace oal::generate
