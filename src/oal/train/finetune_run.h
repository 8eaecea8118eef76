#pragma once
// End-to-end adaptation as `oal finetune` and the demo run it: validate every input
// before any work, build the hybrid model (convert/convert_run.h), fine-tune with LoRA +
// kernel parameters, export.
//
// `oal finetune` writes into `out`:
//   checkpoints/, last.json, best.json   (checkpoint.h; --resume continues from last)
//   adapter/adapter_model.safetensors + adapter_config.json   (PEFT-named LoRA, best)
//   kernel_params.safetensors            trained kernel parameters (best), when any
//   model/                               converted directory with LoRA merged (convert.h)
//   finetune.json                        options, validation curve, result
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "oal/adapt/lora.h"
#include "oal/convert/convert.h"
#include "oal/convert/convert_run.h"
#include "oal/core/progress.h"
#include "oal/train/trainer.h"

namespace oal::train {

struct FinetuneRunOptions {
  convert::ConvertOptions convert;   // model, calib, method, layers, tokenizer; out = run dir
  std::filesystem::path train_text;  // text files: one token stream each (no BOS)
  std::filesystem::path val_text;
  std::string train_blocks = "all";  // block ranges (text/corpus.h "A:B")
  std::string val_blocks = ":32";    // paper: 32 fixed validation blocks; when train_text and
                                     // val_text are one file the ranges must not overlap
  int64_t ctx = 0;                   // tokens per block, <= max_position_embeddings
  adapt::LoraConfig lora;            // 8, 16, 0.05
  FinetuneOptions train;             // steps, lr, ... (App. F.2 defaults)
  bool train_kernel = true;          // false: kernel parameters frozen (LoRA only)
  // Each layer's activations recomputed in the backward (model/layer_checkpoint.h):
  // memory of one layer's activations instead of all, one more forward per update; the
  // same updates (dropout masks replayed).
  bool checkpoint_layers = false;
  bool resume = false;
  std::string device = "cpu";        // "cpu" | "cuda" | "cuda:N"
};

struct FinetuneRunResult {
  FinetuneResult train;
  std::vector<int64_t> layers;
  convert::ConversionPlan plan;
  int64_t lora_parameters = 0;
  int64_t kernel_parameters = 0;
  int64_t train_blocks = 0, val_blocks = 0;
  std::filesystem::path model_dir;   // the exported converted model
};

// Errors (oal::Error) before any update: missing files, ctx out of range, layer range
// out of bounds, a calibration run from another model or without the method, text too
// short for one block, bad options.
FinetuneRunResult run_finetune(const FinetuneRunOptions& options, const ProgressFn& progress = {},
                               const FinetuneHooks& hooks = {});

}  // namespace oal::train
