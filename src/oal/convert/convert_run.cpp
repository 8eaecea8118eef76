#include "oal/convert/convert_run.h"

#include <fmt/format.h>

#include "oal/core/error.h"
#include "oal/model/find_tokenizer.h"
#include "oal/model/hybrid.h"
#include "oal/model/load.h"

namespace oal::convert {
namespace fs = std::filesystem;

ConversionPlan plan_conversion(const ConvertOptions& o, int64_t num_layers) {
  ConversionPlan p;
  p.from_calibration = starts_from_calibration(o.method, o.init);
  if (is_exact_method(o.method)) return p;
  p.layers = model::parse_converted_layers(o.layers, num_layers);
  p.range_rule = o.layers.empty() || o.layers == "default"
                     ? model::default_range_rule(num_layers)
                     : fmt::format("explicit: --layers {} of {}", o.layers, num_layers);
  return p;
}

ConvertResult run_convert(const ConvertOptions& o) {
  check(!o.out.empty(), "convert", "no output directory given (--out)");
  model::ModelWeights w = model::load_model(o.model);
  const ConversionPlan plan = plan_conversion(o, w.config.num_layers);
  const auto& layers = plan.layers;
  auto methods = methods_from_calibration(o.calib, w, o.method, layers, false, o.init, o.window);
  const fs::path tok = model::find_tokenizer(o.model, o.tokenizer);
  model::Transformer t(w);
  model::apply_hybrid(t, methods);
  export_converted(o.out, w, t, o.method, layers, o.model, tok);
  return {layers, o.method, o.out, plan};
}

}  // namespace oal::convert
