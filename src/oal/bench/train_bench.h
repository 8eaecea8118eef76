#pragma once
// `oal bench --model M --train`: what one LoRA update of a whole model costs, side by
// side for the model variants of model_variants.h (the original, every layer OAL, the
// hybrid; windowed when a window is set) at several block lengths — training tokens/s,
// the forward / backward / optimizer split and peak memory. The update is the trainer's
// own (train/update.h run_update: chunked loss, autograd, AdamW), on one block of seeded
// random token ids per length, with LoRA (rank/alpha/dropout as `oal finetune`) on
// q/k/v/o of every layer and, when `train_kernel`, the converted layers' kernel
// parameters (L, and c_h beside a window; synthetic values) trained with it, as finetune
// does by default.
// Untimed warm-up updates, then timed repeats; medians. Peak memory: the process's
// resident high-water mark over a row's updates, warm-up included (bench_measure.h
// MemProbe; the first update allocates what the later ones reuse).
#include <cstdint>
#include <string>
#include <vector>

#include "oal/adapt/lora.h"
#include "oal/attention/oal/chunked_attention.h"
#include "oal/attention/windowed/window.h"
#include "oal/core/machine.h"
#include "oal/core/progress.h"
#include "oal/model/transformer.h"

namespace oal::bench {

struct TrainBenchConfig {
  std::vector<std::string> variants = {"softmax", "hybrid"};
  std::string hybrid_layers = "default";  // adapt/hybrid.h range syntax
  attn::Window window{};                  // set: the converted layers are windowed
  int64_t chunk = 64, groups = 3;         // OAL layers
  // From this many tokens the OAL layers train through the linear-time chunked form.
  int64_t chunked_train_from = attn::k_default_chunked_train_from;
  // Each layer's activations recomputed in the backward (TransformerOptions).
  bool checkpoint_layers = false;
  std::vector<int64_t> contexts = {512, 1024, 2048, 4096};  // tokens per block
  int repeats = 3, warmup = 1;
  adapt::LoraConfig lora{};
  bool train_kernel = true;
  uint64_t seed = 0;
};

struct TrainBenchRow {
  std::string variant, layers;  // layers: the converted ones, e.g. "3-26 of 30"
  int64_t kernel_parameters = 0;
  int64_t ctx = 0;
  int samples = 0;
  double ms_median = 0, ms_min = 0, ms_max = 0;  // whole update
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0;  // medians of each part
  double tokens_per_s = 0;                         // ctx / median update
  int64_t peak_rss_bytes = 0, peak_extra_bytes = 0;
};

struct TrainBenchReport {
  MachineInfo machine;
  std::string isa, model;
  int64_t lora_parameters = 0;
  bool memory_reset_ok = true;
  TrainBenchConfig config;
  std::vector<TrainBenchRow> rows;
};

// Times updates of every variant of `model` (adapters are attached for the run and
// detached after; every layer is softmax again at the end). Throws
// oal::Error("[bench] ...") for an unknown variant or range, contexts < 2 or beyond
// max_position_embeddings, repeats < 1, warmup < 0, groups beyond head_dim.
TrainBenchReport run_train_bench(model::Transformer& model, const std::string& description,
                                 const TrainBenchConfig& config, const ProgressFn& progress = {});

std::string train_bench_markdown(const TrainBenchReport& report);
std::string train_bench_json(const TrainBenchReport& report);

}  // namespace oal::bench
