#pragma once
// From a model and a token stream to the frozen per-layer tensors that fitting and the
// fidelity evaluation use: blocks of the paper's split (block_split.h), captured
// post-RoPE q, k, v (and W_o), and the softmax outputs they are matched against.
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <vector>

#include "oal/analysis/capture.h"
#include "oal/calib/block_split.h"
#include "oal/calib/calibrate.h"
#include "oal/core/progress.h"
#include "oal/model/transformer.h"

namespace oal::calib {

// Token blocks [n, ctx] int64 of each set. Validates the split against the number of
// complete ctx-token blocks in `stream` (oal::Error "block_split" naming the counts).
struct SplitBlocks {
  at::Tensor train, val, eval;
};
SplitBlocks split_blocks(const std::vector<int32_t>& stream, int64_t ctx, const BlockSplit& split);

// q, k, v (and W_o) of `layers` for the blocks `tokens` [n, T] (one sequence per forward).
std::map<int64_t, analysis::LayerCapture> capture_qkv(const model::Transformer& model,
                                                      const at::Tensor& tokens,
                                                      const std::vector<int64_t>& layers,
                                                      const ProgressFn& progress = {});

// Softmax targets for the captured train/validation tensors of every layer.
std::vector<LayerFitInput> fit_inputs(const std::map<int64_t, analysis::LayerCapture>& train,
                                      const std::map<int64_t, analysis::LayerCapture>& val);

}  // namespace oal::calib
