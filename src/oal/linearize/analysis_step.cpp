#include "oal/linearize/analysis_step.h"

namespace oal::linearize {

analysis::AnalysisResult analyze_step(const model::Transformer& model,
                                      const text::Tokenizer& tokenizer,
                                      const std::vector<std::string>& paragraphs,
                                      const AnalysisStepOptions& options,
                                      const ProgressFn& progress) {
  const analysis::PromptSet prompts =
      analysis::make_prompt_set(paragraphs, tokenizer, options.prompts);
  analysis::AnalyzeOptions ao = options.analyze;
  ao.progress = progress;
  analysis::AnalysisResult r = analysis::analyze_model(model, prompts, ao);
  r.model = options.model_name;
  return r;
}

AnalysisAndGroups analyze_and_group(const model::Transformer& model,
                                    const text::Tokenizer& tokenizer,
                                    const std::vector<std::string>& paragraphs,
                                    const AnalysisStepOptions& options,
                                    const analysis::GroupingOptions& grouping,
                                    const ProgressFn& analyze_progress,
                                    const ProgressFn& group_progress) {
  analysis::validate(grouping);
  AnalysisAndGroups out;
  out.analysis = analyze_step(model, tokenizer, paragraphs, options, analyze_progress);
  out.grouped = analysis::group_analysis(out.analysis, grouping, 0, group_progress);
  return out;
}

}  // namespace oal::linearize
