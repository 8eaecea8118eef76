#pragma once
// The heterogeneity analysis of a model (paper §3, App. A): per layer and query head,
// contribution scores χ (Eq. 2) on calibration prompts, top-k contribution share vs an
// isotropic Gaussian control (Fig. 5), stability on held-out prompts (Fig. 6) and across
// prefix lengths (Table 4); per layer, the residual-stream activation profile (Fig. 7).
//
// The contribution statistic (chi_statistic.h; default mean-abs) drives the ordering, top
// dims, shares, held-out and prefix stability and the Gaussian control. The signed χ and
// the magnitudes A are both kept so that `oal group` can regroup with any statistic.
//
// Top-k share: of the statistic's profile when it is non-negative (mean-abs, abs-mean):
//   top_share = Σ_{r in top-k} score_r / Σ_r score_r.
// Under the isotropic Gaussian control every A_r has the same expectation, so the
// mean-abs share is ≈ k/d (7.8% for k = 5, d = 64 — the value the paper's Fig. 5 shows
// for its controls); concentrated heads score far above it. With --chi signed the
// profile is not a fraction, and the share is taken of A (as before --chi existed).
// "gaussian_real_coords_share" is the control's share on the real head's top-k
// coordinates (Fig. 5's third bar).
#include <cstdint>
#include <string>
#include <vector>

#include "oal/analysis/activation_profile.h"
#include "oal/analysis/chi_statistic.h"
#include "oal/core/progress.h"
#include "oal/model/transformer.h"
#include "oal/text/tokenizer.h"

namespace oal::analysis {

// Token sequences the analysis runs on.
struct PromptSet {
  std::vector<std::vector<int32_t>> calibration;  // grouping statistics (paper: 40)
  std::vector<std::vector<int32_t>> heldout;      // stability check (may be empty)
  std::vector<int32_t> prefix_sequence;           // one long sequence for Table 4
};

struct PromptOptions {
  int64_t calibration = 40;        // K calibration prompts (>= 2 for the bootstrap)
  double heldout_fraction = 0.5;   // held-out prompts = round(F K), taken after them
  int64_t ctx = 256;               // max tokens per prompt and prefix-sequence length
};

// Paragraphs 0..K-1 → calibration, the next round(F K) → held-out; each encoded with
// BOS and cut to ctx tokens. The prefix sequence is BOS + the paragraphs' tokens
// (encoded without BOS) concatenated, cut to ctx. Throws oal::Error("[analyze] ...")
// for no paragraphs, fewer paragraphs than needed, K < 2, F outside [0, 1], ctx < 2.
PromptSet make_prompt_set(const std::vector<std::string>& paragraphs,
                          const text::Tokenizer& tokenizer, const PromptOptions& options);

// Grouping prompts disjoint from the fitting and evaluation blocks (paper: a separate
// prompt set). When prompts and blocks come from one text, the blocks are the first
// `stream_tokens` tokens of its stream; this returns the paragraphs that start after
// them. Each paragraph is counted as its own encoding (no BOS) — which lacks the blank-line
// separators the stream has, so the count runs behind the stream position and the cut
// is conservative — and one more paragraph is skipped as a margin. Throws
// oal::Error("[analyze] ...") when no paragraph is left.
std::vector<std::string> paragraphs_after_tokens(const std::vector<std::string>& paragraphs,
                                                 const text::Tokenizer& tokenizer,
                                                 int64_t stream_tokens);

struct AnalyzeOptions {
  std::vector<int64_t> layers;  // layers to analyse (empty: all)
  int64_t top_k = 5;            // k of the top-k statistics (clamped to d)
  int64_t min_prefix = 16;      // shortest prefix length in the prefix study
  uint64_t seed = 0;            // Gaussian-control seed
  ChiStatistic chi = ChiStatistic::mean_abs;  // the statistic of order / top dims / shares
  ProgressFn progress;          // ("prompts") per forward
};

struct PrefixPoint {
  int64_t length = 0;
  std::vector<double> normalized_top;  // score_r / Σ_t score_t (%), full-length top-k dims
  double spearman = 0.0;               // Spearman ρ of score at this length vs full length
};

struct HeadAnalysis {
  int64_t head = 0, kv_head = 0;
  std::vector<double> chi;                          // [d] signed calibration mean (Eq. 2)
  std::vector<std::vector<double>> chi_per_prompt;  // [P][d] signed (bootstrap input)
  std::vector<double> magnitude;                    // [d] A_r
  std::vector<std::vector<double>> magnitude_per_prompt;  // [P][d] (empty in old files)
  std::vector<double> score;                        // [d] profile of the chosen statistic
  std::vector<int64_t> order;                       // ascending stable order of score
  std::vector<int64_t> top_dims;                    // top-k of score, largest first
  double top_share = 0.0;                           // top-k share (see above)
  double gaussian_top_share = 0.0;                  // same statistic, Gaussian control
  double gaussian_real_coords_share = 0.0;          // control's share on real top-k of A
  std::vector<double> chi_heldout;                  // [d] held-out signed mean (empty if none)
  std::vector<double> magnitude_heldout;            // [d] held-out A (empty if none / old)
  double heldout_spearman = 0.0;
  int64_t heldout_top_overlap = 0;                  // |top-k(cal) ∩ top-k(held-out)|
  std::vector<int64_t> prefix_top_dims;             // top-k of score on the full prefix sequence
  std::vector<PrefixPoint> prefix;                  // ascending lengths
};

struct LayerAnalysis {
  int64_t layer = 0;
  std::vector<HeadAnalysis> heads;
  ActivationSummary activation;  // residual stream after this layer
};

struct AnalysisResult {
  std::string model;  // path or name, informational
  int64_t num_layers = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0, hidden_size = 0;
  int64_t top_k = 5, ctx = 0;
  uint64_t seed = 0;
  ChiStatistic chi = ChiStatistic::mean_abs;  // a file without "chi_statistic" means signed
  std::vector<int64_t> calibration_lengths, heldout_lengths;
  std::vector<LayerAnalysis> layers;  // ascending layer index
  const LayerAnalysis& layer(int64_t index) const;  // throws when not analysed
};

// Runs the model over every prompt (one forward each, no grad) and computes the report.
// Throws oal::Error("[analyze] ...") for an unknown or repeated layer, an empty prompt
// set or prompts longer than the model's context.
AnalysisResult analyze_model(const model::Transformer& model, const PromptSet& prompts,
                             const AnalyzeOptions& options);

}  // namespace oal::analysis
