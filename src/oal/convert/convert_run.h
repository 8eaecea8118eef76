#pragma once
// `oal convert` end to end: choose the converted layers (adapt/hybrid.h rule or a list),
// build their methods from a calibration run, export a converted directory (convert.h).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oal/attention/method_names.h"
#include "oal/attention/windowed/full_heads.h"
#include "oal/convert/balance.h"
#include "oal/convert/convert.h"

namespace oal::convert {

struct ConvertOptions {
  std::string model;                 // source model path
  std::filesystem::path calib;       // calibration run directory (not for "softmax")
  std::string method = attn::names::oal;  // a registered method (attention/registry.h)
  // "default" (adapt/hybrid.h rule), an index list ("1-3"), or "auto:K": the K layers
  // whose heads put the least softmax weight beyond the window (`layer_scores`).
  std::string layers = "default";
  std::filesystem::path layer_scores;  // `oal layer-scores --out` JSON, for "auto:K"
  // KV heads of the converted layers kept exact beside their window (full_heads.h): ""
  // none, "auto:M" the M that retrieve most (layer_scores with retrieval masses), or a
  // list of LAYER:HEAD pairs ("14:0,20:2").
  std::string full_heads;
  std::filesystem::path tokenizer;   // empty: found beside the model
  std::filesystem::path out;         // converted directory to write
  KernelInit init = KernelInit::initial;  // baselines from their initial values (App. F)
  attn::Window window{};             // must match the run's; builds "window" without a run
  // Text whose blocks choose the balance of a windowed conversion by the model's loss
  // (balance.h; `balance` says which blocks at which ctx); empty: the calibrated c_h.
  std::filesystem::path balance_text;
  BalanceOptions balance;
};

// How the converted layers were chosen and where their parameters start, for printing.
struct ConversionPlan {
  std::vector<int64_t> layers;
  std::string range_rule;       // default_range_rule(), or "explicit: ..." for a user list
  bool from_calibration = true; // starts_from_calibration(method, init)
  std::map<int64_t, attn::FullHeads> full_heads;  // by converted layer; empty: none
  std::string full_heads_rule;  // how they were chosen, "" when none
};

// The kept heads as --full-heads takes them ("14:0,14:1,20:2"); "" when none.
std::string describe_full_heads(const std::map<int64_t, attn::FullHeads>& full_heads);

// Gives each layer of `full_heads` its kept heads. Throws oal::Error("convert") when a
// layer is not among `methods` or its method has no window.
void apply_full_heads(const std::map<int64_t, std::shared_ptr<attn::AttentionMethod>>& methods,
                      const std::map<int64_t, attn::FullHeads>& full_heads);

struct ConvertResult {
  std::vector<int64_t> layers;
  std::string method;
  std::filesystem::path out;
  ConversionPlan plan;
  std::optional<BalanceChoice> balance;  // when balance_text was given
};

// The layers, kept heads and parameter start of a conversion of a `num_layers` model
// with `kv_heads` KV heads per layer. Throws oal::Error for a bad layer or head spec.
ConversionPlan plan_conversion(const ConvertOptions& options, int64_t num_layers,
                               int64_t kv_heads);

// Converts without training (the "unadapted converted model").
ConvertResult run_convert(const ConvertOptions& options);

}  // namespace oal::convert
