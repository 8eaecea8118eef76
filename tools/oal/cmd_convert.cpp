// `oal convert`: write a converted model directory (chosen layers running a calibrated
// attention method, no training) that `oal ppl` / `oal generate` / `oal eval` load.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "oal/attention/registry.h"
#include "oal/convert/convert_run.h"
#include "oal/core/error.h"
#include "oal/text/corpus.h"
#include "progress_bar.h"

namespace {

struct ConvertArgs {
  oal::convert::ConvertOptions o;
  std::string calib, tokenizer, out, init = "initial", balance_text, balance_blocks = "24-25";
  bool json = false, quiet = false;
};

// --balance-blocks "A-B" (or A:B, A) as the first block and a count; an open end is
// refused (the blocks are scored once per candidate, so the user says how many).
void set_balance_blocks(ConvertArgs& a) {
  const auto r = oal::text::parse_block_range(a.balance_blocks);
  oal::check(r.end > r.begin, "convert", "--balance-blocks '{}': expected a closed range such as 4-6",
             a.balance_blocks);
  a.o.balance.first_block = r.begin;
  a.o.balance.blocks = r.end - r.begin;
}

nlohmann::json balance_json(const oal::convert::BalanceChoice& b, const ConvertArgs& a) {
  nlohmann::json scores = nlohmann::json::array();
  for (const auto& s : b.scores)
    scores.push_back({{"candidate", s.describe()},
                      {"offset", s.offset ? nlohmann::json(*s.offset) : nlohmann::json(nullptr)},
                      {"nll", s.nll},
                      {"ppl", s.ppl}});
  return {{"text", a.balance_text}, {"ctx", a.o.balance.ctx},
          {"first_block", a.o.balance.first_block}, {"blocks", a.o.balance.blocks},
          {"chosen", b.best().describe()}, {"scores", scores}};
}

void run(ConvertArgs& a) {
  a.o.calib = a.calib;
  a.o.tokenizer = a.tokenizer;
  a.o.out = a.out;
  a.o.init = oal::convert::parse_kernel_init(a.init);
  a.o.balance_text = a.balance_text;
  set_balance_blocks(a);
  oal::cli::ProgressBar bar("balance", !a.quiet && !a.balance_text.empty());
  a.o.balance.progress = bar.fn();
  const auto r = oal::convert::run_convert(a.o);
  bar.finish();
  if (a.json) {
    nlohmann::json j{{"method", r.method},
                     {"layers", r.layers},
                     {"layer_range", r.plan.range_rule},
                     {"kernel_start", r.plan.from_calibration ? "calibrated" : "initial"},
                     {"full_heads", oal::convert::describe_full_heads(r.plan.full_heads)},
                     {"full_heads_rule", r.plan.full_heads_rule},
                     {"out", r.out.string()}};
    if (r.balance) j["balance"] = balance_json(*r.balance, a);
    fmt::print("{}\n", j.dump(2));
    return;
  }
  if (r.balance) {
    fmt::print("balance (perplexity of the converted model, blocks {}-{} of {} tokens):\n",
               a.o.balance.first_block, a.o.balance.first_block + a.o.balance.blocks - 1,
               a.o.balance.ctx);
    for (size_t i = 0; i < r.balance->scores.size(); ++i)
      fmt::print("  {:<12} ppl {:.4f}{}\n", r.balance->scores[i].describe(),
                 r.balance->scores[i].ppl, i == r.balance->chosen ? "  <- chosen" : "");
  }
  fmt::print("layer range: {}\n", r.plan.range_rule.empty() ? "none (softmax)" : r.plan.range_rule);
  if (!r.plan.full_heads.empty())
    fmt::print("kept exact: KV heads {} ({})\n",
               oal::convert::describe_full_heads(r.plan.full_heads), r.plan.full_heads_rule);
  fmt::print("converted layers [{}] to {} ({} parameters); written to {}\n",
             fmt::join(r.layers, ","), r.method, r.plan.from_calibration ? "calibrated" : "initial",
             r.out.string());
}

oal::cli::Registrar reg{
    "convert", "Write a hybrid model directory: layers replaced by a calibrated method",
    [](CLI::App& app) {
      auto a = std::make_shared<ConvertArgs>();
      app.add_option("--model", a->o.model, "Source model (HF dir, .gguf file or llama2.c .bin)")
          ->required();
      app.add_option("--calib", a->calib,
                     "Calibration run directory (oal calibrate). Without it, a converted "
                     "--model (e.g. an adapted one, to rebalance) is its own run: its kernels "
                     "and, unless --layers is given, its layers");
      app.add_option("--method", a->o.method,
                     oal::attn::method_list(" | "))
          ->capture_default_str();
      app.add_option("--layers", a->o.layers,
                     "'default' (24+ layers: all but the first and last three, e.g. 3-20 of 24; "
                     "fewer: all but the first and last, e.g. 1-14 of 16), a list such as 1-3, or "
                     "auto:K (the K layers with the least attention beyond the window; needs "
                     "--layer-scores)")
          ->capture_default_str();
      app.add_option(
             "--init", a->init,
             "Kernel parameters: initial = baselines from their own initial values, OAL "
             "and global from calibration (paper App. F); calibrated = all from calibration")
          ->check(CLI::IsMember({"initial", "calibrated"}))
          ->capture_default_str();
      app.add_option("--sinks", a->o.window.sinks,
                     "Sink tokens attended exactly (must match the calibration run; with "
                     "--method window, no run is needed)")
          ->capture_default_str();
      app.add_option("--window", a->o.window.recent,
                     "Recent tokens attended exactly (must match the calibration run)")
          ->capture_default_str();
      app.add_option("--layer-scores", a->o.layer_scores,
                     "Scores from `oal layer-scores --out FILE`, for --layers auto:K and "
                     "--full-heads auto:M");
      app.add_option("--full-heads", a->o.full_heads,
                     "KV heads of converted windowed layers kept exact (softmax over every key, "
                     "a KV cache): auto:M, the M that retrieve most (needs --layer-scores from "
                     "`oal layer-scores --retrieval-probes N`), or LAYER:HEAD pairs, e.g. "
                     "14:0,20:2");
      app.add_option("--out", a->out, "Output directory")->required();
      app.add_option("--tokenizer", a->tokenizer, "Tokenizer file (default: beside the model)");
      app.add_option("--balance-text", a->balance_text,
                     "Choose the balance of a windowed conversion by the converted model's "
                     "perplexity on blocks of this text: every c_h shifted by one offset, or the "
                     "windowed-only rule; the lowest is kept (docs/adapt.md). Use blocks that "
                     "the evaluation does not");
      app.add_option("--balance-ctx", a->o.balance.ctx,
                     "Tokens per block for --balance-text (the context the model should serve)");
      app.add_option("--balance-blocks", a->balance_blocks,
                     "Blocks of --balance-text scored per candidate, A-B inclusive")
          ->capture_default_str();
      app.add_option("--balance-offsets", a->o.balance.offsets,
                     "Candidate offsets subtracted from every c_h (the windowed-only rule is "
                     "always a candidate too)")
          ->delimiter(',')
          ->capture_default_str();
      app.add_flag("--quiet", a->quiet, "No progress bar");
      app.add_flag("--json", a->json, "Machine-readable output");
      return [a] { run(*a); };
    }};

}  // namespace
