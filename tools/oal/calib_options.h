#pragma once
// Options shared by `oal calibrate`, `oal fidelity`, `oal diagnose` and `oal linearize`:
// the block split, layer and method lists, and the fitter settings.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "oal/calib/block_split.h"
#include "oal/calib/calibrate.h"
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
}

inline std::vector<int64_t> parse_layers(const std::string& s) {
  return s.empty() ? std::vector<int64_t>{} : parse_index_list(s, "layers");
}

}  // namespace oal::cli
