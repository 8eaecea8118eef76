#pragma once
// The pipeline's first two steps, as `oal analyze` and `oal linearize` (pipeline.h) run
// them: contribution analysis of a model on grouping prompts (paper §3, App. A), then
// the dimension groups every analysed head gets (§4.2).
#include <string>
#include <vector>

#include "oal/analysis/analyze.h"
#include "oal/analysis/grouping.h"
#include "oal/analysis/layer_groups.h"
#include "oal/core/progress.h"
#include "oal/model/transformer.h"
#include "oal/text/tokenizer.h"

namespace oal::linearize {

struct AnalysisStepOptions {
  std::string model_name;            // recorded in the result (AnalysisResult::model)
  analysis::PromptOptions prompts;   // K calibration prompts, held-out fraction, ctx
  analysis::AnalyzeOptions analyze;  // layers, top-k, seed, statistic (progress: unused)
};

// Contribution analysis on the prompts made from `paragraphs` (grouping prompts, e.g.
// Splits::grouping_paragraphs). Throws oal::Error("[analyze] ...") as make_prompt_set
// and analyze_model do.
analysis::AnalysisResult analyze_step(const model::Transformer& model,
                                      const text::Tokenizer& tokenizer,
                                      const std::vector<std::string>& paragraphs,
                                      const AnalysisStepOptions& options,
                                      const ProgressFn& progress = {});

struct AnalysisAndGroups {
  analysis::AnalysisResult analysis;
  std::vector<analysis::LayerGroups> grouped;  // one per analysed layer, in its order
};

// analyze_step, then analysis::group_analysis with `grouping` (validated first, before
// any forward pass).
AnalysisAndGroups analyze_and_group(const model::Transformer& model,
                                    const text::Tokenizer& tokenizer,
                                    const std::vector<std::string>& paragraphs,
                                    const AnalysisStepOptions& options,
                                    const analysis::GroupingOptions& grouping,
                                    const ProgressFn& analyze_progress = {},
                                    const ProgressFn& group_progress = {});

}  // namespace oal::linearize
