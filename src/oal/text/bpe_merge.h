#pragma once
// The BPE merge loop shared by both tokenizers: repeatedly merge the adjacent pair with
// the best (lowest) priority, the leftmost one on ties, until no pair is mergeable.
// llama2.c uses priority = -score, HF BPE uses priority = merge rank.
//
// `lookup(a, b)` returns the Merge for symbol ids a, b (found == false when the pair
// does not merge). merge_symbols is O(n log n) with a heap and a linked list;
// merge_symbols_reference is the plain O(n^2) rescan (run.c's loop) that tests
// compare it against.
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace oal::text {

struct Merge {
  bool found = false;
  double priority = 0;  // lower merges first
  int32_t id = -1;      // id of the merged symbol
};

template <typename Lookup>
void merge_symbols(std::vector<int32_t>& symbols, Lookup&& lookup) {
  const size_t n = symbols.size();
  if (n < 2) return;
  std::vector<int32_t> prev(n), next(n);  // linked list over positions; -1 / n = none
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i)
    prev[i] = static_cast<int32_t>(i) - 1, next[i] = static_cast<int32_t>(i + 1);
  struct Entry {
    double priority;
    int32_t left, right, left_id, right_id, merged;
    bool operator>(const Entry& o) const {
      return priority != o.priority ? priority > o.priority : left > o.left;
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto push = [&](int32_t l, int32_t r) {
    if (l < 0 || r >= static_cast<int32_t>(n)) return;
    const Merge m = lookup(symbols[l], symbols[r]);
    if (m.found) heap.push({m.priority, l, r, symbols[l], symbols[r], m.id});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i), static_cast<int32_t>(i + 1));
  while (!heap.empty()) {
    const Entry e = heap.top();
    heap.pop();
    // Stale entry: a side was merged away or changed. A position's symbol only grows,
    // so an unchanged id means the pair is still the one that was pushed.
    if (!alive[e.left] || !alive[e.right] || next[e.left] != e.right ||
        symbols[e.left] != e.left_id || symbols[e.right] != e.right_id)
      continue;
    symbols[e.left] = e.merged;
    alive[e.right] = false;
    next[e.left] = next[e.right];
    if (next[e.right] < static_cast<int32_t>(n)) prev[next[e.right]] = e.left;
    push(prev[e.left], e.left);
    push(e.left, next[e.left]);
  }
  size_t out = 0;
  for (size_t i = 0; i < n; ++i)
    if (alive[i]) symbols[out++] = symbols[i];
  symbols.resize(out);
}

template <typename Lookup>
void merge_symbols_reference(std::vector<int32_t>& symbols, Lookup&& lookup) {
  while (true) {
    Merge best;
    size_t best_pos = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const Merge m = lookup(symbols[i], symbols[i + 1]);
      if (m.found && (!best.found || m.priority < best.priority)) best = m, best_pos = i;
    }
    if (!best.found) return;
    symbols[best_pos] = best.id;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best_pos) + 1);
  }
}

}  // namespace oal::text
