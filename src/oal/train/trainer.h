#pragma once
// LoRA fine-tuning of a (hybrid) model with the kernel parameters trained jointly
// (paper App. F.2): next-token NLL on fixed-length blocks, AdamW (lr 5e-4, wd 0.01,
// betas 0.9/0.999, eps 1e-8), linear warm-up over 5% then cosine decay, grad-norm clip
// 1.0, validation NLL every K updates with the best checkpoint kept, checkpoints that
// survive interruption and a resume that continues exactly where the run stopped.
//
// Determinism: block order is a seeded permutation per epoch, dropout is reseeded from
// (seed, update) before every update, so an interrupted and resumed run performs the
// same updates as an uninterrupted one.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "oal/adapt/lora.h"
#include "oal/core/progress.h"
#include "oal/dist/world.h"
#include "oal/model/transformer.h"
#include "oal/train/checkpoint.h"
#include "oal/train/optimizer.h"
#include "oal/train/trainer_state.h"
#include "oal/train/update.h"

namespace oal::train {

struct FinetuneOptions {
  int64_t steps = 0;             // optimizer updates, >= 1
  int64_t batch = 1;             // blocks per update (no gradient accumulation)
  AdamWOptions adamw;            // lr is the peak learning rate
  double warmup_fraction = 0.05;
  double clip_norm = 1.0;
  int64_t eval_every = 128;      // validation + checkpoint every K updates (and at the end)
  // Early stopping (the calibration's rule, paper App. F.1, applied to LoRA): stop at a
  // validation when the last update that lowered validation NLL by more than
  // `min_delta` below the best so far is `patience` or more updates back. 0 = run all
  // `steps`. The best checkpoint is still any strictly lower validation NLL.
  int64_t patience = 0;
  double min_delta = 0;
  uint64_t seed = 42;
  // Data parallel (DDP semantics) over the processes of a run (dist/world.h); null = this
  // process alone. Every rank holds the whole model and calls finetune() with the same
  // arguments; each update's `batch` blocks are dealt round-robin to the ranks, the
  // gradients summed over ranks (each rank's loss is its share of the global mean), so
  // an update equals the single-process one up to summation order (and dropout masks,
  // which are drawn per rank). Validation blocks are split likewise. Rank 0 writes the
  // checkpoints; every rank reads them (a resume may use any number of ranks).
  std::shared_ptr<dist::World> world;
};

// Token blocks, int64 [N, ctx] on any device (moved to the model's device per update).
struct FinetuneData {
  at::Tensor train;  // N >= 1 blocks
  at::Tensor val;    // M >= 1 blocks, same ctx
};

struct FinetuneResult {
  int64_t steps = 0;             // updates completed
  int64_t resumed_from = -1;     // step of the checkpoint resumed from, -1 if none
  int64_t best_step = 0;
  double best_val_nll = 0;
  int64_t improved_step = 0;     // last update that improved by more than min_delta
  bool stopped_early = false;    // patience ran out before `steps`
  std::vector<StepRecord> steps_log;
  std::vector<ValRecord> val_log;  // includes step 0 (the unadapted model)
  double seconds = 0;              // wall time of this invocation's updates
  double tokens_per_second = 0;    // training tokens per second in this invocation
};

// For tests: `after_step` is called after every completed update (after its checkpoint
// when one is due); throwing from it simulates an interruption between updates.
// `checkpoint` is passed to save_checkpoint to simulate a crash in the middle of a save.
struct FinetuneHooks {
  std::function<void(int64_t step)> after_step;
  CheckpointFaultHook checkpoint;
};

// One LoRA run, update by update: what finetune() drives, and what a caller that wants
// its own loop (another schedule of validations, a notebook) drives by hand:
//
//   Trainer t(model, lora, kernel_params, data, options, run_dir);
//   if (!(resume && t.resume())) t.start();
//   while (!t.finished()) { t.step(); if (t.validation_due()) t.evaluate(); }
//   t.load_best();
//
// Trains lora.parameters() and `kernel_params` (name -> leaf tensor with requires_grad;
// may be empty) on data.train, validating on data.val, checkpointing into `run_dir`. The
// constructor checks the options and data and raises oal::Error("[finetune] ...") before
// any update for: steps < 1, batch < 1, patience < 0, min_delta < 0, empty data, ctx < 2,
// ctx beyond max_position_embeddings, token ids outside the vocabulary, mismatched ctx
// between train and val, a kernel parameter that is not a trainable leaf. model, lora,
// the kernel parameters and data must outlive the trainer (it keeps references).
class Trainer {
 public:
  Trainer(model::Transformer& model, adapt::LoraAdapters& lora,
          const std::map<std::string, at::Tensor>& kernel_params, const FinetuneData& data,
          const FinetuneOptions& options, std::filesystem::path run_dir,
          FinetuneHooks hooks = {});

