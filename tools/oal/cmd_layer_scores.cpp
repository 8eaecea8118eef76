// `oal layer-scores`: how much softmax weight each layer's heads put beyond the sinks and
// the recent window, the measurement `oal convert --layers auto:K` chooses layers by.
#include <fmt/core.h>

#include <algorithm>

#include "calib_options.h"
#include "command.h"
#include "oal/calib/layer_scoring.h"
#include "oal/eval/passkey.h"
#include "oal/formats/find_tokenizer.h"
#include "oal/formats/load.h"
#include "oal/io/atomic_file.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"
#include "progress_bar.h"

namespace {

struct LayerScoresArgs {
  std::string model, text, tokenizer, layers, out, blocks = "16-23";
  int64_t ctx = 1024, probes = 0, probe_length = 2048;
  oal::attn::Window window{4, 64};
  bool json = false, quiet = false;
};

// `count` passkey prompts of `length` tokens (eval/passkey.h), the key at depths spread
// evenly over (0, 1), keys drawn with seed 1 (oal eval's passkey task uses seed 0, so the
// probes never repeat an evaluated prompt): the answer is teacher-forced, its rows are
// the positions that predict it, its keys the context tokens of the key's own digits.
std::vector<oal::calib::RetrievalProbe> passkey_probes(const oal::text::Tokenizer& tok,
                                                       int64_t count, int64_t length) {
  const oal::eval::PasskeyTokenizeFn tokenize = [&](const std::string& s) {
    const auto ids = tok.encode(s, false);
    return std::vector<int64_t>(ids.begin(), ids.end());
  };
  std::vector<oal::calib::RetrievalProbe> out;
  for (int64_t i = 0; i < count; ++i) {
    const double depth = (double(i) + 0.5) / double(count);
    const std::string key = oal::eval::passkey_key(1, length, depth, 0, 5);
    const oal::eval::PasskeyPrompt p = oal::eval::make_passkey_prompt(tokenize, length, depth, key);
    const std::vector<int64_t> digits = tokenize(key);
    oal::calib::RetrievalProbe probe;
    probe.tokens = p.context;
    probe.tokens.insert(probe.tokens.end(), p.answer.begin(), p.answer.end());
    for (size_t a = 0; a < p.answer.size(); ++a)
      probe.rows.push_back(int64_t(p.context.size() + a) - 1);
    for (size_t t = 0; t < probe.tokens.size(); ++t)
      probe.keys.push_back(t < p.context.size() &&
                           std::find(digits.begin(), digits.end(), probe.tokens[t]) != digits.end());
    out.push_back(std::move(probe));
  }
  return out;
}

void run(const LayerScoresArgs& a) {
  auto tok = oal::formats::open_tokenizer(a.model, a.tokenizer);
  const std::vector<int32_t> stream = tok->encode(oal::text::read_text_file(a.text), false);
  const oal::model::Transformer model(oal::formats::load_model(a.model));
  oal::analysis::LayerScores s;
  {
    oal::cli::ProgressBar cap("capture", !a.quiet);
    s = oal::calib::score_layers(model, stream, a.ctx, oal::parse_index_list(a.blocks, "blocks"),
                                 oal::cli::parse_layers(a.layers), a.window, cap.fn());
  }
  if (a.probes > 0) {
    oal::cli::ProgressBar bar("retrieval", !a.quiet);
    oal::calib::score_retrieval(model, passkey_probes(*tok, a.probes, a.probe_length), s,
                                bar.fn());
  }
  const nlohmann::json j = oal::analysis::layer_scores_to_json(s);
  if (!a.out.empty()) oal::io::write_file_atomic(a.out, j.dump(2) + "\n");
  if (a.json) {
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("softmax weight beyond {} sink(s) and a {}-token window ({} blocks of {} tokens)\n",
             a.window.sinks, a.window.recent, s.sequences, s.ctx);
  fmt::print("{:>6} {:>10}  per head\n", "layer", "mean");
  for (const auto& l : s.layers) {
    fmt::print("{:>6} {:>10.4f} ", l.layer, l.mean());
    for (double h : l.heads) fmt::print(" {:.3f}", h);
    if (!l.retrieval.empty()) {
      fmt::print("   retrieval");
      for (double h : l.retrieval) fmt::print(" {:.3f}", h);
    }
    fmt::print("\n");
  }
  if (!a.out.empty()) fmt::print("wrote {}\n", a.out);
}

oal::cli::Registrar reg{
    "layer-scores",
    "Score layers by the attention weight beyond sinks and a recent window (for convert --layers "
    "auto:K)",
    [](CLI::App& app) {
      auto a = std::make_shared<LayerScoresArgs>();
      app.add_option("--model", a->model, "HF model directory, .gguf file or llama2.c checkpoint")
          ->required();
      app.add_option("--text", a->text, "Text file: one token stream cut into ctx-token blocks")
          ->required();
      app.add_option("--ctx", a->ctx, "Block length in tokens")->capture_default_str();
      app.add_option("--blocks", a->blocks,
                     "Blocks to score on (default: calibrate's fitting blocks, disjoint from its "
                     "evaluation blocks 0-15)")
          ->capture_default_str();
      app.add_option("--layers", a->layers, "Layers, e.g. 0,2,4-7 (default: all)");
      app.add_option("--retrieval-probes", a->probes,
                     "Also score retrieval: the weight that passkey answers put on the key's "
                     "tokens beyond the window, over this many prompts (0: not scored)")
          ->check(CLI::Range(int64_t(0), int64_t(1000)))
          ->capture_default_str();
      app.add_option("--probe-length", a->probe_length,
                     "Tokens per retrieval probe (prompt and answer; keep it within the model's "
                     "context)")
          ->check(CLI::Range(int64_t(64), int64_t(1) << 20))
          ->capture_default_str();
      oal::cli::add_window_options(app, a->window);
      app.add_option("--out", a->out, "Write the scores as JSON (convert --layer-scores reads it)");
      app.add_option("--tokenizer", a->tokenizer, "Tokenizer file (default: beside the model)");
      app.add_flag("--quiet", a->quiet, "No progress bar");
      app.add_flag("--json", a->json, "Machine-readable output");
      return [a] { run(*a); };
    }};

}  // namespace
