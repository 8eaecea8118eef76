#pragma once
// The paper's data protocol for fitting and evaluation (App. B): one token stream cut
// into non-overlapping blocks of N tokens; blocks 16–23 train the kernel coefficients,
// 24–25 validate them (checkpoint selection), 0–15 are the held-out evaluation set.
#include <cstdint>
#include <string>
#include <vector>

namespace oal::calib {

struct BlockSplit {
  std::vector<int64_t> train{16, 17, 18, 19, 20, 21, 22, 23};
  std::vector<int64_t> val{24, 25};
  std::vector<int64_t> eval{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

  // Throws oal::Error("block_split", ...) when a set is empty, repeats an index, two sets
  // overlap, or an index is >= `available` blocks (naming the counts).
  void validate(int64_t available) const;
  // Largest index + 1 over all three sets (the blocks the protocol needs).
  int64_t blocks_needed() const;
};

}  // namespace oal::calib
