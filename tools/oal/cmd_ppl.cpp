// `oal ppl`: perplexity of a model on a text file with the paper's protocol (App. F.3).
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "oal/eval/perplexity.h"
#include "oal/formats/open_model.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"
#include "progress_bar.h"
#include "weights_option.h"

namespace {

struct PplArgs {
  std::string model, text, tokenizer;
  int64_t ctx = 0, batch = 1, max_blocks = 0, first_block = 0;
  bool json = false, quiet = false;
  oal::model::TransformerOptions weights;
};

nlohmann::json to_json(const PplArgs& a, const oal::eval::PerplexityResult& r) {
  auto opt = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  return {{"model", a.model},          {"text", a.text},
          {"ctx", r.ctx},              {"ppl", r.ppl},
          {"ppl_stderr", opt(r.ppl_stderr)}, {"nll", r.nll},
          {"nll_stderr", opt(r.nll_stderr)}, {"tokens", r.tokens},
          {"blocks", r.blocks},        {"stream_tokens", r.stream_tokens},
          {"seconds", r.seconds},      {"tokens_per_second", r.tokens_per_second},
          {"first_block", r.first_block}, {"block_nll", r.block_nll}};
}

void run(const PplArgs& a) {
  const std::string text = oal::text::read_text_file(a.text);  // a bad file fails first
  // A converted directory (oal convert / finetune) gets its hybrid attention.
  const oal::formats::OpenedModel opened =
      oal::formats::open_model(a.model, {.tokenizer = a.tokenizer, .transformer = a.weights});
  const oal::model::Transformer& model = *opened.model;
  const std::vector<int32_t> stream = opened.tokenizer->encode(text, false);
  oal::cli::ProgressBar bar("ppl", !a.quiet);
  oal::eval::PerplexityOptions o{.ctx = a.ctx, .batch = a.batch, .max_blocks = a.max_blocks,
                                 .first_block = a.first_block, .progress = bar.fn()};
  const oal::eval::PerplexityResult r = oal::eval::perplexity(model, stream, o);
  bar.finish();
  if (a.json) {
    fmt::print("{}\n", to_json(a, r).dump(2));
    return;
  }
  auto pm = [](const std::optional<double>& v, int digits) {
    return v ? fmt::format(" ± {:.{}f}", *v, digits) : std::string(" ± n/a (one block)");
  };
  fmt::print("ppl {:.4f}{}  (mean nll {:.6f}{})\n", r.ppl, pm(r.ppl_stderr, 4), r.nll,
             pm(r.nll_stderr, 6));
  fmt::print("{} targets in {} blocks of {} tokens from block {} (stream {} tokens, tail dropped)\n",
             r.tokens, r.blocks, r.ctx, r.first_block, r.stream_tokens);
  fmt::print("{:.1f} s, {:.0f} tokens/s\n", r.seconds, r.tokens_per_second);
}

oal::cli::Registrar reg{
    "ppl", "Perplexity on a text file: one token stream, non-overlapping ctx-token blocks",
    [](CLI::App& app) {
      auto a = std::make_shared<PplArgs>();
      app.add_option("--model", a->model, "HF model directory, .gguf file or llama2.c checkpoint")
          ->required();
      app.add_option("--text", a->text, "Text file (read whole as one token stream, no BOS)")
          ->required();
      app.add_option("--ctx", a->ctx, "Block length in tokens (ctx - 1 targets per block)")
          ->required();
      app.add_option("--batch", a->batch, "Blocks per forward")->capture_default_str();
      app.add_option("--max-blocks", a->max_blocks, "Score at most this many blocks (0 = all)")
          ->capture_default_str();
      app.add_option("--first-block", a->first_block,
                     "Skip the blocks before this one (a held-out range: e.g. past the blocks a "
                     "calibration used); --json lists each block's mean NLL (block_nll) for "
                     "paired comparisons (scripts/paired_ppl.py)")
          ->capture_default_str();
      app.add_option("--tokenizer", a->tokenizer,
                     "Tokenizer file (default: tokenizer.json / tok512.bin / tokenizer.bin "
                     "beside the model)");
      oal::cli::add_weights_option(app, a->weights);
      app.add_flag("--quiet", a->quiet, "No progress bar");
      app.add_flag("--json", a->json, "Machine-readable output");
      return [a] { run(*a); };
    }};

}  // namespace
