#pragma once
// Dynamic work distribution over ATen's intra-op pool: one task per thread, each pulling
// the next work item from a shared counter. Items should be ordered most-expensive first
// (e.g. causal query blocks from the end) so the tail balances.
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace oal::simd {

// Workers parallel_items will use for `items` items with `threads` requested.
inline int64_t worker_count(int64_t items, int threads) {
  return std::max<int64_t>(
      1, std::min<int64_t>(items, threads > 0 ? threads : at::get_num_threads()));
}

// Calls fn(worker, item) for every item in [0, items), on up to `threads` workers
// (0 = ATen's current thread count). `worker` is in [0, workers) and identifies a
// scratch slot; exceptions thrown by fn propagate (the first one) after all stop.
template <typename Fn>
void parallel_items(int64_t items, int threads, Fn&& fn) {
  if (items <= 0) return;
  const int64_t nt = worker_count(items, threads);
  if (nt == 1) {
    for (int64_t i = 0; i < items; ++i) fn(int64_t{0}, i);
    return;
  }
  std::atomic<int64_t> next{0};
  at::parallel_for(0, nt, 1, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w)
      for (int64_t i = next.fetch_add(1); i < items; i = next.fetch_add(1)) fn(w, i);
  });
}

}  // namespace oal::simd
