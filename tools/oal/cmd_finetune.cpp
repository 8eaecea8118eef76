// `oal finetune`: convert layers of a model with a calibrated attention method and adapt
// it with LoRA (kernel parameters trained jointly), paper App. F.2.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "command.h"
#include "launch.h"
#include "oal/dist/world.h"
#include "oal/attention/registry.h"
#include "oal/train/finetune_run.h"
#include "progress_bar.h"

namespace {

struct FinetuneArgs {
  oal::train::FinetuneRunOptions o;
  int nproc = 1;
  std::string calib, tokenizer, out, train, val, init = "initial";
  bool freeze_kernel = false, json = false, quiet = false;
};

void run(FinetuneArgs& a) {
  if (oal::cli::ran_as_launcher(a.nproc)) return;
  auto& o = a.o;
  o.train.world = oal::dist::world_from_env();
  oal::cli::exit_if_fault_injected(o.train.world->rank());
  if (o.train.world->rank() != 0) a.quiet = true;
  o.convert.calib = a.calib;
  o.convert.tokenizer = a.tokenizer;
  o.convert.out = a.out;
  o.train_text = a.train;
  o.val_text = a.val;
  o.train_kernel = !a.freeze_kernel;
  o.convert.init = oal::convert::parse_kernel_init(a.init);
  oal::cli::ProgressBar bar("finetune", !a.quiet);
  oal::train::FinetuneHooks hooks;
  // Test hook: OAL_FAULT_EXIT_AFTER_STEP=k stops every rank after update k (after its
  // checkpoint when one is due), as an interruption would; --resume continues from there.
  if (const char* k = std::getenv("OAL_FAULT_EXIT_AFTER_STEP"))
    hooks.after_step = [stop = std::atoll(k)](int64_t step) {
      if (step == stop) std::_Exit(3);
    };
  const auto r = oal::train::run_finetune(o, bar.fn(), hooks);
  bar.finish();
  if (o.train.world->rank() != 0) return;  // rank 0 reports
  const auto& t = r.train;
  if (a.json) {
    nlohmann::json val = nlohmann::json::array();
    for (const auto& v : t.val_log) val.push_back({{"step", v.step}, {"nll", v.nll}});
    nlohmann::json j = {{"method", o.convert.method},
                        {"layers", r.layers},
                        {"layer_range", r.plan.range_rule},
                        {"kernel_start", r.plan.from_calibration ? "calibrated" : "initial"},
                        {"full_heads", oal::convert::describe_full_heads(r.plan.full_heads)},
                        {"steps", o.train.steps},
                        {"updates", t.steps},
                        {"stopped_early", t.stopped_early},
                        {"resumed_from", t.resumed_from},
                        {"initial_val_nll", t.val_log.front().nll},
                        {"best_val_nll", t.best_val_nll},
                        {"best_step", t.best_step},
                        {"val", val},
                        {"lora_parameters", r.lora_parameters},
                        {"kernel_parameters", r.kernel_parameters},
                        {"train_blocks", r.train_blocks},
                        {"val_blocks", r.val_blocks},
                        {"tokens_per_second", t.tokens_per_second},
                        {"model_dir", r.model_dir.string()}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("layer range: {}; kernel parameters started {}\n",
             r.plan.range_rule.empty() ? "none (softmax)" : r.plan.range_rule,
             r.plan.from_calibration ? "from calibration" : "from their initial values");
  if (!r.plan.full_heads.empty())
    fmt::print("kept exact: KV heads {} ({})\n",
               oal::convert::describe_full_heads(r.plan.full_heads), r.plan.full_heads_rule);
  fmt::print("method {} on layers [{}], LoRA r={} alpha={} dropout={}: {} adapter + {} kernel "
             "parameters trained\n",
             o.convert.method, fmt::join(r.layers, ","), o.lora.rank, o.lora.alpha, o.lora.dropout,
             r.lora_parameters, r.kernel_parameters);
  if (t.resumed_from >= 0) fmt::print("resumed from update {}\n", t.resumed_from);
  fmt::print("{} updates on {} training blocks ({:.0f} tokens/s)\n", t.steps, r.train_blocks,
             t.tokens_per_second);
  if (t.stopped_early)
    fmt::print("stopped early: no validation improvement > {} for {} updates (last at update {})\n",
               o.train.min_delta, o.train.patience, t.improved_step);
  fmt::print("validation NLL ({} blocks):", r.val_blocks);
  for (const auto& v : t.val_log) fmt::print("  {}: {:.4f}", v.step, v.nll);
  fmt::print("\nbest: update {} (NLL {:.4f}, PPL {:.3f}); converted model written to {}\n",
             t.best_step, t.best_val_nll, std::exp(t.best_val_nll), r.model_dir.string());
}

oal::cli::Registrar reg{
    "finetune", "Convert layers to a calibrated attention method and adapt with LoRA",
    [](CLI::App& app) {
      auto a = std::make_shared<FinetuneArgs>();
      auto& o = a->o;
      app.add_option("--model", o.convert.model,
                     "Source model (HF dir, .gguf file or llama2.c .bin)")
          ->required();
      app.add_option("--calib", a->calib,
                     "Calibration run directory (oal calibrate); not needed for softmax");
      app.add_option("--method", o.convert.method,
                     oal::attn::method_list(" | "))
          ->capture_default_str();
      app.add_option("--layers", o.convert.layers,
                     "Layers to convert: 'default' (24+ layers: all but the first and last three, "
                     "e.g. 3-20 of 24; fewer: all but the first and last, e.g. 1-14 of 16), a "
                     "list such as 1-3, or auto:K (needs --layer-scores)")
          ->capture_default_str();
      app.add_option("--sinks", o.convert.window.sinks,
                     "Sink tokens attended exactly (must match the calibration run; with "
                     "--method window, no run is needed)")
          ->capture_default_str();
      app.add_option("--window", o.convert.window.recent,
                     "Recent tokens attended exactly (must match the calibration run)")
          ->capture_default_str();
      app.add_option("--layer-scores", o.convert.layer_scores,
                     "Scores from `oal layer-scores --out FILE`, for --layers auto:K and "
                     "--full-heads auto:M");
      app.add_option("--full-heads", o.convert.full_heads,
                     "KV heads of converted windowed layers kept exact (softmax over every key, "
                     "a KV cache): auto:M, the M that retrieve most (needs --layer-scores from "
                     "`oal layer-scores --retrieval-probes N`), or LAYER:HEAD pairs, e.g. "
                     "14:0,20:2");
      app.add_option("--train", a->train, "Training text file")->required();
      app.add_option("--val", a->val, "Validation text file")->required();
      app.add_option("--train-blocks", o.train_blocks,
                     "Training blocks: A:B half-open (A: to the end) or A-B inclusive")
          ->capture_default_str();
      app.add_option("--val-blocks", o.val_blocks,
                     "Validation blocks: A:B half-open or A-B inclusive")
          ->capture_default_str();
      app.add_option("--steps", o.train.steps, "Optimizer updates")->required();
      app.add_option("--ctx", o.ctx, "Tokens per block")->required();
      app.add_option("--out", a->out, "Run directory (checkpoints, adapters, converted model)")
          ->required();
      app.add_flag("--resume", o.resume, "Continue from the run directory's last checkpoint");
      app.add_flag("--checkpoint-layers", o.checkpoint_layers,
                   "Recompute each layer's activations in the backward: one layer's activation "
                   "memory instead of all (for long --ctx), one more forward per update, the "
                   "same updates");
      app.add_option("--batch", o.train.batch, "Blocks per update")->capture_default_str();
      app.add_option("--lr", o.train.adamw.lr, "Peak learning rate")->capture_default_str();
      app.add_option("--weight-decay", o.train.adamw.weight_decay, "AdamW weight decay")
          ->capture_default_str();
      app.add_option("--warmup", o.train.warmup_fraction, "Warm-up fraction of updates")
          ->capture_default_str();
      app.add_option("--clip", o.train.clip_norm, "Gradient-norm clip")->capture_default_str();
      app.add_option("--eval-every", o.train.eval_every, "Validate and checkpoint every K updates")
          ->capture_default_str();
      app.add_option("--patience", o.train.patience,
                     "Stop when validation has not improved by more than --min-delta for this "
                     "many updates (checked every --eval-every; 0 = run all --steps)")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str();
      app.add_option("--min-delta", o.train.min_delta,
                     "Validation NLL decrease that counts as an improvement for --patience")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str();
      app.add_option("--seed", o.train.seed, "Seed (block order, dropout, adapter init)")
          ->capture_default_str();
      app.add_option("--rank", o.lora.rank, "LoRA rank")->capture_default_str();
      app.add_option("--alpha", o.lora.alpha, "LoRA alpha")->capture_default_str();
      app.add_option("--dropout", o.lora.dropout, "LoRA dropout")->capture_default_str();
      app.add_option(
             "--init", a->init,
             "Kernel parameters: initial = baselines from their own initial values, OAL "
             "and global from calibration (paper App. F); calibrated = all from calibration")
          ->check(CLI::IsMember({"initial", "calibrated"}))
          ->capture_default_str();
      app.add_flag("--freeze-kernel", a->freeze_kernel,
                   "Train LoRA only (kernel parameters fixed)");
      app.add_option("--device", o.device, "cpu | cuda[:N]")->capture_default_str();
      app.add_option("--tokenizer", a->tokenizer, "Tokenizer file (default: beside the model)");
      app.add_option("--nproc", a->nproc,
                     "Data-parallel over N local processes (c10d, Gloo; the --batch blocks of an "
                     "update are split over them); across machines set MASTER_ADDR, MASTER_PORT, "
                     "RANK, WORLD_SIZE instead")
          ->capture_default_str();
      app.add_flag("--quiet", a->quiet, "No progress bar");
      app.add_flag("--json", a->json, "Machine-readable output");
      return [a] { run(*a); };
    }};

}  // namespace
