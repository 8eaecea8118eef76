#pragma once
// Progress reporting without printing: long-running library functions take a
// ProgressFn and call it as work completes; the CLI turns it into a bar on stderr.
#include <cstdint>
#include <functional>
#include <string_view>

namespace oal {

// done / total units of `what` (e.g. "blocks", "heads"); `detail` is a short status
// such as "loss 1.234". Called from the thread that drives the work.
using ProgressFn = std::function<void(int64_t done, int64_t total, std::string_view what,
                                      std::string_view detail)>;

inline void report(const ProgressFn& fn, int64_t done, int64_t total, std::string_view what,
                   std::string_view detail = {}) {
  if (fn) fn(done, total, what, detail);
}

}  // namespace oal