  // Continues from run_dir's last checkpoint, which must come from the same trainable
  // tensors and options (else an error); false (nothing done) when there is none.
  bool resume();
  // A fresh run: the unadapted model's validation NLL is step 0 and checkpoint 0. A
  // run_dir that already holds checkpoints is an error (resume, or choose another).
  void start();
  // One optimizer update on the next `batch` blocks; its record.
  StepRecord step();
  // After the update just taken: validation and a checkpoint are due (every eval_every
  // updates and after the last).
  bool validation_due() const;
  // Validation NLL of the model now: logged, best and early stopping updated, and a
  // checkpoint written (rank 0), which every rank waits for.
  double evaluate();
  // All `steps` updates done, or stopped early (patience ran out).
  bool finished() const;
  // Loads the best checkpoint's tensors into the model (adapters in eval mode).
  void load_best();

  // Updates completed, logs, best, early stopping; seconds and tokens/s of this
  // invocation's updates.
  const FinetuneResult& result() const { return res_; }

 private:
  void save(bool is_best, double val);
  void assign(const std::map<std::string, at::Tensor>& values);
  void require_started(const char* what) const;
  // result().seconds and tokens_per_second: wall time since start() / resume(), its
  // validations included, as the run's own rate.
  void update_clock();

  model::Transformer& model_;
  adapt::LoraAdapters& lora_;
  const FinetuneData& data_;
  FinetuneOptions o_;
  std::filesystem::path run_dir_;
  FinetuneHooks hooks_;
  std::shared_ptr<dist::World> world_;
  std::map<std::string, at::Tensor> named_;  // trainable tensors: adapters, then kernels
  std::vector<at::Tensor> params_;
  nlohmann::json signature_;
  std::unique_ptr<AdamW> opt_;
  LossHead head_;
  bool has_checkpoint_ = false, started_ = false;
  int64_t step_ = 0, tokens_ = 0;
  std::chrono::steady_clock::time_point t0_;
  FinetuneResult res_;
};

// The whole run as Trainer's comment shows, with progress reports and the hooks. With
// `resume`, continues from run_dir's last checkpoint (or starts when there is none); a
// resumed run that had stopped early returns at once. On return the model holds the
// best checkpoint's tensors. Progress: (updates done, steps, "updates",
// "loss x lr y tok/s z").
FinetuneResult finetune(model::Transformer& model, adapt::LoraAdapters& lora,
                        const std::map<std::string, at::Tensor>& kernel_params,
                        const FinetuneData& data, const FinetuneOptions& options,
                        const std::filesystem::path& run_dir, bool resume,
                        const ProgressFn& progress = {}, const FinetuneHooks& hooks = {});

// Mean next-token NLL per target over blocks [N, ctx] (no grad, adapters in eval mode),
// `batch` blocks per forward.
double mean_block_nll(const model::Transformer& model, const at::Tensor& blocks, int64_t batch = 1);

// Deterministic block order: position i of the training stream (i = update·batch + b)
// reads block order(i) of N, a Fisher–Yates permutation per epoch seeded by (seed, epoch).
int64_t block_for_position(int64_t position, int64_t num_blocks, uint64_t seed);

}  // namespace oal::train
