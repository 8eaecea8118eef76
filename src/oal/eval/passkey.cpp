#include "oal/eval/passkey.h"

#include <cmath>
#include <random>

#include "oal/core/error.h"

namespace oal::eval {
namespace {

constexpr std::string_view k_op = "passkey";
const std::string k_intro =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
    "I will quiz you about the important information there.";
const std::string k_filler =
    " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
const std::string k_ask = " What is the pass key? The pass key is";

std::string needle(const std::string& key) {
  return " The pass key is " + key + ". Remember it. " + key + " is the pass key.";
}

std::string prompt_text(int64_t fillers, int64_t needle_after, const std::string& key) {
  std::string s = k_intro;
  for (int64_t i = 0; i < fillers; ++i) {
    if (i == needle_after) s += needle(key);
    s += k_filler;
  }
  if (needle_after >= fillers) s += needle(key);
  return s + k_ask;
}

void validate(const PasskeyOptions& o) {
  check(!o.lengths.empty() && !o.depths.empty(), k_op,
        "expected at least one length and one depth");
  for (int64_t n : o.lengths) check(n > 0, k_op, "length {} must be positive", n);
  for (double d : o.depths) check(d >= 0.0 && d <= 1.0, k_op, "depth {} must be within [0, 1]", d);
  check(o.trials > 0, k_op, "trials must be positive, got {}", o.trials);
  check(o.digits >= 1 && o.digits <= 18, k_op, "digits must be within 1..18, got {}", o.digits);
}

}  // namespace

std::string passkey_key(uint64_t seed, int64_t length, double depth, int64_t trial,
                        int64_t digits) {
  std::seed_seq seq{seed, static_cast<uint64_t>(length),
                    static_cast<uint64_t>(std::llround(depth * 1e6)), static_cast<uint64_t>(trial)};
  std::mt19937_64 gen(seq);
  // The first digit is 1..9 so every key has exactly `digits` digits.
  std::string key(1, static_cast<char>('1' + gen() % 9));
  while (static_cast<int64_t>(key.size()) < digits) key += static_cast<char>('0' + gen() % 10);
  return key;
}

PasskeyPrompt make_passkey_prompt(const PasskeyTokenizeFn& tokenize, int64_t length, double depth,
                                  const std::string& key) {
  check(depth >= 0.0 && depth <= 1.0, k_op, "depth {} must be within [0, 1]", depth);
  PasskeyPrompt p;
  p.key = key;
  p.answer = tokenize(" " + key);
  const int64_t fixed =
      static_cast<int64_t>(tokenize(prompt_text(0, 0, key)).size() + p.answer.size());
  const int64_t per_filler = static_cast<int64_t>(tokenize(k_filler).size());
  check(fixed + per_filler <= length, k_op,
        "{} tokens leave no room for filler: the question alone takes {} tokens", length, fixed);
  // Tokenised as one text, fillers can merge across their boundaries: shrink until it fits.
  for (p.fillers = (length - fixed) / per_filler; p.fillers >= 0; --p.fillers) {
    p.needle_after = static_cast<int64_t>(std::llround(depth * static_cast<double>(p.fillers)));
    p.context = tokenize(prompt_text(p.fillers, p.needle_after, key));
    if (static_cast<int64_t>(p.context.size() + p.answer.size()) <= length) return p;
  }
  fail(k_op, "no filler count fits the prompt in {} tokens", length);
}

std::vector<PasskeyCell> run_passkey(const PasskeyOptions& o, const PasskeyTokenizeFn& tokenize,
                                     const AnswerMatchFn& matches, const ProgressFn& progress) {
  validate(o);
  std::vector<PasskeyCell> cells;
  const int64_t total = static_cast<int64_t>(o.lengths.size() * o.depths.size()) * o.trials;
  int64_t done = 0;
  for (int64_t n : o.lengths) {
    for (double depth : o.depths) {
      PasskeyCell cell{n, depth, 0, 0, 0};
      for (int64_t t = 0; t < o.trials; ++t) {
        const PasskeyPrompt p =
            make_passkey_prompt(tokenize, n, depth, passkey_key(o.seed, n, depth, t, o.digits));
        cell.tokens = static_cast<int64_t>(p.context.size() + p.answer.size());
        cell.correct += matches(p.context, p.answer) ? 1 : 0;
        ++cell.trials;
        report(progress, ++done, total, "trials");
      }
      cells.push_back(cell);
    }
  }
  return cells;
}

}  // namespace oal::eval
