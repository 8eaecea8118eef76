#pragma once
// The balance of a windowed conversion, chosen by the converted model's own loss.
//
// Calibration fits each head's kernel and c_h against that head's softmax output, one
// layer at a time, on the original model's activations. Lower error per head is not
// lower perplexity for the model: at ctx 4096 the kernels' share of the weight (κ over
// thousands of far keys) compounds through 24 converted layers, and the fitted
// conversion scored 1.2 % above the windowed-only rule (docs/results.md). One offset δ
// for the whole model moves every converted head's balance together,
//
//     c_h ← c_h − δ   (the exact part's weight grows by e^δ against the kernel's),
//
// and the offset (or the windowed-only rule itself, every c_h at
// attn::k_window_only_log_scale) with the lowest perplexity of the converted model on
// held-in text blocks is kept. One number fitted on whole blocks does not overfit them
// the way per-head choices would, and the windowed-only candidate makes the result no
// worse than that rule on those blocks.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oal/attention/method.h"
#include "oal/core/progress.h"
#include "oal/model/transformer.h"

namespace oal::convert {

// Converted layer → its method (as methods_from_calibration returns them).
using LayerMethods = std::map<int64_t, std::shared_ptr<attn::AttentionMethod>>;

struct BalanceOptions {
  int64_t ctx = 0;          // tokens per scored block (the length the model should serve)
  int64_t first_block = 0;  // blocks first_block .. first_block + blocks − 1 of the stream
  int64_t blocks = 1;       // >= 1; held-in text: keep them apart from evaluation blocks
  // Candidate offsets δ, each finite; the windowed-only candidate is always added.
  std::vector<double> offsets{0, 0.5, 1, 1.5, 2, 3, 4, 6};
  ProgressFn progress;      // (blocks scored, total, "blocks", candidate)
};

// One candidate's score: offset δ, or nullopt for the windowed-only candidate.
struct BalanceScore {
  std::optional<double> offset;
  double nll = 0;  // mean NLL per target over the blocks
  double ppl = 0;
  std::string describe() const;  // "offset 2" | "window-only"
};

struct BalanceChoice {
  std::vector<BalanceScore> scores;  // in candidate order, windowed-only last
  size_t chosen = 0;                 // lowest nll; ties go to the earlier candidate
  const BalanceScore& best() const { return scores.at(chosen); }
};

// `methods` with every c_h shifted by −offset, or set to attn::k_window_only_log_scale
// (offset nullopt). New method objects; the inputs are not changed. Throws
// oal::Error("[balance] ...") for a layer that is not windowed (no c_h to move) or a
// non-finite offset.
LayerMethods offset_log_scales(const LayerMethods& methods, std::optional<double> offset);

// Scores every candidate on `stream` (token ids, no BOS) by installing it into `model`
// (whose other layers are left as they are) and returns the scores. `model` ends with the
// chosen candidate installed. Throws oal::Error("[balance] ...") for no methods, bad
// options, or a stream without the asked blocks (eval::perplexity's message).
BalanceChoice choose_balance(model::Transformer& model, const LayerMethods& methods,
                             const std::vector<int32_t>& stream, const BalanceOptions& options);

}  // namespace oal::convert
