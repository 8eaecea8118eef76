#include "oal/linearize/diagnose_run.h"

#include "oal/calib/layer_data.h"

namespace oal::linearize {

DiagnoseResult diagnose_run(const model::Transformer& model, const std::vector<int32_t>& stream,
                            int64_t ctx, const calib::BlockSplit& split,
                            const attn::ModelKernels& groups, std::vector<int64_t> layers,
                            const DiagnoseOptions& options, const ProgressFn& capture_progress) {
  if (layers.empty())
    for (const auto& [l, _] : groups.layers) layers.push_back(l);
  for (int64_t l : layers) (void)groups.layer(l);  // every layer has groups, before the capture
  const calib::SplitBlocks blocks = calib::split_blocks(stream, ctx, split);
  const auto caps = calib::capture_qkv(model, blocks.eval, layers, capture_progress);
  std::vector<DiagnoseLayer> in;
  for (int64_t l : layers) {
    DiagnoseLayer dl{l, caps.at(l).q, caps.at(l).k, caps.at(l).v, {}};
    for (const auto& k : groups.layer(l)) dl.groups.push_back(k.groups());
    in.push_back(std::move(dl));
  }
  return diagnose(in, options);
}

}  // namespace oal::linearize
