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
                                                     mass.data_ptr<double>() + mass.numel()),
                          {}});
  }
  return out;
}

void score_retrieval(const model::Transformer& model, const std::vector<RetrievalProbe>& probes,
                     analysis::LayerScores& scores, const ProgressFn& progress) {
  constexpr std::string_view op = "layer_scores";
  check(!probes.empty(), op, "retrieval scores need at least one probe");
  std::vector<int64_t> layers;
  for (const auto& l : scores.layers) layers.push_back(l.layer);
  std::vector<at::Tensor> sums(layers.size());
  for (size_t p = 0; p < probes.size(); ++p) {
    const RetrievalProbe& probe = probes[p];
    const int64_t T = int64_t(probe.tokens.size());
    check(T >= 1 && int64_t(probe.keys.size()) == T && !probe.rows.empty(), op,
          "probe {}: expected one key flag per token ({} tokens, {} flags) and at least one row",
          p, T, probe.keys.size());
    const std::vector<uint8_t> flags(probe.keys.begin(), probe.keys.end());
    const at::Tensor keys = at::tensor(flags, at::kByte).to(at::kBool);
    const at::Tensor rows = at::tensor(probe.rows, at::kLong);
    const at::Tensor tokens = at::tensor(probe.tokens, at::kLong).view({1, T});
    const auto caps = capture_qkv(model, tokens, layers);
    size_t i = 0;
    for (const auto& [layer, cap] : caps) {  // ascending, as scores.layers
      const at::Tensor m = attn::mass_on_keys(cap.q[0], cap.k[0], rows, keys, scores.window);
      sums[i] = sums[i].defined() ? sums[i] + m : m;
      ++i;
    }
    report(progress, int64_t(p + 1), int64_t(probes.size()), "probes");
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    const at::Tensor mean = (sums[i] / double(probes.size())).contiguous();
    scores.layers[i].retrieval.assign(mean.data_ptr<double>(),
                                      mean.data_ptr<double>() + mean.numel());
  }
}

}  // namespace oal::calib
