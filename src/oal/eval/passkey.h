#pragma once
// Synthetic passkey retrieval (Mohtashami & Jaggi 2023, as LongLoRA and the
// linear-attention papers run it): a random number hidden at a relative depth of
// repeated filler text, then asked for. A trial is correct when greedy decoding would
// produce the whole key: at every answer position the model's argmax is the key's
// token (checked teacher-forced in one forward, which is the same condition).
//
//   intro   "There is an important info hidden inside a lot of irrelevant text. Find
//           it and memorize it. I will quiz you about the important information there."
//   filler  " The grass is green. The sky is blue. The sun is yellow. Here we go.
//           There and back again."  repeated k times; after round(depth · k) of them:
//   needle  " The pass key is KEY. Remember it. KEY is the pass key."
//   ask     " What is the pass key? The pass key is"      answer " KEY"
// k is the largest count for which the whole prompt plus answer fits in `length`
// tokens (measured with the model's tokenizer, no BOS). Keys are `digits`-digit
// numbers drawn from a generator seeded with (seed, length, depth, trial).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "oal/core/progress.h"

namespace oal::eval {

struct PasskeyOptions {
  std::vector<int64_t> lengths = {1024, 2048, 4096, 8192};  // tokens, prompt + answer
  std::vector<double> depths = {0.0, 0.25, 0.5, 0.75, 1.0};
  int64_t trials = 5;
  int64_t digits = 5;
  uint64_t seed = 0;
};

struct PasskeyPrompt {
  std::string key;
  std::vector<int64_t> context;  // intro ... ask
  std::vector<int64_t> answer;   // " KEY"
  int64_t fillers = 0;           // k
  int64_t needle_after = 0;      // fillers before the needle
};

struct PasskeyCell {
  int64_t length = 0;      // requested
  double depth = 0;
  int64_t tokens = 0;      // measured context + answer of the last trial
  int64_t trials = 0;
  int64_t correct = 0;
  double accuracy() const { return trials ? double(correct) / double(trials) : 0.0; }
};

using PasskeyTokenizeFn = std::function<std::vector<int64_t>(const std::string&)>;
// Whether the model's argmax at every answer position is the answer token.
using AnswerMatchFn =
    std::function<bool(const std::vector<int64_t>& context, const std::vector<int64_t>& answer)>;

// The key of one trial (deterministic for the arguments).
std::string passkey_key(uint64_t seed, int64_t length, double depth, int64_t trial, int64_t digits);

// The prompt for `key` at `depth` within `length` tokens. Throws oal::Error("[passkey]
// ...") when the prompt cannot fit (length too small for intro + needle + ask) or
// depth is outside [0, 1].
PasskeyPrompt make_passkey_prompt(const PasskeyTokenizeFn& tokenize, int64_t length, double depth,
                                  const std::string& key);

// Every (length, depth) cell over `trials` trials. Validates the options first.
std::vector<PasskeyCell> run_passkey(const PasskeyOptions& options,
                                     const PasskeyTokenizeFn& tokenize,
                                     const AnswerMatchFn& matches, const ProgressFn& progress = {});

}  // namespace oal::eval
