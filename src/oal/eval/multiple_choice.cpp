#include "oal/eval/multiple_choice.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <fstream>

#include "oal/core/error.h"
#include "oal/io/json_file.h"

namespace oal::eval {
namespace {

constexpr const char* k_op = "mc_data";

int64_t utf8_code_points(std::string_view s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

const nlohmann::json& field(const nlohmann::json& j, const char* name) {
  check(j.is_object() && j.contains(name), k_op, "expected field '{}' in {}", name,
        j.dump().substr(0, 120));
  return j.at(name);
}

std::string text_field(const nlohmann::json& j, const char* name) {
  const auto& f = field(j, name);
  check(f.is_string(), k_op, "field '{}' must be a string, got {}", name, f.dump());
  return f.get<std::string>();
}

// Integer label given as a number or a decimal string ("2"), within [0, n).
int64_t label_field(const nlohmann::json& j, const char* name, int64_t n) {
  const auto& f = field(j, name);
  int64_t v = -1;
  if (f.is_number_integer()) {
    v = io::json_int(f, k_op, fmt::format("field '{}'", name));
  } else if (f.is_string()) {
    const auto s = f.get<std::string>();
    // At most 18 digits: std::stoll throws std::out_of_range beyond int64.
    check(!s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string::npos,
          k_op, "field '{}' must be an integer label, got \"{}\" (test splits carry no labels)",
          name, s);
    v = std::stoll(s);
  } else {
    fail(k_op, "field '{}' must be an integer label, got {}", name, f.dump());
  }
  check(v >= 0 && v < n, k_op, "field '{}' = {} out of range [0, {})", name, v, n);
  return v;
}

McExample piqa(const nlohmann::json& j) {
  McExample e;
  e.context = "Question: " + text_field(j, "goal") + "\nAnswer:";
  e.choices = {text_field(j, "sol1"), text_field(j, "sol2")};
  e.label = label_field(j, "label", 2);
  return e;
}

McExample hellaswag(const nlohmann::json& j) {
  McExample e;
  const std::string ctx = text_field(j, "ctx_a") + " " + python_capitalize(text_field(j, "ctx_b"));
  e.context = hellaswag_preprocess(text_field(j, "activity_label") + ": " + ctx);
  const auto& endings = field(j, "endings");
  check(endings.is_array() && !endings.empty(), k_op, "field 'endings' must be a non-empty array");
  for (const auto& x : endings) {
    check(x.is_string(), k_op, "'endings' entries must be strings, got {}", x.dump());
    e.choices.push_back(hellaswag_preprocess(x.get<std::string>()));
  }
  e.label = label_field(j, "label", int64_t(e.choices.size()));
  return e;
}

McExample arc(const nlohmann::json& j) {
  McExample e;
  const auto& q = field(j, "question");
  e.context = "Question: " + text_field(q, "stem") + "\nAnswer:";
  const auto& choices = field(q, "choices");
  check(choices.is_array() && !choices.empty(), k_op,
        "field 'question.choices' must be a non-empty array");
  const std::string key = text_field(j, "answerKey");
  e.label = -1;
  for (const auto& c : choices) {
    if (text_field(c, "label") == key) e.label = int64_t(e.choices.size());
    e.choices.push_back(text_field(c, "text"));
  }
  check(e.label >= 0, k_op, "answerKey '{}' matches no choice label", key);
  return e;
}

}  // namespace

McTask parse_mc_task(std::string_view name) {
  if (name == "piqa") return McTask::piqa;
  if (name == "hellaswag") return McTask::hellaswag;
  if (name == "arc-e" || name == "arc_easy" || name == "arc-easy") return McTask::arc_easy;
  fail("mc_task", "expected piqa, hellaswag or arc-e, got '{}'", name);
}

std::string mc_task_name(McTask task) {
  switch (task) {
    case McTask::piqa: return "piqa";
    case McTask::hellaswag: return "hellaswag";
    case McTask::arc_easy: return "arc-e";
  }
  return "?";
}

LengthNorm default_length_norm(McTask task) {
  return task == McTask::arc_easy ? LengthNorm::chars : LengthNorm::tokens;
}

LengthNorm parse_length_norm(std::string_view name) {
  if (name == "tokens") return LengthNorm::tokens;
  if (name == "chars") return LengthNorm::chars;
  fail("mc_norm", "expected 'tokens' or 'chars', got '{}'", name);
}

std::string python_capitalize(std::string_view text) {
  std::string out(text);
  for (size_t i = 0; i < out.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(out[i]);
    if (c >= 0x80) continue;
    out[i] = static_cast<char>(i == 0 ? std::toupper(c) : std::tolower(c));
  }
  return out;
}

std::string hellaswag_preprocess(std::string_view text) {
  // strip() (ASCII whitespace, as Python does for these ASCII-whitespace texts)
  const char* ws = " \t\n\r\f\v";
  const auto b = text.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  std::string s(text.substr(b, text.find_last_not_of(ws) - b + 1));
  // " [title]" -> ". "
  std::string t;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 8, " [title]") == 0) {
      t += ". ";
      i += 8;
    } else {
      t += s[i++];
    }
  }
  // re.sub(r"\[.*?\]", "", t): shortest bracket span, '.' does not cross '\n'.
  std::string u;
  for (size_t i = 0; i < t.size();) {
    if (t[i] == '[') {
      size_t j = i + 1;
      while (j < t.size() && t[j] != ']' && t[j] != '\n') ++j;
      if (j < t.size() && t[j] == ']') {
        i = j + 1;
        continue;
      }
    }
    u += t[i++];
  }
  // str.replace("  ", " "): one left-to-right pass over non-overlapping pairs.
  std::string v;
  for (size_t i = 0; i < u.size();) {
    if (i + 1 < u.size() && u[i] == ' ' && u[i + 1] == ' ') {
      v += ' ';
      i += 2;
    } else {
      v += u[i++];
    }
  }
  return v;
}

