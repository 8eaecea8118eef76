#include "oal/analysis/bootstrap.h"

#include <limits>

#include "oal/core/error.h"

namespace oal::analysis {

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::below(uint64_t n) {
  // Reject the top partial block of 2^64 so every residue is equally likely.
  const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  uint64_t x = next();
  while (x >= limit) x = next();
  return x % n;
}

double SplitMix64::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

std::vector<std::vector<int64_t>> bootstrap_index_sets(int64_t prompts, int64_t replicates,
                                                       uint64_t seed) {
  check(prompts >= 1 && replicates >= 1, "bootstrap",
        "expected at least 1 prompt and 1 replicate, got {} prompts and {} replicates", prompts,
        replicates);
  SplitMix64 rng(seed);
  std::vector<std::vector<int64_t>> sets(static_cast<size_t>(replicates));
  for (auto& set : sets) {
    set.resize(static_cast<size_t>(prompts));
    for (auto& i : set) i = static_cast<int64_t>(rng.below(static_cast<uint64_t>(prompts)));
  }
  return sets;
}

}  // namespace oal::analysis
