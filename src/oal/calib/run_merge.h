#pragma once
// Combining the partial runs of `oal calibrate --shard i/n` (for schedulers without a
// network between jobs, e.g. Slurm arrays) into the run directory one process would have
// written: the same kernel JSON, baselines, windows' c_h and calibration.json bytes.
#include <filesystem>
#include <vector>

namespace oal::calib {

// Checks that `parts` are the n shards 0..n-1 of one run — same format, model
// fingerprint, text, ctx, seed, methods, split and fit settings, disjoint layers whose
// union is the run's — and writes the merged run into `out` (files written atomically).
// Throws oal::Error("merge_calibration") naming the first mismatch; nothing is written
// then.
void merge_runs(const std::vector<std::filesystem::path>& parts, const std::filesystem::path& out);

}  // namespace oal::calib
