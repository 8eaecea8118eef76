// `oal eval`: zero-shot multiple choice (PIQA, HellaSwag, ARC-Easy) as in App. F.3 on a
// local JSONL file; plain and converted models alike.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "oal/eval/continuation_logprob.h"
#include "oal/eval/multiple_choice.h"
#include "oal/model/find_tokenizer.h"
#include "oal/text/tokenizer.h"
#include "oal/convert/convert.h"
#include "progress_bar.h"

namespace {

struct EvalArgs {
  std::string model, task, data, tokenizer, norm;
  int64_t limit = 0;
  bool json = false, quiet = false;
};

void run(const EvalArgs& a) {
  using namespace oal::eval;
  const McTask task = parse_mc_task(a.task);
  const LengthNorm norm = a.norm.empty() ? default_length_norm(task) : parse_length_norm(a.norm);
  const auto examples = load_mc_examples(task, a.data, a.limit);  // before the model loads
  auto tok = oal::text::load_tokenizer(oal::model::find_tokenizer(a.model, a.tokenizer));
  auto model = oal::convert::load_transformer(a.model);
  TokenizeFn tokenize = [&](const std::string& s) {
    auto ids = tok->encode(s, false);  // App. F.3: no BOS/EOS
    return std::vector<int64_t>(ids.begin(), ids.end());
  };
  ContinuationLogprobFn logprob = [&](const std::vector<int64_t>& c, const std::vector<int64_t>& x) {
    return continuation_logprob(*model, c, x);
  };
  oal::cli::ProgressBar bar("eval", !a.quiet);
  const McResult r = score_multiple_choice(task, norm, examples, tokenize, logprob,
                                           model->config().max_position_embeddings, bar.fn());
  bar.finish();
  const char* norm_name = norm == LengthNorm::tokens ? "tokens" : "chars";
  if (a.json) {
    nlohmann::json j = {{"model", a.model},        {"task", mc_task_name(task)},
                        {"data", a.data},          {"examples", r.total},
                        {"correct", r.correct},    {"correct_norm", r.correct_norm},
                        {"acc", r.acc()},          {"acc_norm", r.acc_norm()},
                        {"length_norm", norm_name}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("{} ({} examples, length normalisation by {})\n", mc_task_name(task), r.total, norm_name);
  fmt::print("acc      {:6.2f}%  ({}/{})\n", 100 * r.acc(), r.correct, r.total);
  fmt::print("acc_norm {:6.2f}%  ({}/{})\n", 100 * r.acc_norm(), r.correct_norm, r.total);
}

oal::cli::Registrar reg{
    "eval", "Zero-shot multiple choice (piqa, hellaswag, arc-e) from a local JSONL file",
    [](CLI::App& app) {
      auto a = std::make_shared<EvalArgs>();
      app.add_option("--model", a->model, "Model (HF dir, converted dir or llama2.c .bin)")->required();
      app.add_option("--task", a->task, "piqa | hellaswag | arc-e")->required();
      app.add_option("--data", a->data,
                     "JSONL in the dataset's public layout (PIQA: goal/sol1/sol2/label; "
                     "HellaSwag: activity_label/ctx_a/ctx_b/endings/label; ARC: "
                     "question{stem,choices}/answerKey)")
          ->required();
      app.add_option("--limit", a->limit, "Score only the first K examples (0 = all)");
      app.add_option("--norm", a->norm,
                     "acc_norm length unit: tokens | chars (default: tokens for piqa and "
                     "hellaswag, chars for arc-e, as in the paper)");
      app.add_option("--tokenizer", a->tokenizer, "Tokenizer file (default: beside the model)");
      app.add_flag("--quiet", a->quiet, "No progress bar");
      app.add_flag("--json", a->json, "Machine-readable output");
      return [a] { run(*a); };
    }};

}  // namespace