McExample parse_mc_line(McTask task, std::string_view json_line) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_line);
  } catch (const nlohmann::json::exception& e) {
    fail(k_op, "expected one JSON object per line: {}", e.what());
  }
  check(j.is_object(), k_op, "expected a JSON object, got {}", j.dump().substr(0, 80));
  switch (task) {
    case McTask::piqa: return piqa(j);
    case McTask::hellaswag: return hellaswag(j);
    case McTask::arc_easy: return arc(j);
  }
  fail(k_op, "unknown task");
}

std::vector<McExample> load_mc_examples(McTask task, const std::filesystem::path& path,
                                        int64_t limit) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), k_op, "cannot open '{}' (expected a JSONL file of {} examples)",
        path.string(), mc_task_name(task));
  check(limit >= 0, k_op, "limit must be >= 0, got {}", limit);
  std::vector<McExample> out;
  std::string line;
  for (int64_t lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    try {
      out.push_back(parse_mc_line(task, line));
    } catch (const Error& e) {
      fail(k_op, "{}:{}: {}", path.string(), lineno, e.what());
    }
    if (limit > 0 && int64_t(out.size()) >= limit) break;
  }
  check(!out.empty(), k_op, "'{}' holds no examples", path.string());
  return out;
}

CandidateTokens split_candidate(const TokenizeFn& tokenize, const std::string& context,
                                const std::string& choice, int64_t max_tokens) {
  CandidateTokens c;
  c.context = tokenize(context);
  std::vector<int64_t> whole = tokenize(context + " " + choice);
  check(!c.context.empty(), "mc_score", "context '{}' tokenizes to nothing", context);
  check(whole.size() > c.context.size(), "mc_score",
        "candidate '{}' adds no tokens after the context", choice);
  c.continuation.assign(whole.begin() + int64_t(c.context.size()), whole.end());
  if (max_tokens > 0) {
    const int64_t cont = int64_t(c.continuation.size());
    check(cont + 1 <= max_tokens, "mc_score",
          "candidate of {} tokens does not fit the model's {} positions with context",
          cont, max_tokens);
    const int64_t keep = std::min<int64_t>(int64_t(c.context.size()), max_tokens - cont);
    c.context.erase(c.context.begin(), c.context.end() - keep);
  }
  return c;
}

McExampleResult rank_choices(std::vector<McChoiceScore> choices, int64_t label,
                             LengthNorm norm) {
  check(!choices.empty(), "mc_score", "expected at least one choice");
  McExampleResult r;
  r.label = label;
  for (auto& c : choices) {
    const int64_t len = norm == LengthNorm::tokens ? c.tokens : c.chars;
    check(len > 0, "mc_score", "candidate length must be positive for normalisation");
    check(std::isfinite(c.logprob), "mc_score", "candidate log-likelihood is not finite");
    c.normalized = c.logprob / double(len);
  }
  for (size_t i = 1; i < choices.size(); ++i) {
    if (choices[i].logprob > choices[r.pred].logprob) r.pred = int64_t(i);
    if (choices[i].normalized > choices[r.pred_norm].normalized) r.pred_norm = int64_t(i);
  }
  r.choices = std::move(choices);
  return r;
}

McResult score_multiple_choice(McTask task, LengthNorm norm,
                               const std::vector<McExample>& examples,
                               const TokenizeFn& tokenize,
                               const ContinuationLogprobFn& logprob, int64_t max_tokens,
                               const ProgressFn& progress) {
  McResult res;
  res.task = task;
  res.norm = norm;
  for (const auto& ex : examples) {
    std::vector<McChoiceScore> scores;
    for (const auto& choice : ex.choices) {
      const auto c = split_candidate(tokenize, ex.context, choice, max_tokens);
      McChoiceScore s;
      s.logprob = logprob(c.context, c.continuation);
      s.tokens = int64_t(c.continuation.size());
      s.chars = utf8_code_points(choice);
      scores.push_back(s);
    }
    auto r = rank_choices(std::move(scores), ex.label, norm);
    res.correct += r.pred == r.label;
    res.correct_norm += r.pred_norm == r.label;
    ++res.total;
    res.examples.push_back(std::move(r));
    report(progress, res.total, int64_t(examples.size()), "examples");
  }
  return res;
}

}  // namespace oal::eval
