#pragma once
// Training checkpoints that survive interruption. Layout under a run directory:
//
//   checkpoints/step-000128/trainable.safetensors   trainable tensors by name (fp32/fp64)
//                           optimizer.bin           AdamW state (AdamW::save_state bytes)
//                           state.json              step, seed, best validation, history
//   last.json   {"dir": "checkpoints/step-000128", "step": 128}   newest complete one
//   best.json   {"dir": ..., "step": ..., "val_nll": ...}          lowest validation NLL
//
// A checkpoint is written into "step-N.tmp/", renamed to "step-N/" only when all three
// files are complete, and only then do the pointer files (written atomically) name it.
// A run killed at any moment therefore leaves last.json naming a complete checkpoint
// (or no last.json at all); stale *.tmp directories are removed by the next save.
// Checkpoints named by neither pointer are deleted after each save.
#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace oal::train {

struct Checkpoint {
  int64_t step = 0;                            // updates completed
  std::map<std::string, at::Tensor> tensors;   // trainable tensors (any device; saved from CPU)
  std::string optimizer_state;                 // opaque bytes
  nlohmann::json state = nlohmann::json::object();  // trainer bookkeeping
};

// Called after each stage of a save ("tensors", "optimizer", "state", "renamed",
// "last", "best"); tests throw from it to simulate a crash mid-write.
using CheckpointFaultHook = std::function<void(std::string_view stage)>;

// Saves `ckpt` as step-<ckpt.step>, points last.json at it and, when `is_best`,
// best.json too (with `val_nll`). Throws oal::Error("[checkpoint] ...") on I/O errors.
void save_checkpoint(const std::filesystem::path& run_dir, const Checkpoint& ckpt, bool is_best,
                     double val_nll, const CheckpointFaultHook& hook = {});

// Loads the checkpoint a pointer names ("last" or "best"); nullopt when the pointer file
// does not exist. Errors when the pointer or the files it names are unreadable.
std::optional<Checkpoint> load_checkpoint(const std::filesystem::path& run_dir,
                                          std::string_view which = "last");

// Directory of the checkpoint a pointer names, nullopt when absent.
std::optional<std::filesystem::path> checkpoint_dir(const std::filesystem::path& run_dir,
                                                    std::string_view which);

}  // namespace oal::train
