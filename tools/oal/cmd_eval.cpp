// `oal eval`: zero-shot multiple choice (PIQA, HellaSwag, ARC-Easy) as in App. F.3 on a
// local JSONL file, or synthetic passkey retrieval (`--task passkey`, no data file);
// plain and converted models alike.
#include <fmt/core.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "command.h"
#include "oal/core/error.h"
#include "oal/eval/continuation_logprob.h"
#include "oal/eval/multiple_choice.h"
#include "oal/eval/passkey.h"
#include "oal/formats/open_model.h"
#include "oal/text/tokenizer.h"
#include "progress_bar.h"

namespace {

struct EvalArgs {
  std::string model, task, data, tokenizer, norm;
  int64_t limit = 0;
  bool json = false, quiet = false;
  oal::eval::PasskeyOptions passkey;
};

void run_passkey(const EvalArgs& a) {
  using namespace oal::eval;
  const oal::formats::OpenedModel opened =
      oal::formats::open_model(a.model, {.tokenizer = a.tokenizer, .transformer = {}});
  const auto& tok = opened.tokenizer;
  const auto& model = opened.model;
  const int64_t longest = *std::max_element(a.passkey.lengths.begin(), a.passkey.lengths.end());
  const int64_t positions = model->config().max_position_embeddings;
  oal::check(positions <= 0 || longest <= positions, "eval",
             "--lengths up to {} exceed the model's {} positions", longest, positions);
  PasskeyTokenizeFn tokenize = [&](const std::string& s) {
    auto ids = tok->encode(s, false);
    return std::vector<int64_t>(ids.begin(), ids.end());
  };
  AnswerMatchFn matches = [&](const std::vector<int64_t>& c, const std::vector<int64_t>& x) {
    return continuation_is_greedy(*model, c, x);
  };
  oal::cli::ProgressBar bar("passkey", !a.quiet);
  const auto cells = oal::eval::run_passkey(a.passkey, tokenize, matches, bar.fn());
  bar.finish();
  if (a.json) {
    nlohmann::json j = {{"model", a.model},           {"task", "passkey"},
                        {"trials", a.passkey.trials}, {"digits", a.passkey.digits},
                        {"seed", a.passkey.seed},     {"cells", nlohmann::json::array()}};
    for (const auto& c : cells)
      j["cells"].push_back({{"length", c.length},
                            {"depth", c.depth},
                            {"tokens", c.tokens},
                            {"trials", c.trials},
                            {"correct", c.correct},
                            {"accuracy", c.accuracy()}});
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("passkey retrieval, {} trials per cell, {}-digit keys, seed {}\n", a.passkey.trials,
             a.passkey.digits, a.passkey.seed);
  fmt::print("{:>8} {:>6} {:>8} {:>9}\n", "length", "depth", "tokens", "accuracy");
  for (const auto& c : cells)
    fmt::print("{:>8} {:>6.2f} {:>8} {:>8.0f}%\n", c.length, c.depth, c.tokens, 100 * c.accuracy());
}

void run(const EvalArgs& a) {
  using namespace oal::eval;
  if (a.task == "passkey") return run_passkey(a);
  oal::check(!a.data.empty(), "eval", "--task {} needs --data FILE.jsonl", a.task);
  const McTask task = parse_mc_task(a.task);
  const LengthNorm norm = a.norm.empty() ? default_length_norm(task) : parse_length_norm(a.norm);
  const auto examples = load_mc_examples(task, a.data, a.limit);  // before the model loads
  const oal::formats::OpenedModel opened =
      oal::formats::open_model(a.model, {.tokenizer = a.tokenizer, .transformer = {}});
  const auto& tok = opened.tokenizer;
  const auto& model = opened.model;
  TokenizeFn tokenize = [&](const std::string& s) {
    auto ids = tok->encode(s, false);  // App. F.3: no BOS/EOS
    return std::vector<int64_t>(ids.begin(), ids.end());
  };
  ContinuationLogprobFn logprob = [&](const std::vector<int64_t>& c,
                                      const std::vector<int64_t>& x) {
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
  fmt::print("{} ({} examples, length normalisation by {})\n", mc_task_name(task), r.total,
             norm_name);
  fmt::print("acc      {:6.2f}%  ({}/{})\n", 100 * r.acc(), r.correct, r.total);
  fmt::print("acc_norm {:6.2f}%  ({}/{})\n", 100 * r.acc_norm(), r.correct_norm, r.total);
}

oal::cli::Registrar reg{
    "eval",
    "Zero-shot multiple choice (piqa, hellaswag, arc-e) from a local JSONL file, or passkey "
    "retrieval",
    [](CLI::App& app) {
      auto a = std::make_shared<EvalArgs>();
      app.add_option("--model", a->model,
                     "Model (HF dir, .gguf file, converted dir or llama2.c .bin)")
          ->required();
      app.add_option("--task", a->task, "piqa | hellaswag | arc-e | passkey")->required();
      app.add_option(
          "--data", a->data,
          "Multiple choice: JSONL in the dataset's public layout (PIQA: goal/sol1/sol2/label; "
          "HellaSwag: activity_label/ctx_a/ctx_b/endings/label; ARC: "
          "question{stem,choices}/answerKey); not used by passkey");
      app.add_option("--limit", a->limit, "Score only the first K examples (0 = all)");
      app.add_option("--norm", a->norm,
                     "acc_norm length unit: tokens | chars (default: tokens for piqa and "
                     "hellaswag, chars for arc-e, as in the paper)");
      app.add_option("--tokenizer", a->tokenizer, "Tokenizer file (default: beside the model)");
      app.add_option("--lengths", a->passkey.lengths, "passkey: prompt lengths in tokens")
          ->delimiter(',')->capture_default_str();
      app.add_option("--depths", a->passkey.depths, "passkey: relative needle depths in [0, 1]")
          ->delimiter(',')->capture_default_str();
      app.add_option("--trials", a->passkey.trials, "passkey: random keys per (length, depth)")
          ->capture_default_str();
      app.add_option("--digits", a->passkey.digits, "passkey: digits per key")
          ->capture_default_str();
      app.add_option("--seed", a->passkey.seed, "passkey: seed of the keys")->capture_default_str();
      app.add_flag("--quiet", a->quiet, "No progress bar");
      app.add_flag("--json", a->json, "Machine-readable output");
      return [a] { run(*a); };
    }};

}  // namespace
