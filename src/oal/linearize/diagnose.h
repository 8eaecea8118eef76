#pragma once
// Error-concentration diagnostics (paper §3.2, App. A.2; Table 1).
//
// For a query head h with high-contribution subset S_h (the union of its non-bulk
// groups) the hybrid kernel approximates only S_h and keeps the complement exact:
//   kappa~_ij = kappa^_m(q_i ∘ 1_S, k_j ∘ 1_S) · exp((q_i ∘ 1_S̄)ᵀ(k_j ∘ 1_S̄) / sqrt(d))
// (Eq. 10; the method's own preprocessing applied to the masked vectors), causally
// normalised (Eq. 11). E_S and E_full are attention-output MSEs against softmax over
// heads, sampled query positions and output dims (Eq. 12–13), averaged over the method's
// random seeds; R_S = E_S / E_full per (layer, sequence), macro-averaged (Eq. 14).
// Gaussian control: q, k replaced by i.i.d. N(0, 1), subsets from the same grouping
// procedure (options.grouping, its --chi statistic included) on Gaussian data of the
// calibration shape — gaussian_prompts independent prompts of gaussian_prompt_len tokens,
// drawn apart from the evaluation samples — so the groups are not fitted to the data they
// are evaluated on (as the real groups come from calibration prompts). Matched randomization test:
// B subsets of |S_h| dims drawn uniformly from each head's bulk, p = (1 + #{R_control >= R_S}) / (B
// + 1) (Eq. 15). Methods use their initial parameters (TaylorShift tau = 1, DiJiang theta = 0,
// SpectraFormer's upstream init) with the draws of each seed; keys are expanded to the
// query heads because each head has its own subset.
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "oal/analysis/grouping.h"
#include "oal/attention/registry.h"
#include "oal/core/progress.h"

namespace oal::linearize {

// One layer: q [N, Hq, T, D], k, v [N, Hkv, T, D|Dv]; per query head its groups
// (groups[h][0] the bulk).
struct DiagnoseLayer {
  int64_t layer = 0;
  at::Tensor q, k, v;
  std::vector<std::vector<std::vector<int64_t>>> groups;
};

struct DiagnoseOptions {
  std::vector<std::string> methods = attn::method_names(attn::MethodKind::feature_map);
  int64_t positions = 32;                  // sampled causal query positions per (seq, layer)
  std::vector<uint64_t> seeds{0, 1, 2, 3, 4};  // draws of stochastic methods
  int64_t controls = 1000;                 // matched random bulk subsets B (0: skip test)
  bool gaussian = true;                    // Gaussian-control column
  analysis::GroupingOptions grouping;      // for the Gaussian control's grouping
  int64_t gaussian_prompts = 40;           // calibration prompts of the control's grouping
  int64_t gaussian_prompt_len = 0;         // their length (0: the evaluation length T)
  uint64_t seed = 0;                       // positions, controls, Gaussian samples
  ProgressFn progress;                     // ("methods")
};

struct DiagnoseRow {
  std::string method;
  double retained = 0;          // R_S (fraction, not %)
  double gaussian = 0;          // R_S of the Gaussian control (NaN when skipped)
  double p_value = 0;           // randomization test (NaN when skipped)
  int64_t exceed = 0;           // controls with R_control >= R_S
  int64_t controls = 0;
};

struct DiagnoseResult {
  std::vector<DiagnoseRow> rows;
  int64_t subset_dims = 0, total_dims = 0;  // Σ_h |S_h| and Σ_h d
};

DiagnoseResult diagnose(const std::vector<DiagnoseLayer>& layers, const DiagnoseOptions& options);

nlohmann::json diagnose_json(const DiagnoseResult& result);
std::string diagnose_table(const DiagnoseResult& result);

}  // namespace oal::linearize
