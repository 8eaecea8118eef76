#include "oal/convert/convert_run.h"

#include <fmt/format.h>

#include "oal/adapt/hybrid.h"
#include "oal/analysis/layer_scores.h"
#include "oal/attention/registry.h"
#include "oal/core/error.h"
#include "oal/core/ranges.h"
#include "oal/formats/converted.h"
#include "oal/formats/find_tokenizer.h"
#include "oal/formats/load.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"

namespace oal::convert {
namespace fs = std::filesystem;

namespace {

// "auto:K" with its scores file: the K layers that need full attention least.
void plan_auto_layers(const ConvertOptions& o, int64_t num_layers, ConversionPlan& p) {
  const std::string k_text = o.layers.substr(5);
  int64_t k = 0;
  try {
    size_t used = 0;
    k = std::stoll(k_text, &used);
    check(used == k_text.size(), "convert", "");
  } catch (const std::exception&) {
    fail("convert", "--layers '{}': expected auto:K with K a layer count, e.g. auto:24", o.layers);
  }
  check(!o.layer_scores.empty(), "convert",
        "--layers {} needs --layer-scores FILE (written by `oal layer-scores --out FILE`)",
        o.layers);
  const analysis::LayerScores s = analysis::read_layer_scores(o.layer_scores);
  check(o.window.none() || o.window == s.window, "convert",
        "{} scored layers beside {} but --sinks/--window ask for {}", o.layer_scores.string(),
        s.window.describe(), o.window.describe());
  for (const auto& l : s.layers)
    check(l.layer < num_layers, "convert", "{} scores layer {}: the model has {} layers",
          o.layer_scores.string(), l.layer, num_layers);
  p.layers = analysis::least_window_mass_layers(s, k);
  p.range_rule =
      fmt::format("auto: the {} of {} scored layers with the least softmax weight beyond {} ({})",
                  k, s.layers.size(), s.window.describe(), o.layer_scores.string());
}

// A converted directory as --model without --calib (an adapted model to rebalance): its
// own stored kernels are the run, and its converted layers the default range, so its
// other layers stay as they were adapted rather than falling back to the default rule.
ConvertOptions from_converted_source(ConvertOptions o) {
  const bool needs_run = !is_exact_method(o.method) &&
                         attn::method_spec(o.method).kind != attn::MethodKind::window;
  if (!o.calib.empty() || !needs_run) return o;
  const std::optional<formats::Conversion> c = formats::read_conversion(o.model);
  if (!c) return o;
  check(c->method == o.method, "convert",
        "{} is a converted model running '{}': pass --method {} to use its kernels, or "
        "--calib RUN for another method",
        o.model, c->method, c->method);
  o.calib = fs::path(o.model) / formats::k_converted_attention_dir;
  o.init = KernelInit::calibrated;  // its stored parameters are the trained ones
  if (o.layers.empty() || o.layers == "default") o.layers = format_index_list(c->layers);
  return o;
}

}  // namespace

ConversionPlan plan_conversion(const ConvertOptions& o, int64_t num_layers) {
  ConversionPlan p;
  p.from_calibration = starts_from_calibration(o.method, o.init);
  if (is_exact_method(o.method)) return p;
  if (o.layers.rfind("auto:", 0) == 0) {
    plan_auto_layers(o, num_layers, p);
    return p;
  }
  p.layers = adapt::parse_converted_layers(o.layers, num_layers);
  p.range_rule = o.layers.empty() || o.layers == "default"
                     ? adapt::default_range_rule(num_layers)
                     : fmt::format("explicit: --layers {} of {}", o.layers, num_layers);
  return p;
}

ConvertResult run_convert(const ConvertOptions& options) {
  const ConvertOptions o = from_converted_source(options);
  check(!o.out.empty(), "convert", "no output directory given (--out)");
  check(o.balance_text.empty() || o.balance.ctx >= 2, "convert",
        "--balance-text needs --balance-ctx N (tokens per scored block, >= 2)");
  // A bad text file fails before the model is read.
  const std::string balance_text =
      o.balance_text.empty() ? std::string() : text::read_text_file(o.balance_text);
  model::ModelWeights w = formats::load_model(o.model);
  ConversionPlan plan = plan_conversion(o, w.config.num_layers);
  if (o.layers != options.layers)  // from_converted_source chose them
    plan.range_rule = fmt::format("the converted model's own layers ({})", o.layers);
  const auto& layers = plan.layers;
  auto methods = methods_from_calibration(o.calib, w, o.method, layers, false, o.init, o.window);
  const fs::path tok = formats::find_tokenizer(o.model, o.tokenizer);
  model::Transformer t(w);
  adapt::apply_hybrid(t, methods);
  ConvertResult r{layers, o.method, o.out, plan};
  if (!o.balance_text.empty()) {
    const auto stream = text::load_tokenizer(tok)->encode(balance_text, false);
    r.balance = choose_balance(t, methods, stream, o.balance);  // t keeps the chosen one
  }
  export_converted(o.out, w, t, o.method, layers, o.model, tok);
  return r;
}

}  // namespace oal::convert
