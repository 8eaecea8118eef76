#pragma once
// End-to-end conversion and adaptation as the CLI runs them (`oal convert`,
// `oal finetune`, the demo): validate every input before any work, build the hybrid
// model, fine-tune with LoRA + kernel parameters, export.
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

#include "oal/core/progress.h"
#include "oal/model/lora.h"
#include "oal/train/convert.h"
#include "oal/train/finetune.h"

namespace oal::train {

struct ConvertOptions {
  std::string model;                 // source model path
  std::filesystem::path calib;       // calibration run directory (not for "softmax")
  std::string method = "oal";        // oal | global | taylorshift | performer | dijiang | spectraformer | softmax
  std::string layers = "default";    // "default" (model/hybrid.h rule) or an index list ("1-3")
  std::filesystem::path tokenizer;   // empty: found beside the model
  std::filesystem::path out;         // converted directory to write
  KernelInit init = KernelInit::initial;  // baselines from their initial values (App. F)
};

// How the converted layers were chosen and where their parameters start, for printing.
struct ConversionPlan {
  std::vector<int64_t> layers;
  std::string range_rule;       // default_range_rule(), or "explicit: ..." for a user list
  bool from_calibration = true; // starts_from_calibration(method, init)
};

struct ConvertResult {
  std::vector<int64_t> layers;
  std::string method;
  std::filesystem::path out;
  ConversionPlan plan;
};

// The layers and parameter start of a conversion of a `num_layers` model. Throws
// oal::Error for a bad layer spec or init.
ConversionPlan plan_conversion(const ConvertOptions& options, int64_t num_layers);

// Converts without training (the "unadapted converted model").
ConvertResult run_convert(const ConvertOptions& options);

struct FinetuneRunOptions {
  ConvertOptions convert;            // model, calib, method, layers, tokenizer; out = run dir
  std::filesystem::path train_text;  // text files: one token stream each (no BOS)
  std::filesystem::path val_text;
  std::string train_blocks = "all";  // block ranges (text/corpus.h "A:B")
  std::string val_blocks = ":32";    // paper: 32 fixed validation blocks
  int64_t ctx = 0;                   // tokens per block, <= max_position_embeddings
  model::LoraConfig lora;            // 8, 16, 0.05
  FinetuneOptions train;             // steps, lr, ... (App. F.2 defaults)
  bool train_kernel = true;          // false: kernel parameters frozen (LoRA only)
  bool resume = false;
  std::string device = "cpu";        // "cpu" | "cuda" | "cuda:N"
};

struct FinetuneRunResult {
  FinetuneResult train;
  std::vector<int64_t> layers;
  ConversionPlan plan;
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
