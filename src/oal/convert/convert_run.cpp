#include "oal/convert/convert_run.h"

#include <fmt/format.h>

#include "oal/adapt/hybrid.h"
#include "oal/analysis/layer_scores.h"
#include "oal/attention/registry.h"
#include "oal/attention/windowed/windowed_attention.h"
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

// The count N of an "auto:N" option value, or an error naming the option and `expected`.
int64_t auto_count(const std::string& value, const char* option, const char* expected) {
  const std::string text = value.substr(5);
  try {
    size_t used = 0;
    const int64_t n = std::stoll(text, &used);
    if (used == text.size()) return n;
  } catch (const std::exception&) {
  }
  fail("convert", "{} '{}': expected {}", option, value, expected);
}

// "auto:K" with its scores file: the K layers that need full attention least.
void plan_auto_layers(const ConvertOptions& o, int64_t num_layers, ConversionPlan& p) {
  const int64_t k =
      auto_count(o.layers, "--layers", "auto:K with K a layer count, e.g. auto:24");
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

// --full-heads: "auto:M" from the scores' retrieval masses among the converted layers,
// or LAYER:HEAD pairs; each kept layer must be converted.
void plan_full_heads(const ConvertOptions& o, int64_t kv_heads, ConversionPlan& p) {
  if (o.full_heads.empty()) return;
  if (o.full_heads.rfind("auto:", 0) == 0) {
    check(!o.layer_scores.empty(), "convert",
          "--full-heads {} needs --layer-scores FILE with retrieval masses (`oal layer-scores "
          "--retrieval-probes N --out FILE`)",
          o.full_heads);
    const int64_t m = auto_count(o.full_heads, "--full-heads", "auto:M with M a KV head count");
    const analysis::LayerScores s = analysis::read_layer_scores(o.layer_scores);
    check(o.window.none() || o.window == s.window, "convert",
          "{} scored retrieval beyond {} but --sinks/--window ask for {}",
          o.layer_scores.string(), s.window.describe(), o.window.describe());
    p.full_heads = analysis::most_retrieving_kv_heads(s, m, p.layers, kv_heads);
    p.full_heads_rule = fmt::format(
        "auto: the {} KV heads of the converted layers that put the most weight on passkey "
        "keys beyond {} ({})",
        m, s.window.describe(), o.layer_scores.string());
    return;
  }
  for (const std::string& pair : split_names(o.full_heads)) {
    const size_t colon = pair.find(':');
    int64_t layer = -1, head = -1;
    try {
      check(colon != std::string::npos, "convert", "");
      size_t a = 0, b = 0;
      layer = std::stoll(pair.substr(0, colon), &a);
      head = std::stoll(pair.substr(colon + 1), &b);
      check(a == colon && b == pair.size() - colon - 1, "convert", "");
    } catch (const std::exception&) {
      fail("convert", "--full-heads '{}': expected auto:M or LAYER:HEAD pairs such as 14:0,20:2",
           o.full_heads);
    }
    check(std::find(p.layers.begin(), p.layers.end(), layer) != p.layers.end(), "convert",
          "--full-heads {}: layer {} is not converted", o.full_heads, layer);
    check(head >= 0 && head < kv_heads, "convert",
          "--full-heads {}: KV head {} does not exist (the model has {})", o.full_heads, head,
          kv_heads);
    p.full_heads[layer].kv.push_back(head);
  }
  check(!p.full_heads.empty(), "convert",
        "--full-heads '{}': expected auto:M or LAYER:HEAD pairs such as 14:0,20:2", o.full_heads);
  for (auto& [layer, heads] : p.full_heads) {
    std::sort(heads.kv.begin(), heads.kv.end());
    heads.validate("convert", kv_heads);  // a pair given twice
  }
  p.full_heads_rule = fmt::format("explicit: --full-heads {}", o.full_heads);
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

ConversionPlan plan_conversion(const ConvertOptions& o, int64_t num_layers, int64_t kv_heads) {
  ConversionPlan p;
  p.from_calibration = starts_from_calibration(o.method, o.init);
  check(o.full_heads.empty() || !is_exact_method(o.method), "convert",
        "--full-heads keeps heads of converted layers exact; softmax converts none");
  if (is_exact_method(o.method)) return p;
  if (o.layers.rfind("auto:", 0) == 0) {
    plan_auto_layers(o, num_layers, p);
  } else {
    p.layers = adapt::parse_converted_layers(o.layers, num_layers);
    p.range_rule = o.layers.empty() || o.layers == "default"
                       ? adapt::default_range_rule(num_layers)
                       : fmt::format("explicit: --layers {} of {}", o.layers, num_layers);
  }
  plan_full_heads(o, kv_heads, p);
  return p;
}

std::string describe_full_heads(const std::map<int64_t, attn::FullHeads>& full_heads) {
  std::string out;
  for (const auto& [layer, heads] : full_heads)
    for (int64_t h : heads.kv) out += fmt::format("{}{}:{}", out.empty() ? "" : ",", layer, h);
  return out;
}

void apply_full_heads(const std::map<int64_t, std::shared_ptr<attn::AttentionMethod>>& methods,
                      const std::map<int64_t, attn::FullHeads>& full_heads) {
  for (const auto& [layer, heads] : full_heads) {
    const auto it = methods.find(layer);
    check(it != methods.end(), "convert", "--full-heads: layer {} is not converted", layer);
    auto* w = dynamic_cast<attn::WindowedAttention*>(it->second.get());
    check(w != nullptr, "convert",
          "--full-heads: layer {} runs '{}' without a window; kept heads sit beside a window "
          "(--sinks/--window)",
          layer, it->second->name());
    w->set_full_heads(heads);
  }
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
  ConversionPlan plan = plan_conversion(o, w.config.num_layers, w.config.num_kv_heads);
  if (o.layers != options.layers)  // from_converted_source chose them
    plan.range_rule = fmt::format("the converted model's own layers ({})", o.layers);
  const auto& layers = plan.layers;
  auto methods = methods_from_calibration(o.calib, w, o.method, layers, false, o.init, o.window);
  apply_full_heads(methods, plan.full_heads);
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
