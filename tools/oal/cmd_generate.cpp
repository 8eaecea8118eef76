// `oal generate`: continue a prompt, streaming tokens to stdout as they are produced.
#include <fmt/core.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "oal/core/error.h"
#include "oal/formats/open_model.h"
#include "oal/generate/generate.h"
#include "oal/text/tokenizer.h"
#include "weights_option.h"

namespace {

struct GenerateArgs {
  std::string model, prompt, tokenizer;
  int64_t n = 64, top_k = 0;
  double temp = 0.0, top_p = 1.0;
  uint64_t seed = 0;
  bool json = false, ignore_eos = false;
  oal::model::TransformerOptions weights;
};

void run(const GenerateArgs& a) {
  oal::check(!a.prompt.empty(), "generate", "empty --prompt; expected some text to continue");
  // A converted directory (oal convert / finetune) gets its hybrid attention.
  const oal::formats::OpenedModel opened =
      oal::formats::open_model(a.model, {.tokenizer = a.tokenizer, .transformer = a.weights});
  const oal::model::Transformer& model = *opened.model;
  const oal::text::Tokenizer* tok = opened.tokenizer.get();
  const std::vector<int32_t> prompt = tok->encode(a.prompt, /*add_bos=*/true);
  oal::generate::GenerateOptions o;
  o.max_new_tokens = a.n;
  o.sampler = {.temperature = a.temp, .top_p = a.top_p, .top_k = a.top_k, .seed = a.seed};
  if (!a.ignore_eos) o.stop_tokens.assign(opened.stop_tokens.begin(), opened.stop_tokens.end());

  int32_t prev = -1;
  std::string text;
  for (int32_t id : prompt) text += tok->decode_token(prev, id), prev = id;
  if (!a.json) fmt::print("{}", text), std::fflush(stdout);
  const auto result = oal::generate::generate(model, prompt, o, [&](int32_t id) {
    const std::string piece = tok->decode_token(prev, id);
    prev = id;
    text += piece;
    if (!a.json) fmt::print("{}", piece), std::fflush(stdout);
  });
  const size_t n = result.tokens.size();
  const double decode_rate =
      result.decode_seconds > 0 && n > 1 ? (n - 1) / result.decode_seconds : 0;
  if (a.json) {
    nlohmann::json j = {{"text", text}, {"prompt_tokens", prompt}, {"tokens", result.tokens},
                        {"stopped", result.stopped}, {"prefill_seconds", result.prefill_seconds},
                        {"decode_seconds", result.decode_seconds},
                        {"decode_tokens_per_second", decode_rate}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("\n");
  std::fflush(stdout);  // the text line ends before the summary on stderr
  fmt::print(stderr, "[{} prompt tokens in {:.3f} s, {} new tokens, {:.1f} tokens/s{}]\n",
             prompt.size(), result.prefill_seconds, n, decode_rate,
             result.stopped ? ", stopped at end of sequence" : "");
}

oal::cli::Registrar reg{
    "generate", "Continue a prompt (greedy, temperature, top-k, top-p), streaming to stdout",
    [](CLI::App& app) {
      auto a = std::make_shared<GenerateArgs>();
      app.add_option("--model", a->model, "HF model directory, .gguf file or llama2.c checkpoint")
          ->required();
      app.add_option("--prompt", a->prompt,
                     "Text to continue (BOS first when the tokenizer adds one)")
          ->required();
      app.add_option("-n,--n-predict", a->n, "Number of new tokens")->capture_default_str();
      app.add_option("--temp", a->temp, "Temperature (0 = greedy)")->capture_default_str();
      app.add_option("--top-p", a->top_p, "Nucleus sampling mass in (0, 1]")->capture_default_str();
      app.add_option("--top-k", a->top_k, "Keep only the k most likely tokens (0 = all)")
          ->capture_default_str();
      app.add_option("--seed", a->seed, "Sampling seed")->capture_default_str();
      app.add_option("--tokenizer", a->tokenizer,
                     "Tokenizer file (default: tokenizer.json / tok512.bin / tokenizer.bin "
                     "beside the model)");
      app.add_flag("--ignore-eos", a->ignore_eos, "Keep going past end-of-sequence tokens");
      oal::cli::add_weights_option(app, a->weights);
      oal::cli::add_ubatch_option(app, a->weights);
      app.add_flag("--json", a->json, "Print one JSON object at the end instead of streaming");
      return [a] { run(*a); };
    }};

}  // namespace
