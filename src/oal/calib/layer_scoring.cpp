#include "oal/calib/layer_scoring.h"

#include "oal/analysis/layer_selection.h"
#include "oal/attention/windowed/window_mass.h"
#include "oal/calib/layer_data.h"
#include "oal/core/error.h"

namespace oal::calib {

analysis::LayerScores score_layers(const model::Transformer& model,
                                   const std::vector<int32_t>& stream, int64_t ctx,
                                   const std::vector<int64_t>& blocks,
                                   const std::vector<int64_t>& layers, const attn::Window& window,
                                   const ProgressFn& progress) {
  constexpr std::string_view op = "layer_scores";
  window.validate(op);
  check(ctx >= 1 && !blocks.empty(), op, "expected ctx >= 1 and at least one block");
  const int64_t available = int64_t(stream.size()) / ctx;
  std::vector<int64_t> ids;
  for (int64_t b : blocks) {
    check(b >= 0 && b < available, op,
          "block {} does not exist: the text has {} blocks of {} tokens", b, available, ctx);
    for (int64_t t = b * ctx; t < (b + 1) * ctx; ++t) ids.push_back(stream[t]);
  }
  const at::Tensor tokens = at::tensor(ids, at::kLong).view({int64_t(blocks.size()), ctx});
  const std::vector<int64_t> chosen = analysis::resolve_layers(layers, model.num_layers());
  analysis::LayerScores out{window, ctx, int64_t(blocks.size()), {}};
  const auto caps = capture_qkv(model, tokens, chosen, progress);
  for (const auto& [layer, cap] : caps) {  // std::map: ascending layers
    const at::Tensor mass = attn::mass_beyond_window(cap.q, cap.k, window).contiguous();
    out.layers.push_back({layer, std::vector<double>(mass.data_ptr<double>(),
                                                     mass.data_ptr<double>() + mass.numel())});
  }
  return out;
}

}  // namespace oal::calib
