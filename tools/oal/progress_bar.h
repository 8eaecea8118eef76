#pragma once
// A progress bar on stderr implementing oal::ProgressFn, shared by every long-running
// CLI command:
//   ppl  [==========>         ]  457/915 blocks  12.3 blocks/s  ETA 0:37  ppl 5.01
// On a terminal the line is redrawn in place at most every 100 ms (and always at the
// end); when stderr is not a terminal (logs, CI) a plain line is written at most every
// 30 s and once at the end.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "oal/core/progress.h"

namespace oal::cli {

class ProgressBar {
 public:
  // `label` starts the line; `enabled` false silences the bar entirely (e.g. --quiet).
  explicit ProgressBar(std::string label, bool enabled = true);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // A ProgressFn that forwards to this bar; the bar must outlive its use.
  ProgressFn fn();
  void update(int64_t done, int64_t total, std::string_view what, std::string_view detail);
  // Writes the final line (if any update came and it was not written yet).
  void finish();

  // The text of one line, without control characters (exposed for tests):
  // label, bar, done/total what, rate what/s, ETA m:ss (while unfinished), detail.
  static std::string format_line(std::string_view label, int64_t done, int64_t total,
                                 std::string_view what, double seconds, std::string_view detail);

 private:
  void draw(bool final);
  std::string label_;
  bool enabled_;
  bool tty_;
  bool finished_ = false;
  bool pending_ = false;
  bool started_ = false;
  int64_t done_ = 0, total_ = 0;
  std::string what_, detail_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace oal::cli
