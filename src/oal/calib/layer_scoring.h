#pragma once
// `oal layer-scores`: the softmax weight every layer's heads put beyond their sinks and
// recent window (attention/windowed/window_mass.h), on real blocks of a token stream:
// what `oal convert --layers auto:K` ranks layers by (analysis/layer_scores.h).
#include <cstdint>
#include <vector>

#include "oal/analysis/layer_scores.h"
#include "oal/attention/windowed/window.h"
#include "oal/core/progress.h"
#include "oal/model/transformer.h"

namespace oal::calib {

// Scores `layers` (empty: every layer) of `model` on the ctx-token blocks `blocks` of
// `stream` (block b = tokens [b·ctx, (b+1)·ctx)). Progress: ("sequences") of the capture.
// Throws oal::Error("layer_scores") when a block lies past the stream or the window is
// invalid.
analysis::LayerScores score_layers(const model::Transformer& model,
                                   const std::vector<int32_t>& stream, int64_t ctx,
                                   const std::vector<int64_t>& blocks,
                                   const std::vector<int64_t>& layers, const attn::Window& window,
                                   const ProgressFn& progress = {});

// One sequence to probe retrieval on: a prompt with its answer, the positions whose
// next token is part of the answer, and the earlier tokens the answer copies (a passkey
// prompt's key digits in the needle; eval/passkey.h builds them).
struct RetrievalProbe {
  std::vector<int64_t> tokens;  // [T] prompt + answer
  std::vector<int64_t> rows;    // query positions that predict answer tokens
  std::vector<bool> keys;       // [T] true on the tokens to be retrieved
};

// Adds to each scored layer of `scores` (same layers, in order) the mean over `probes`
// of mass_on_keys per query head (attention/windowed/window_mass.h) under scores.window:
// LayerScore::retrieval. Progress: ("probes"). Throws oal::Error("layer_scores") for an
// empty probe list or a probe whose rows or keys do not fit its tokens.
void score_retrieval(const model::Transformer& model, const std::vector<RetrievalProbe>& probes,
                     analysis::LayerScores& scores, const ProgressFn& progress = {});

}  // namespace oal::calib
