#include "oal/analysis/analyze.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "oal/analysis/contribution.h"
#include "oal/analysis/gaussian_control.h"
#include "oal/analysis/layer_selection.h"
#include "oal/analysis/profile_stats.h"
#include "oal/core/error.h"

namespace oal::analysis {
namespace {

constexpr const char* k_op = "analyze";

std::vector<double> to_vector(const at::Tensor& t) {
  at::Tensor c = t.to(at::kDouble).contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

// Records per-prompt statistics of the chosen layers during forwards.
class Collector : public model::ForwardObserver {
 public:
  enum class Mode { calibration, heldout, prefix };
  explicit Collector(std::set<int64_t> layers) : layers_(std::move(layers)) {}
  Mode mode = Mode::calibration;

  bool wants(int64_t layer) const override { return layers_.count(layer) > 0; }
  void attention(int64_t layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor&,
                 const at::Tensor&) override {
    if (mode == Mode::calibration) {
      chi[layer].push_back(contribution_scores(q, k)[0]);
      magnitude[layer].push_back(contribution_magnitudes(q, k)[0]);
    } else if (mode == Mode::heldout) {
      heldout[layer].push_back(contribution_scores(q, k)[0]);
      heldout_magnitude[layer].push_back(contribution_magnitudes(q, k)[0]);
    } else {
      prefix[layer] = contribution_scores_by_prefix(q, k)[0];
      prefix_magnitude[layer] = contribution_magnitudes_by_prefix(q, k)[0];
    }
  }
  void layer_output(int64_t layer, const at::Tensor& x) override {
    if (mode == Mode::calibration) activation[layer].update(x);
  }

  // [Hq, D] each
  std::map<int64_t, std::vector<at::Tensor>> chi, magnitude, heldout, heldout_magnitude;
  std::map<int64_t, at::Tensor> prefix, prefix_magnitude;  // [Hq, T, D]
  std::map<int64_t, ActivationMax> activation;

 private:
  std::set<int64_t> layers_;
};

std::vector<int64_t> lengths_of(const std::vector<std::vector<int32_t>>& seqs) {
  std::vector<int64_t> n;
  for (const auto& s : seqs) n.push_back(static_cast<int64_t>(s.size()));
  return n;
}

void run_forward(const model::Transformer& model, const std::vector<int32_t>& ids,
                 Collector& collector) {
  std::vector<int64_t> wide(ids.begin(), ids.end());
  at::Tensor tokens = at::tensor(wide, at::kLong).view({1, -1});
  at::NoGradGuard no_grad;
  model.observe(tokens, collector);
}

// Prefix lengths n_full / 2^i >= min_prefix, ascending, ending at n_full.
std::vector<int64_t> prefix_lengths(int64_t n_full, int64_t min_prefix) {
  std::vector<int64_t> lengths;
  for (int64_t n = n_full; n >= std::max<int64_t>(2, min_prefix); n /= 2) lengths.push_back(n);
  if (lengths.empty()) lengths.push_back(n_full);
  std::reverse(lengths.begin(), lengths.end());
  return lengths;
}

// Prefix study of one head: signed / magnitude curves [T, D] → the statistic per length.
void fill_prefix(HeadAnalysis& h, const at::Tensor& signed_curve, const at::Tensor& mag_curve,
                 ChiStatistic stat, int64_t k, int64_t min_prefix) {
  const int64_t n_full = signed_curve.size(0);
  auto profile_at = [&](int64_t n) {
    return statistic_profile(stat, to_vector(signed_curve[n - 1]), to_vector(mag_curve[n - 1]));
  };
  const std::vector<double> full = profile_at(n_full);
  h.prefix_top_dims = top_k_dims(full, k);
  for (int64_t n : prefix_lengths(n_full, min_prefix)) {
    const std::vector<double> chi = profile_at(n);
    double total = 0.0;
    for (double v : chi) total += v;
    PrefixPoint p{n, {}, full.size() >= 2 ? spearman_rho(chi, full) : 0.0};
    for (int64_t r : h.prefix_top_dims)
      p.normalized_top.push_back(total != 0.0 ? 100.0 * chi[r] / total : 0.0);
    h.prefix.push_back(std::move(p));
  }
}

std::vector<std::vector<double>> rows_of(const at::Tensor& per_prompt) {
  std::vector<std::vector<double>> rows;
  for (int64_t p = 0; p < per_prompt.size(0); ++p) rows.push_back(to_vector(per_prompt[p]));
  return rows;
}

// Head `head` of a list of per-prompt [Hq, D] tensors → [P, D].
at::Tensor head_rows(const std::vector<at::Tensor>& per_prompt, int64_t head) {
  return at::stack(per_prompt, 0).select(1, head);
}

// The Gaussian control's profile of one head under the statistic: A for mean-abs and
// signed (whose share is taken of A), |χ| for abs-mean. gauss_mag, gauss_chi [Hq, D].
std::vector<double> gaussian_profile(ChiStatistic stat, const at::Tensor& gauss_mag,
                                     const at::Tensor& gauss_chi, int64_t head) {
  const std::vector<double> mag = to_vector(gauss_mag[head]);
  return stat == ChiStatistic::abs_mean
             ? statistic_profile(stat, to_vector(gauss_chi[head]), mag)
             : mag;
}

void fill_heldout(HeadAnalysis& h, const Collector& c, int64_t layer, ChiStatistic stat,
                  int64_t k) {
  auto it = c.heldout.find(layer);
  if (it == c.heldout.end() || it->second.empty()) return;
  h.chi_heldout = to_vector(head_rows(it->second, h.head).mean(0));
  h.magnitude_heldout = to_vector(head_rows(c.heldout_magnitude.at(layer), h.head).mean(0));
  const std::vector<double> held = statistic_profile(stat, h.chi_heldout, h.magnitude_heldout);
  h.heldout_spearman = h.score.size() >= 2 ? spearman_rho(h.score, held) : 0.0;
  h.heldout_top_overlap = top_k_overlap(h.score, held, k);
}

struct GaussianControl {
  at::Tensor magnitude, chi;  // [Hq, D] each
};

HeadAnalysis analyze_head(int64_t head, int64_t group, const Collector& c, int64_t layer,
                          const GaussianControl& gauss, const AnalyzeOptions& o, int64_t k) {
  HeadAnalysis h;
  h.head = head;
  h.kv_head = head / group;
  const at::Tensor signed_rows = head_rows(c.chi.at(layer), head);     // [P, D]
  const at::Tensor mag_rows = head_rows(c.magnitude.at(layer), head);  // [P, D]
  h.chi_per_prompt = rows_of(signed_rows);
  h.magnitude_per_prompt = rows_of(mag_rows);
  h.chi = to_vector(signed_rows.mean(0));
  h.magnitude = to_vector(mag_rows.mean(0));
  h.score = statistic_profile(o.chi, h.chi, h.magnitude);
  h.order = ascending_order(h.score);
  h.top_dims = top_k_dims(h.score, k);
  const std::vector<double>& share_base = chi_is_magnitude(o.chi) ? h.score : h.magnitude;
  h.top_share = top_k_share(share_base, k);
  const std::vector<double> g = gaussian_profile(o.chi, gauss.magnitude, gauss.chi, head);
  h.gaussian_top_share = top_k_share(g, k);
  h.gaussian_real_coords_share = share_of(g, top_k_dims(share_base, k));
  fill_heldout(h, c, layer, o.chi, k);
  if (auto it = c.prefix.find(layer); it != c.prefix.end())
    fill_prefix(h, it->second.select(0, head), c.prefix_magnitude.at(layer).select(0, head), o.chi,
                k, o.min_prefix);
  return h;
}

}  // namespace

const LayerAnalysis& AnalysisResult::layer(int64_t index) const {
  for (const auto& l : layers)
    if (l.layer == index) return l;
  fail(k_op, "layer {} was not analysed", index);
}

PromptSet make_prompt_set(const std::vector<std::string>& paragraphs,
                          const text::Tokenizer& tokenizer, const PromptOptions& o) {
  check(o.calibration >= 2, k_op,
        "--prompts {}: expected at least 2 calibration prompts (the bootstrap resamples them)",
        o.calibration);
  check(o.heldout_fraction >= 0.0 && o.heldout_fraction <= 1.0, k_op,
        "--heldout-fraction {}: expected a value in [0, 1]", o.heldout_fraction);
  check(o.ctx >= 2, k_op, "--ctx {}: expected at least 2 tokens", o.ctx);
  check(!paragraphs.empty(), k_op,
        "the text has no paragraphs; expected blank-line separated prompts");
  const auto heldout =
      static_cast<int64_t>(std::llround(o.heldout_fraction * static_cast<double>(o.calibration)));
  const int64_t need = o.calibration + heldout;
  check(static_cast<int64_t>(paragraphs.size()) >= need, k_op,
        "the text has {} paragraphs; expected at least {} ({} calibration + {} held-out)",
        paragraphs.size(), need, o.calibration, heldout);
  PromptSet set;
  auto encode = [&](const std::string& p) {
    std::vector<int32_t> ids = tokenizer.encode(p, true);
    if (static_cast<int64_t>(ids.size()) > o.ctx) ids.resize(static_cast<size_t>(o.ctx));
    return ids;
  };
  for (int64_t i = 0; i < need; ++i)
    (i < o.calibration ? set.calibration : set.heldout).push_back(encode(paragraphs[i]));
  if (tokenizer.bos_id() >= 0) set.prefix_sequence.push_back(tokenizer.bos_id());
  for (size_t i = 0;
       i < paragraphs.size() && static_cast<int64_t>(set.prefix_sequence.size()) < o.ctx; ++i) {
    std::vector<int32_t> ids = tokenizer.encode(paragraphs[i], false);
    set.prefix_sequence.insert(set.prefix_sequence.end(), ids.begin(), ids.end());
  }
  if (static_cast<int64_t>(set.prefix_sequence.size()) > o.ctx)
    set.prefix_sequence.resize(static_cast<size_t>(o.ctx));
  return set;
}

std::vector<std::string> paragraphs_after_tokens(const std::vector<std::string>& paragraphs,
                                                 const text::Tokenizer& tokenizer,
                                                 int64_t stream_tokens) {
  check(stream_tokens >= 0, k_op, "stream tokens {}: expected >= 0", stream_tokens);
  size_t first = 0;
  for (int64_t covered = 0; first < paragraphs.size() && covered < stream_tokens; ++first)
    covered += static_cast<int64_t>(tokenizer.encode(paragraphs[first], false).size());
  if (stream_tokens > 0) ++first;  // margin: the paragraph that may straddle the boundary
  check(first < paragraphs.size(), k_op,
        "the text's {} paragraphs all lie within the first {} tokens (the fitting and "
        "evaluation blocks); expected grouping prompts after them: use a longer text or a "
        "separate prompt file",
        paragraphs.size(), stream_tokens);
  return {paragraphs.begin() + static_cast<std::ptrdiff_t>(first), paragraphs.end()};
}

AnalysisResult analyze_model(const model::Transformer& model, const PromptSet& prompts,
                             const AnalyzeOptions& o) {
  const model::ModelConfig& cfg = model.config();
  check(prompts.calibration.size() >= 2, k_op,
        "{} calibration prompts; expected at least 2 for the prompt-level bootstrap",
        prompts.calibration.size());
  check(o.top_k >= 1, k_op, "top-k {}: expected >= 1", o.top_k);
  const std::vector<int64_t> chosen = oal::analysis::resolve_layers(o.layers, model.num_layers());
  const std::set<int64_t> layers(chosen.begin(), chosen.end());
  auto check_len = [&](const std::vector<int32_t>& s, const char* what) {
    check(!s.empty(), k_op, "a {} prompt has no tokens", what);
    check(cfg.max_position_embeddings <= 0 ||
              static_cast<int64_t>(s.size()) <= cfg.max_position_embeddings,
          k_op, "a {} prompt has {} tokens; the model's context is {} (lower --ctx)", what,
          s.size(), cfg.max_position_embeddings);
  };
  for (const auto& s : prompts.calibration) check_len(s, "calibration");
  for (const auto& s : prompts.heldout) check_len(s, "held-out");
  if (!prompts.prefix_sequence.empty()) check_len(prompts.prefix_sequence, "prefix");

  Collector c(layers);
  const auto total = static_cast<int64_t>(prompts.calibration.size() + prompts.heldout.size() +
                                          (prompts.prefix_sequence.empty() ? 0 : 1));
  int64_t done = 0;
  auto run_all = [&](const std::vector<std::vector<int32_t>>& seqs, Collector::Mode mode) {
    c.mode = mode;
    for (const auto& s : seqs) {
      run_forward(model, s, c);
      report(o.progress, ++done, total, "prompts");
    }
  };
  run_all(prompts.calibration, Collector::Mode::calibration);
  run_all(prompts.heldout, Collector::Mode::heldout);
  if (!prompts.prefix_sequence.empty()) run_all({prompts.prefix_sequence}, Collector::Mode::prefix);

  AnalysisResult r;
  r.num_layers = cfg.num_layers;
  r.num_heads = cfg.num_heads;
  r.num_kv_heads = cfg.num_kv_heads;
  r.head_dim = cfg.head_dim;
  r.hidden_size = cfg.hidden_size;
  r.top_k = std::min(o.top_k, cfg.head_dim);
  r.seed = o.seed;
  r.chi = o.chi;
  r.calibration_lengths = lengths_of(prompts.calibration);
  r.heldout_lengths = lengths_of(prompts.heldout);
  r.ctx = static_cast<int64_t>(prompts.prefix_sequence.size());
  const int64_t group = cfg.num_heads / cfg.num_kv_heads;
  for (int64_t l : layers) {
    check(c.chi.count(l) > 0, k_op, "layer {}: the forward reported no attention tensors", l);
    LayerAnalysis la;
    la.layer = l;
    GaussianControl gauss;
    gauss.magnitude = gaussian_control_magnitudes(r.calibration_lengths, cfg.num_heads,
                                                  cfg.num_kv_heads, cfg.head_dim,
                                                  mix_seed(o.seed, static_cast<uint64_t>(l)),
                                                  &gauss.chi);
    for (int64_t h = 0; h < cfg.num_heads; ++h)
      la.heads.push_back(analyze_head(h, group, c, l, gauss, o, r.top_k));
    if (c.activation.count(l)) la.activation = summarize_activations(c.activation.at(l).max_abs());
    r.layers.push_back(std::move(la));
  }
  return r;
}

}  // namespace oal::analysis
