#include "oal/calib/layer_data.h"

#include "oal/attention/softmax/softmax_method.h"
#include "oal/core/error.h"
#include "oal/text/block_tensor.h"
#include "oal/text/corpus.h"

namespace oal::calib {
namespace {

at::Tensor select_blocks(const at::Tensor& all, const std::vector<int64_t>& idx) {
  return all.index_select(0, at::tensor(idx, at::kLong)).contiguous();
}

at::Tensor softmax_targets(const analysis::LayerCapture& c) {
  at::NoGradGuard g;
  return attn::SoftmaxAttention().forward(c.q, c.k, c.v);
}

}  // namespace

SplitBlocks split_blocks(const std::vector<int32_t>& stream, int64_t ctx, const BlockSplit& split) {
  check(ctx >= 1, "block_split", "ctx must be >= 1, got {}", ctx);
  const int64_t available = text::block_count(int64_t(stream.size()), ctx);
  split.validate(available);
  at::Tensor all = text::make_block_tensor(stream, ctx, {0, split.blocks_needed()});
  return {select_blocks(all, split.train), select_blocks(all, split.val),
          select_blocks(all, split.eval)};
}

std::map<int64_t, analysis::LayerCapture> capture_qkv(const model::Transformer& model,
                                                      const at::Tensor& tokens,
                                                      const std::vector<int64_t>& layers,
                                                      const ProgressFn& progress) {
  analysis::CaptureOptions o;
  o.layers = layers;
  o.head_out = false;
  o.resid = false;
  o.progress = progress;
  return analysis::capture(model, tokens, o).layers;
}

std::vector<LayerFitInput> fit_inputs(const std::map<int64_t, analysis::LayerCapture>& train,
                                      const std::map<int64_t, analysis::LayerCapture>& val) {
  std::vector<LayerFitInput> out;
  for (const auto& [layer, tr] : train) {
    auto it = val.find(layer);
    check(it != val.end(), "calibrate", "layer {} captured for training but not validation", layer);
    const auto& va = it->second;
    out.push_back({layer, {tr.q, tr.k, tr.v, softmax_targets(tr), va.q, va.k, va.v,
                           softmax_targets(va)}});
  }
  return out;
}

}  // namespace oal::calib
