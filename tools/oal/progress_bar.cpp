#include "progress_bar.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace oal::cli {
namespace {

constexpr int k_bar_width = 24;
constexpr auto k_redraw_interval = std::chrono::milliseconds(100);
// Without a terminal (logs, CI) a full line every 30 s, so long work is never silent.
constexpr auto k_log_interval = std::chrono::seconds(30);

std::string format_eta(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

ProgressBar::ProgressBar(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled), tty_(isatty(fileno(stderr)) != 0),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

ProgressBar::~ProgressBar() { finish(); }

ProgressFn ProgressBar::fn() {
  return [this](int64_t done, int64_t total, std::string_view what, std::string_view detail) {
    update(done, total, what, detail);
  };
}

std::string ProgressBar::format_line(std::string_view label, int64_t done, int64_t total,
                                     std::string_view what, double seconds,
                                     std::string_view detail) {
  const double frac = total > 0 ? std::clamp(double(done) / double(total), 0.0, 1.0) : 0.0;
  const int filled = static_cast<int>(frac * k_bar_width);
  std::string bar(filled, '=');
  if (filled < k_bar_width) bar += '>' + std::string(k_bar_width - filled - 1, ' ');
  std::string line = fmt::format("{} [{}] {}/{} {}", label, bar, done, total, what);
  if (seconds > 0 && done > 0) {
    const double rate = double(done) / seconds;
    line += fmt::format("  {:.3g} {}/s", rate, what);
    if (done < total) line += "  ETA " + format_eta(double(total - done) / rate);
    else line += "  " + format_eta(seconds);
  }
  if (!detail.empty()) line += fmt::format("  {}", detail);
  return line;
}

void ProgressBar::update(int64_t done, int64_t total, std::string_view what,
                         std::string_view detail) {
  if (!enabled_ || finished_) return;
  done_ = done, total_ = total, what_ = what, detail_ = detail;
  pending_ = true;
  const auto now = std::chrono::steady_clock::now();
  // Rates count from the first update: a bar may be made long before its step starts.
  if (!started_) start_ = last_draw_ = now, started_ = true;
  if (done >= total) {
    finish();
  } else if (now - last_draw_ >= (tty_ ? k_redraw_interval : k_log_interval)) {
    last_draw_ = now;
    draw(false);
  }
}

void ProgressBar::draw(bool final) {
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::string line = format_line(label_, done_, total_, what_, secs, detail_);
  if (tty_) fmt::print(stderr, "\r\033[2K{}{}", line, final ? "\n" : "");
  else fmt::print(stderr, "{}\n", line);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (!enabled_ || finished_ || !pending_) return;
  finished_ = true;
  draw(true);
}

}  // namespace oal::cli
