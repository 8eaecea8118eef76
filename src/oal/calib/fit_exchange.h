#pragma once
// Spreading independent fits over the processes of a run (dist/world.h): which rank runs
// which task, and the finished FitResults as bytes for the all-gather. Every fit is
// seeded by its own identity, so where it runs does not change its numbers.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "oal/calib/fit.h"

namespace oal::calib {

// The rank of each task: longest-processing-time first over `ranks` (costs descending,
// ties by index; each task to the least-loaded rank, ties to the lower rank). The same
// costs give the same assignment on every rank.
std::vector<int> assign_tasks(const std::vector<double>& costs, int ranks);

// (task index, result) pairs <-> bytes. Tensors must be CPU fp32 or fp64. unpack throws
// oal::Error("fit_exchange") on bytes it did not write (truncated or corrupt).
std::string pack_results(const std::vector<std::pair<int64_t, const FitResult*>>& results);
std::vector<std::pair<int64_t, FitResult>> unpack_results(const std::string& bytes);

}  // namespace oal::calib
