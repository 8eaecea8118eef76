#pragma once
// Prompt-level bootstrap resampling (paper App. B): B replicates, each a length-P
// sequence of prompt indices drawn independently with replacement from {0..P-1}.
// The generator is a self-contained SplitMix64 with unbiased rejection sampling, so a
// seed gives the same index sets on every platform and standard library.
#include <cstdint>
#include <vector>

namespace oal::analysis {

// Deterministic 64-bit generator (SplitMix64).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();
  // Uniform integer in [0, n), n >= 1, without modulo bias.
  uint64_t below(uint64_t n);
  // Uniform double in [0, 1) with 53 random bits.
  double uniform();

 private:
  uint64_t state_;
};

// B index sets of length P. replicates >= 1, prompts >= 1. Returns [B][P].
std::vector<std::vector<int64_t>> bootstrap_index_sets(int64_t prompts, int64_t replicates,
                                                       uint64_t seed);

}  // namespace oal::analysis
