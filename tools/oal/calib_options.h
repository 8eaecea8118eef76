#pragma once
// Options shared by `oal calibrate`, `oal fidelity`, `oal diagnose` and `oal linearize`:
// the block split, layer and method lists, and the fitter settings.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "oal/calib/block_split.h"
#include "oal/calib/calibrate.h"
#include "oal/attention/registry.h"
#include "oal/core/ranges.h"

namespace oal::cli {

struct SplitArgs {
  std::string train = "16-23", val = "24-25", eval = "0-15";
  calib::BlockSplit parse() const {
    return {parse_index_list(train, "train-blocks"), parse_index_list(val, "val-blocks"),
            parse_index_list(eval, "eval-blocks")};
  }
};

inline void add_split_options(CLI::App& app, SplitArgs& s) {
  app.add_option("--train-blocks", s.train, "Training blocks of the token stream")
      ->capture_default_str();
  app.add_option("--val-blocks", s.val, "Validation blocks (checkpoint selection)")
      ->capture_default_str();
  app.add_option("--eval-blocks", s.eval, "Held-out evaluation blocks")->capture_default_str();
}

// --sinks S --window W: the exact window beside the linear methods (windowed OAL).
inline void add_window_options(CLI::App& app, attn::Window& w) {
  app.add_option("--sinks", w.sinks,
                 "Sink tokens S attended exactly beside the linear method (windowed OAL; "
                 "docs/adapt.md says how to choose S and W)")
      ->capture_default_str();
  app.add_option("--window", w.recent,
                 "Most recent tokens W (the query included) attended exactly; --sinks 0 "
                 "--window 0 is the plain method. Enables the windowed-only method 'window'")
      ->capture_default_str();
}

inline void add_fit_options(CLI::App& app, calib::CalibrationOptions& o) {
  app.add_option("--max-updates", o.fit.max_updates, "Adam updates per fit (at most)")
      ->capture_default_str();
  app.add_option("--val-every", o.fit.val_every, "Validate every this many updates")
      ->capture_default_str();
  app.add_option("--patience", o.fit.patience, "Stop after this many updates without improvement")
      ->capture_default_str();
  app.add_option("--positions", o.fit.positions, "Sampled query positions per update")
      ->capture_default_str();
  app.add_option("--lr", o.fit.lr, "Adam learning rate")->capture_default_str();
  app.add_option("--perturb-sigma", o.perturb_sigma, "Noise of the perturbed initialisations")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of random draws and sampling")->capture_default_str();
  add_window_options(app, o.window);
}

// The --methods list: as given, or (empty) every method that runs with the window.
inline std::vector<std::string> methods_or_default(const std::string& list,
                                                   const attn::Window& window) {
  return list.empty() ? attn::method_names(window) : split_names(list);
}

inline std::vector<int64_t> parse_layers(const std::string& s) {
  return s.empty() ? std::vector<int64_t>{} : parse_index_list(s, "layers");
}

}  // namespace oal::cli
