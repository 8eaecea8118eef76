#include "oal/demo/demo_smollm2.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <filesystem>

#include "oal/adapt/hybrid.h"
#include "oal/attention/method_names.h"
#include "oal/attention/registry.h"
#include "oal/demo/demo_fidelity.h"
#include "oal/formats/load.h"
#include "oal/generate/generate.h"
#include "oal/linearize/pipeline.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"

namespace oal::demo {
namespace {

// A small split of the text's first blocks: eval 0-1, train 2-3, val 4.
calib::BlockSplit small_split() {
  calib::BlockSplit s;
  s.eval = {0, 1};
  s.train = {2, 3};
  s.val = {4};
  return s;
}

std::string continuation(const model::Transformer& m, const text::Tokenizer& tok,
                         const SmolLM2DemoOptions& o) {
  generate::GenerateOptions g;
  g.max_new_tokens = o.new_tokens;
  const auto r = generate::generate(m, tok.encode(o.prompt, true), g);
  return tok.decode(r.tokens);
}

// "22 50 54 53 40 (31%)": a head's top-5 dimensions and their share of the profile.
std::string top_dims(const analysis::AnalysisResult& a, int64_t head) {
  for (const auto& l : a.layers)
    for (const auto& h : l.heads)
      if (h.head == head)
        return fmt::format("{} ({:.0f}%)", fmt::join(h.top_dims, " "), 100 * h.top_share);
  return "-";
}

}  // namespace

DemoSection smollm2_demo(const SmolLM2DemoOptions& o, const ProgressFn& progress) {
  const model::ModelWeights weights = formats::load_model(o.model);
  const auto tok = text::load_tokenizer(o.model);
  const std::string text = text::read_text_file(o.text);
  const std::vector<int32_t> stream = tok->encode(text, false);
  const model::Transformer original(weights);
  const linearize::Splits splits =
      linearize::make_splits(text, *tok, o.ctx, small_split(), std::nullopt);
  linearize::PipelineOptions po;
  po.model_name = o.model;
  po.text_name = o.text;
  po.layers = {o.layer};
  po.prompts = o.prompts;
  po.calibration.methods = attn::method_names(attn::Window{});
  po.calibration.fit = calib::FitSettings::short_run(o.max_updates);
  po.calibration.seed = o.seed;
  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("oal_demo_smollm2_{}", ::getpid());
  const linearize::PipelineResult r = linearize::run_pipeline(original, stream, *tok, splits, po,
                                                              dir, {{}, {}, {}, progress, {}, {}});
  std::filesystem::remove_all(dir);
  model::Transformer hybrid(weights);
  adapt::apply_hybrid(hybrid, {{o.layer, r.calibration.layers.at(0).methods.at(attn::names::oal)}});

  DemoSection s;
  s.title = "A real model: SmolLM2-135M (GGUF Q4_1, head_dim 64)";
  s.notes = {
      fmt::format("model {} ({} layers, {} query / {} KV heads of {}), text {}", o.model,
                  weights.config.num_layers, weights.config.num_heads, weights.config.num_kv_heads,
                  weights.config.head_dim, o.text),
      fmt::format("layer {}: outlier dimensions of its heads (top-5 by χ and their share of the "
                  "profile; 5/64 = 8% if all were equal): {}",
                  o.layer,
                  fmt::format("head 0: {}, head 4: {}, head 8: {}", top_dims(r.analysis, 0),
                              top_dims(r.analysis, 4), top_dims(r.analysis, 8))),
      fmt::format(
          "groups from {} prompts ({}); fits of at most {} updates on blocks 2-3 of {} tokens, "
          "fidelity on blocks 0-1 (the full protocol: `oal linearize`, docs/results.md)",
          o.prompts, splits.grouping_source, o.max_updates, o.ctx),
      fmt::format("greedy continuation of \"{}\"", o.prompt),
      fmt::format("  original:           {}", continuation(original, *tok, o)),
      fmt::format("  layer {} as OAL:    {}", o.layer, continuation(hybrid, *tok, o)),
  };
  put_fidelity_table(r.fidelity, s);
  return s;
}

}  // namespace oal::demo
