#pragma once
// Zero-shot multiple-choice evaluation as in the paper's App. F.3 (the lm-eval-harness
// protocol): each candidate answer, prefixed with a space, is scored by its conditional
// log-likelihood given the task's prompt; only the candidate's tokens are scored (the
// prompt is context). Two rankings are reported:
//   acc       argmax of the summed log-likelihood,
//   acc_norm  argmax of the log-likelihood divided by the candidate's length, counted in
//             tokens (PIQA, HellaSwag) or in characters of the option text without the
//             added space (ARC-Easy).
// Data are local JSONL files in the datasets' public field layouts:
//   PIQA       {"goal", "sol1", "sol2", "label"}                       (label 0/1)
//   HellaSwag  {"activity_label", "ctx_a", "ctx_b", "endings", "label"} (label "0".."3")
//   ARC-Easy   {"question": {"stem", "choices": [{"text","label"}]}, "answerKey"}
// Prompts: PIQA and ARC-E "Question: {question}\nAnswer:"; HellaSwag
// preprocess(activity_label + ": " + ctx_a + " " + capitalize(ctx_b)).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "oal/core/progress.h"

namespace oal::eval {

enum class McTask { piqa, hellaswag, arc_easy };
// How acc_norm divides the log-likelihood.
enum class LengthNorm { tokens, chars };

// "piqa" | "hellaswag" | "arc-e" (also "arc_easy", "arc-easy").
McTask parse_mc_task(std::string_view name);
std::string mc_task_name(McTask task);
// The paper's choice: tokens for PIQA and HellaSwag, characters for ARC-Easy.
LengthNorm default_length_norm(McTask task);
// "tokens" | "chars".
LengthNorm parse_length_norm(std::string_view name);

// One question: the prompt (context), the candidate texts without the leading space,
// and the index of the correct candidate.
struct McExample {
  std::string context;
  std::vector<std::string> choices;
  int64_t label = 0;
};

// HellaSwag text cleanup (lm-eval-harness): strip, " [title]" -> ". ", remove
// "[...]" spans (non-greedy, not across newlines), then one pass of "  " -> " ".
std::string hellaswag_preprocess(std::string_view text);
// Python str.capitalize() on ASCII letters: first character upper-cased, the rest
// lower-cased (bytes >= 0x80 are left as they are).
std::string python_capitalize(std::string_view text);

// Parses one JSON line of `task` into an example. Throws oal::Error("[mc_data] ...")
// naming the missing/invalid field.
McExample parse_mc_line(McTask task, std::string_view json_line);
// Reads a JSONL file (blank lines skipped); `limit` > 0 keeps the first `limit`
// examples. Errors name the file and the 1-based line.
std::vector<McExample> load_mc_examples(McTask task, const std::filesystem::path& path,
                                        int64_t limit = 0);

// Text -> token ids (no BOS/EOS added; App. F.3).
using TokenizeFn = std::function<std::vector<int64_t>(const std::string&)>;
// Sum over the continuation of log p(cont[i] | context, cont[:i]) (natural log).
// context is non-empty.
using ContinuationLogprobFn =
    std::function<double(const std::vector<int64_t>& context, const std::vector<int64_t>& cont)>;

// The scored token split of one candidate: tokens(context + " " + choice) cut after the
// first len(tokens(context)) tokens (lm-eval-harness), the context left-truncated so
// context + continuation fits `max_tokens` (0 = no limit).
struct CandidateTokens {
  std::vector<int64_t> context;
  std::vector<int64_t> continuation;
};
CandidateTokens split_candidate(const TokenizeFn& tokenize, const std::string& context,
                                const std::string& choice, int64_t max_tokens);

struct McChoiceScore {
  double logprob = 0;     // summed over candidate tokens
  int64_t tokens = 0;     // candidate token count
  int64_t chars = 0;      // Unicode code points of the option text (no added space)
  double normalized = 0;  // logprob / tokens or logprob / chars
};

struct McExampleResult {
  std::vector<McChoiceScore> choices;
  int64_t label = 0;
  int64_t pred = 0;       // argmax logprob (first on ties)
  int64_t pred_norm = 0;  // argmax normalized
};

struct McResult {
  McTask task = McTask::piqa;
  LengthNorm norm = LengthNorm::tokens;
  int64_t total = 0;
  int64_t correct = 0;
  int64_t correct_norm = 0;
  std::vector<McExampleResult> examples;
  double acc() const { return total ? double(correct) / double(total) : 0.0; }
  double acc_norm() const { return total ? double(correct_norm) / double(total) : 0.0; }
};

// Scores one example from per-choice scores (pure ranking logic).
McExampleResult rank_choices(std::vector<McChoiceScore> choices, int64_t label, LengthNorm norm);

// Scores every example. Progress unit: "examples".
McResult score_multiple_choice(McTask task, LengthNorm norm,
                               const std::vector<McExample>& examples,
                               const TokenizeFn& tokenize,
                               const ContinuationLogprobFn& logprob, int64_t max_tokens,
                               const ProgressFn& progress = {});

}  // namespace oal::eval
