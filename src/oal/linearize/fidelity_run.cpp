#include "oal/linearize/fidelity_run.h"

#include <algorithm>

#include "oal/attention/registry.h"
#include "oal/calib/layer_data.h"
#include "oal/core/error.h"

namespace oal::linearize {

FidelityResult evaluate_run(const model::Transformer& model, const std::vector<int32_t>& stream,
                            int64_t ctx, const calib::BlockSplit& split,
                            const std::vector<attn::LayerMethods>& methods,
                            std::vector<int64_t> layers, std::vector<std::string> order,
                            const ProgressFn& capture_progress, const ProgressFn& progress) {
  check(!methods.empty(), "fidelity", "the calibration run has no layers");
  if (layers.empty())
    for (const auto& lm : methods) layers.push_back(lm.layer);
  if (order.empty())
    for (const auto& name : attn::method_names())
      if (methods[0].methods.count(name)) order.push_back(name);
  calib::SplitBlocks blocks = calib::split_blocks(stream, ctx, split);
  auto caps = calib::capture_qkv(model, blocks.eval, layers, capture_progress);
  const std::string reference = attn::reference_method().name;  // always scored, first
  std::vector<FidelityLayer> in;
  for (int64_t l : layers) {
    auto it = std::find_if(methods.begin(), methods.end(),
                           [l](const attn::LayerMethods& m) { return m.layer == l; });
    check(it != methods.end(), "fidelity", "layer {} was not calibrated in this run", l);
    const auto& c = caps.at(l);
    FidelityLayer fl{l, c.q, c.k, c.v, c.wo, it->methods};
    if (!fl.methods.count(reference))
      fl.methods[reference] = attn::make_method(reference, {l, 1, 1, 1}, 0, nullptr);
    in.push_back(std::move(fl));
  }
  if (std::find(order.begin(), order.end(), reference) == order.end())
    order.insert(order.begin(), reference);
  return frozen_fidelity(in, order, progress);
}

}  // namespace oal::linearize
