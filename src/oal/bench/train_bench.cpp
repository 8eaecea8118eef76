#include "oal/bench/train_bench.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "oal/bench/bench_measure.h"
#include "oal/bench/model_variants.h"
#include "oal/convert/convert.h"
#include "oal/core/error.h"
#include "oal/dist/world.h"
#include "oal/simd/isa.h"
#include "oal/train/optimizer.h"
#include "oal/train/update.h"

namespace oal::bench {
namespace {

constexpr const char* k_op = "bench";

void check_config(const TrainBenchConfig& c, const model::ModelConfig& m) {
  check(!c.contexts.empty(), k_op, "--train: no block lengths given");
  for (int64_t n : c.contexts)
    check(n >= 2 && (m.max_position_embeddings <= 0 || n <= m.max_position_embeddings), k_op,
          "--train: block length {} must be in [2, {}] (the model's max_position_embeddings)", n,
          m.max_position_embeddings);
  check(c.repeats >= 1 && c.warmup >= 0, k_op,
        "--train: need repeats >= 1 and warmup >= 0, got {} and {}", c.repeats, c.warmup);
  c.lora.validate();
  check(c.chunk >= 1, k_op, "--train: chunk must be >= 1, got {}", c.chunk);
  check(c.chunked_train_from >= 1, k_op, "--chunked-train-from must be >= 1, got {}",
        c.chunked_train_from);
  check_variant_groups(c.groups, m.head_dim);
  c.window.validate(k_op);
}

double median_of(std::vector<double> v) { return summarize(std::move(v)).median; }

// The rows of one variant: warm-up and timed updates per block length.
void time_variant(const model::Transformer& model, const train::LossHead& head,
                  std::vector<at::Tensor> params, const TrainBenchConfig& cfg,
                  TrainBenchRow proto, TrainBenchReport& rep, const std::function<void()>& tick) {
  train::AdamW opt(params);
  const std::shared_ptr<dist::World> world = dist::single_process();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(cfg.seed);
  for (int64_t n : cfg.contexts) {
    const at::Tensor block =
        at::randint(model.config().vocab_size, {1, n}, gen, at::kLong).to(model.device());
    std::vector<double> ms, fwd, bwd, optim;
    release_freed_memory();  // a previous row's freed pages do not count as this one's peak
    MemProbe probe;  // from before the first update: later ones reuse its freed pages
    probe.start();
    for (int r = 0; r < cfg.warmup + cfg.repeats; ++r) {
      const auto t0 = BenchClock::now();
      const train::UpdateResult u =
          train::run_update(model, head, block, double(n - 1), params, opt, 1.0, *world);
      const double t = ms_since(t0);
      if (r >= cfg.warmup) {
        ms.push_back(t);
        fwd.push_back(u.forward_ms);
        bwd.push_back(u.backward_ms);
        optim.push_back(u.optimizer_ms);
      }
      tick();
    }
    TrainBenchRow row = proto;
    row.ctx = n;
    const Timing t = summarize(ms);
    row.samples = t.samples;
    row.ms_median = t.median;
    row.ms_min = t.min;
    row.ms_max = t.max;
    row.forward_ms = median_of(fwd);
    row.backward_ms = median_of(bwd);
    row.optimizer_ms = median_of(optim);
    row.tokens_per_s = 1000.0 * double(n) / t.median;
    row.peak_rss_bytes = probe.peak_bytes();
    row.peak_extra_bytes = probe.extra_bytes();
    rep.memory_reset_ok = rep.memory_reset_ok && probe.reset_ok();
    rep.rows.push_back(row);
  }
}

}  // namespace

TrainBenchReport run_train_bench(model::Transformer& model, const std::string& description,
                                 const TrainBenchConfig& cfg, const ProgressFn& progress) {
  check_config(cfg, model.config());
  std::vector<std::vector<int64_t>> layers;
  for (const auto& v : cfg.variants)  // all ranges checked before anything is timed
    layers.push_back(variant_layers(v, cfg.hybrid_layers, model.num_layers()));
  TrainBenchReport rep;
  rep.machine = machine_info();
  rep.isa = simd::target_name(simd::active_target());
  rep.model = description;
  rep.config = cfg;
  const train::LossHead head = train::prepare_for_training(model);
  const VariantSetup setup{cfg.chunk, cfg.groups, cfg.window, cfg.seed, cfg.train_kernel,
                           cfg.chunked_train_from};
  const int64_t total = static_cast<int64_t>(cfg.variants.size() * cfg.contexts.size()) *
                        (cfg.warmup + cfg.repeats);
  int64_t done = 0;
  auto lora = adapt::LoraAdapters::attach(model, cfg.lora, cfg.seed);
  rep.lora_parameters = lora.num_parameters();
  lora.set_training(true);
  try {
    for (size_t i = 0; i < cfg.variants.size(); ++i) {
      apply_variant(model, layers[i], setup);
      TrainBenchRow proto;
      proto.variant = cfg.variants[i];
      proto.layers = describe_layers(layers[i], model.num_layers());
      std::vector<at::Tensor> params = lora.parameters();
      for (const auto& [name, p] : convert::kernel_parameters(model, layers[i])) {
        params.push_back(p);
        proto.kernel_parameters += p.numel();
      }
      time_variant(model, head, std::move(params), cfg, proto, rep, [&] {
        ++done;
        report(progress, done, total, "updates", fmt::format("{}", cfg.variants[i]));
      });
    }
  } catch (...) {
    adapt::LoraAdapters::detach(model);
    apply_variant(model, {}, setup);
    throw;
  }
  adapt::LoraAdapters::detach(model);
  apply_variant(model, {}, setup);
  return rep;
}

std::string train_bench_markdown(const TrainBenchReport& r) {
  std::string out = fmt::format(
      "# oal bench --train\n\nmodel: {}\nmachine: {} ({} logical cores, {} threads), kernels "
      "{}, BLAS {}\nLoRA rank {} alpha {} dropout {} on q/k/v/o ({:.2f}M parameters); "
      "converted layers: OAL{} with synthetic kernels, {}; the chunked training form from {} "
      "tokens{}\n\n",
      r.model, r.machine.cpu, r.machine.logical_cores, r.machine.threads, r.isa, r.machine.blas,
      r.config.lora.rank, r.config.lora.alpha, r.config.lora.dropout, r.lora_parameters / 1e6,
      r.config.window.none() ? "" : " beside " + r.config.window.describe(),
      r.config.train_kernel ? "kernel parameters trained" : "kernel parameters frozen",
      r.config.chunked_train_from, r.config.checkpoint_layers ? "; layers checkpointed" : "");
  out +=
      "| variant | converted | kernel params | ctx | update ms (median) | min–max | forward ms | "
      "backward ms | optimizer ms | tokens/s | peak RSS MiB | +MiB |\n";
  out += "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& x : r.rows)
    out += fmt::format(
        "| {} | {} | {} | {} | {:.0f} | {:.0f}–{:.0f} | {:.0f} | {:.0f} | {:.1f} | {:.1f} | {:.0f} "
        "| {:.0f} |\n",
        x.variant, x.layers, x.kernel_parameters, x.ctx, x.ms_median, x.ms_min, x.ms_max,
        x.forward_ms, x.backward_ms, x.optimizer_ms, x.tokens_per_s, x.peak_rss_bytes / 1048576.0,
        x.peak_extra_bytes / 1048576.0);
  if (!r.memory_reset_ok)
    out += "\nPeak RSS could not be reset between rows: peaks are process maxima so far.\n";
  return out;
}

std::string train_bench_json(const TrainBenchReport& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& x : r.rows)
    rows.push_back({{"variant", x.variant},
                    {"converted", x.layers},
                    {"kernel_parameters", x.kernel_parameters},
                    {"ctx", x.ctx},
                    {"samples", x.samples},
                    {"ms_median", x.ms_median},
                    {"ms_min", x.ms_min},
                    {"ms_max", x.ms_max},
                    {"forward_ms", x.forward_ms},
                    {"backward_ms", x.backward_ms},
                    {"optimizer_ms", x.optimizer_ms},
                    {"tokens_per_s", x.tokens_per_s},
                    {"peak_rss_bytes", x.peak_rss_bytes},
                    {"peak_extra_bytes", x.peak_extra_bytes}});
  nlohmann::json j = {
      {"model", r.model},
      {"window", r.config.window.none() ? "none" : r.config.window.describe()},
      {"machine", {{"cpu", r.machine.cpu}, {"logical_cores", r.machine.logical_cores},
                   {"threads", r.machine.threads}, {"blas", r.machine.blas},
                   {"commit", r.machine.commit}}},
      {"kernels_isa", r.isa},
      {"lora", {{"rank", r.config.lora.rank}, {"alpha", r.config.lora.alpha},
                {"dropout", r.config.lora.dropout}, {"parameters", r.lora_parameters}}},
      {"train_kernel", r.config.train_kernel},
      {"chunked_train_from", r.config.chunked_train_from},
      {"checkpoint_layers", r.config.checkpoint_layers},
      {"repeats", r.config.repeats},
      {"warmup", r.config.warmup},
      {"memory_reset_ok", r.memory_reset_ok},
      {"rows", rows}};
  return j.dump(2) + "\n";
}

}  // namespace oal::bench
