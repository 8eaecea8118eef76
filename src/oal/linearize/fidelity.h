#pragma once
// Frozen-attention fidelity (paper §5.1, App. C; Table 2): every method's causal
// attention output against exact softmax on the same frozen post-RoPE q, k, v.
//
// For each held-out sequence b, with all evaluated layers and heads collected into one
// tensor: MSE_b = ||Ŷ_b − Y_b||²_F / n_b and RelMSE_b = ||Ŷ_b − Y_b||²_F / ||Y_b||²_F;
// reported values are means over sequences. "Before W_o": per-head outputs [H, T, Dv];
// "after W_o": heads concatenated in order and multiplied by the frozen W_o
// ([T, hidden] per layer). Y is SoftmaxAttention::forward, and the "softmax" method is
// evaluated by that same call, so its row is exactly 0. Per-layer rows use the same
// definitions restricted to one layer; per-head rows (before W_o) to one (layer, head).
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "oal/attention/method.h"
#include "oal/core/progress.h"

namespace oal::linearize {

// One layer's frozen inputs: q [N, Hq, T, D], k, v [N, Hkv, T, D|Dv], wo [hidden, Hq*Dv],
// and the methods to compare on it (by name).
struct FidelityLayer {
  int64_t layer = 0;
  at::Tensor q, k, v, wo;
  std::map<std::string, std::shared_ptr<attn::AttentionMethod>> methods;
};

struct FidelityScores {
  double mse_before_wo = 0, relmse_before_wo = 0, mse_after_wo = 0, relmse_after_wo = 0;
};

struct FidelityRow {
  std::string method;
  FidelityScores all;                          // Table 2 row
  std::map<int64_t, FidelityScores> layers;    // per layer
  std::map<std::pair<int64_t, int64_t>, FidelityScores> heads;  // (layer, head), before W_o
};

struct FidelityResult {
  std::vector<FidelityRow> rows;  // in `methods` order
  int64_t sequences = 0, tokens_per_sequence = 0;
};

// Evaluates `methods` (names present in every layer) under NoGradGuard. Progress:
// ("sequences"). Throws oal::Error("fidelity") on inconsistent inputs or a non-finite
// method output.
FidelityResult frozen_fidelity(const std::vector<FidelityLayer>& layers,
                               const std::vector<std::string>& methods,
                               const ProgressFn& progress = {});

// {"sequences", "tokens", "methods": {name: {mse_before_wo, relmse_before_wo,
//  mse_after_wo, relmse_after_wo, "layers": {...}, "heads": [...]}}, "order": [...]}.
nlohmann::json fidelity_json(const FidelityResult& result);

// The Table 2 layout as plain text (one row per method, the four metrics).
std::string fidelity_table(const FidelityResult& result);

}  // namespace oal::linearize
