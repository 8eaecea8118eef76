#include "oal/demo/demo_fidelity.h"

#include <fmt/format.h>

#include "oal/analysis/chi_statistic.h"
#include "oal/analysis/contribution.h"
#include "oal/analysis/grouping.h"
#include "oal/analysis/layer_selection.h"
#include "oal/attention/registry.h"
#include "oal/calib/calibrate_model.h"
#include "oal/calib/layer_data.h"
#include "oal/formats/find_tokenizer.h"
#include "oal/formats/load.h"
#include "oal/linearize/fidelity_run.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"

namespace oal::demo {
namespace {

// Fixed-budget groups on the training blocks (the quick variant of App. B), ordered by
// the default contribution statistic (mean-abs, chi_statistic.h), each block one prompt.
attn::ModelKernels budget_groups(const model::Transformer& m, const at::Tensor& tokens,
                                 int64_t budget, analysis::ChiStatistic chi) {
  attn::ModelKernels out;
  auto caps = calib::capture_qkv(m, tokens, analysis::resolve_layers({}, m.num_layers()));
  for (const auto& [l, c] : caps) {
    const at::Tensor signed_rows = analysis::contribution_scores(c.q, c.k);  // [B, Hq, D]
    const at::Tensor mag_rows = analysis::contribution_magnitudes(c.q, c.k);  // [B, Hq, D]
    std::vector<attn::QuadraticKernel> heads;
    for (int64_t h = 0; h < signed_rows.size(1); ++h) {
      const at::Tensor rows =  // [B, D], one head
          analysis::statistic_rows(chi, signed_rows.select(1, h), mag_rows.select(1, h));
      const std::vector<double> v = analysis::profile_of_rows(chi, rows);
      heads.push_back(
          attn::QuadraticKernel::taylor(analysis::group_fixed_budget(v, budget).groups));
    }
    out.layers[l] = heads;
    out.head_dim = signed_rows.size(2);
  }
  return out;
}

}  // namespace

void put_fidelity_table(const linearize::FidelityResult& f, DemoSection& s) {
  s.columns = {"method", "MSE before Wo", "RelMSE before Wo", "MSE after Wo", "RelMSE after Wo"};
  s.data = linearize::fidelity_json(f);
  for (const auto& row : f.rows)
    s.rows.push_back({row.method, fmt::format("{:.4g}", row.all.mse_before_wo),
                      fmt::format("{:.4g}", row.all.relmse_before_wo),
                      fmt::format("{:.4g}", row.all.mse_after_wo),
                      fmt::format("{:.4g}", row.all.relmse_after_wo)});
}

DemoSection fidelity_demo(const FidelityDemoOptions& o, const ProgressFn& progress) {
  auto tok = formats::open_tokenizer(o.model, o.tokenizer);
  const std::vector<int32_t> stream = tok->encode(text::read_text_file(o.text), false);
  const model::Transformer m(formats::load_model(o.model));
  calib::ModelCalibrationOptions co;
  co.ctx = o.ctx;
  co.calibration.methods = attn::method_names(attn::Window{});
  co.calibration.fit = calib::FitSettings::short_run(o.max_updates);
  co.calibration.seed = o.seed;
  co.calibration.progress = progress;
  const calib::SplitBlocks blocks = calib::split_blocks(stream, o.ctx, co.split);
  const analysis::ChiStatistic chi = analysis::GroupingOptions{}.chi;
  const attn::ModelKernels groups = budget_groups(m, blocks.train, o.group_budget, chi);
  const calib::CalibrationResult r = calib::calibrate_model(m, stream, &groups, co);
  const linearize::FidelityResult f =
      linearize::evaluate_run(m, stream, o.ctx, co.split, r.layers, {}, {});
  DemoSection s;
  s.title = "Frozen-attention fidelity (Table 2 layout)";
  s.notes = {fmt::format("model {}, text {}, {} held-out blocks of {} tokens, all layers", o.model,
                         o.text, f.sequences, f.tokens_per_sequence),
             fmt::format("groups: fixed budget G = {} per head on the {} statistic of the "
                         "training blocks; fits: at most {} updates (`oal linearize` uses the "
                         "full App. B protocol)",
                         o.group_budget, analysis::chi_statistic_name(chi), o.max_updates)};
  put_fidelity_table(f, s);
  return s;
}

}  // namespace oal::demo
