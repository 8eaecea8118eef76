#include "oal/train/trainer.h"

#include <ATen/Context.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <mutex>
#include <numeric>

#include "oal/calib/shared_capture.h"
#include "oal/core/error.h"
#include "oal/train/schedule.h"

namespace oal::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* k_op = "finetune";

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void check_data(const model::Transformer& model, const FinetuneData& data) {
  for (const auto* t : {&data.train, &data.val}) {
    const char* which = t == &data.train ? "training" : "validation";
    check(t->defined() && t->dim() == 2 && t->size(0) >= 1, k_op,
          "{} data must be int64 [blocks >= 1, ctx], got {}", which,
          t->defined() ? fmt::format("{}", fmt::join(t->sizes(), "x")) : "nothing");
    check(t->scalar_type() == at::kLong, k_op, "{} blocks must be int64", which);
    const int64_t ctx = t->size(1);
    check(ctx >= 2, k_op, "ctx must be >= 2 tokens, got {}", ctx);
    const int64_t max_pos = model.config().max_position_embeddings;
    check(max_pos <= 0 || ctx <= max_pos, k_op,
          "ctx {} is longer than the model supports (max_position_embeddings {})", ctx, max_pos);
    const int64_t lo = t->min().item<int64_t>(), hi = t->max().item<int64_t>();
    check(lo >= 0 && hi < model.config().vocab_size, k_op,
          "{} token ids must be in [0, {}), found [{}, {}]", which, model.config().vocab_size, lo,
          hi);
  }
  check(data.train.size(1) == data.val.size(1), k_op,
        "training and validation blocks must have the same ctx, got {} and {}",
        data.train.size(1), data.val.size(1));
}

void check_options(const FinetuneOptions& o) {
  check(o.steps >= 1, k_op, "steps must be >= 1, got {}", o.steps);
  check(o.batch >= 1, k_op, "batch must be >= 1, got {}", o.batch);
  check(o.eval_every >= 1, k_op, "eval_every must be >= 1, got {}", o.eval_every);
  check(o.clip_norm > 0, k_op, "clip norm must be > 0, got {}", o.clip_norm);
  check(o.patience >= 0, k_op, "patience must be >= 0 updates (0 = off), got {}", o.patience);
  check(std::isfinite(o.min_delta) && o.min_delta >= 0, k_op,
        "min_delta must be a finite NLL difference >= 0, got {}", o.min_delta);
  LrSchedule{o.adamw.lr, o.steps, o.warmup_fraction}.validate();
}

// The options a resumed run must share with the run that wrote the checkpoint.
nlohmann::json run_signature(const FinetuneOptions& o, const FinetuneData& d,
                             const std::vector<std::string>& names) {
  return {{"steps", o.steps},          {"batch", o.batch},
          {"lr", o.adamw.lr},          {"weight_decay", o.adamw.weight_decay},
          {"beta1", o.adamw.beta1},    {"beta2", o.adamw.beta2},
          {"adam_eps", o.adamw.eps},   {"warmup_fraction", o.warmup_fraction},
          {"clip_norm", o.clip_norm},  {"eval_every", o.eval_every},
          {"patience", o.patience},    {"min_delta", o.min_delta},
          {"seed", o.seed},            {"ctx", d.train.size(1)},
          {"train_blocks", d.train.size(0)}, {"val_blocks", d.val.size(0)},
          {"tensors", names}};
}

void reseed_dropout(at::Device device, uint64_t seed, int64_t step) {
  uint64_t x = seed ^ (0xD1B54A32D192ED03ull * uint64_t(step + 1));
  auto gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(splitmix64(x) >> 1);
}

// Summed NLL of `blocks` [N, ctx] in batches of `batch`, no gradient, fp64 on the CPU.
at::Tensor nll_total(const model::Transformer& model, const LossHead& head,
                     const at::Tensor& blocks, int64_t batch) {
  at::NoGradGuard no_grad;
  const at::Device dev = model.device();
  at::Tensor sum = at::zeros({1}, at::kDouble);
  for (int64_t b = 0; b < blocks.size(0); b += batch) {
    const int64_t n = std::min(batch, blocks.size(0) - b);
    sum += block_nll_sum(model, head, blocks.narrow(0, b, n).to(dev)).to(at::kCPU, at::kDouble);
  }
  return sum;
}

// Mean NLL per target over every rank's share of `blocks`.
double validation_nll(const model::Transformer& model, const LossHead& head,
                      const at::Tensor& blocks, int64_t batch, dist::World& world) {
  check(blocks.dim() == 2 && blocks.size(0) >= 1 && blocks.size(1) >= 2, k_op,
        "validation blocks must be [N >= 1, ctx >= 2]");
  at::Tensor sum = nll_total(model, head, calib::rank_share(blocks, world), batch);
  world.all_reduce_sum(sum);
  const double nll = sum.item<double>() / double(blocks.size(0) * (blocks.size(1) - 1));
  check(std::isfinite(nll), k_op, "validation NLL is not finite ({})", nll);
  return nll;
}

}  // namespace

int64_t block_for_position(int64_t position, int64_t num_blocks, uint64_t seed) {
  check(num_blocks >= 1 && position >= 0, k_op, "need blocks >= 1 and position >= 0");
  const int64_t epoch = position / num_blocks;
  std::vector<int64_t> perm(static_cast<size_t>(num_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + uint64_t(epoch);
  for (int64_t i = num_blocks - 1; i > 0; --i) {
    const auto j = int64_t(splitmix64(x) % uint64_t(i + 1));
    std::swap(perm[size_t(i)], perm[size_t(j)]);
  }
  return perm[size_t(position % num_blocks)];
}

double mean_block_nll(const model::Transformer& model, const at::Tensor& blocks, int64_t batch) {
  return validation_nll(model, loss_head(model), blocks, batch, *dist::single_process());
}

Trainer::Trainer(model::Transformer& model, adapt::LoraAdapters& lora,
                 const std::map<std::string, at::Tensor>& kernel_params,
                 const FinetuneData& data, const FinetuneOptions& options, fs::path run_dir,
                 FinetuneHooks hooks)
    : model_(model), lora_(lora), data_(data), o_(options), run_dir_(std::move(run_dir)),
      hooks_(std::move(hooks)), world_(o_.world ? o_.world : dist::single_process()) {
  check_options(o_);
  check_data(model, data);
  // Trainable tensors by name: adapters (PEFT names) then kernel parameters.
  named_ = lora.named_tensors();
  for (const auto& [n, t] : kernel_params) {
    check(t.defined() && t.is_leaf() && t.requires_grad(), k_op,
          "kernel parameter '{}' must be a leaf tensor with requires_grad", n);
    check(!named_.count(n), k_op, "duplicate trainable tensor name '{}'", n);
    named_[n] = t;
  }
  std::vector<std::string> names;
  for (const auto& [n, t] : named_) {
    names.push_back(n);
    params_.push_back(t);
  }
  signature_ = run_signature(o_, data, names);
  opt_ = std::make_unique<AdamW>(params_, o_.adamw);
  head_ = prepare_for_training(model);
  has_checkpoint_ = checkpoint_dir(run_dir_, "last").has_value();
  world_->barrier();  // every rank looked before rank 0 writes the first checkpoint
}

bool Trainer::resume() {
  check(!started_, k_op, "the run has already started");
  if (!has_checkpoint_) return false;
  auto c = load_checkpoint(run_dir_, "last");
  TrainerState st = trainer_state_from_json(
      c->state, (*checkpoint_dir(run_dir_, "last") / "state.json").string());
  check(st.signature == signature_, k_op,
        "cannot resume from '{}': it was written with other options or trainable tensors "
        "(checkpoint {}, now {})",
        run_dir_.string(), st.signature.dump(), signature_.dump());
  assign(c->tensors);
  opt_->load_state(c->optimizer_state);
  res_.steps_log = std::move(st.steps_log);
  res_.val_log = std::move(st.val_log);
  res_.best_step = st.best_step;
  res_.best_val_nll = st.best_val_nll;
  res_.improved_step = st.improved_step;
  res_.stopped_early = st.stopped_early;
  step_ = res_.steps = res_.resumed_from = c->step;
  started_ = true;
  t0_ = std::chrono::steady_clock::now();
  return true;
}

void Trainer::start() {
  check(!started_, k_op, "the run has already started");
  check(!has_checkpoint_, k_op, "'{}' already holds checkpoints; pass --resume or another --out",
        run_dir_.string());
  if (world_->rank() == 0) fs::create_directories(run_dir_);
  lora_.set_training(false);
  res_.best_val_nll = validation_nll(model_, head_, data_.val, o_.batch, *world_);
  res_.best_step = 0;
  res_.val_log.push_back({0, res_.best_val_nll});
  save(/*is_best=*/true, res_.best_val_nll);
  started_ = true;
  t0_ = std::chrono::steady_clock::now();
}

StepRecord Trainer::step() {
  require_started("step");
  check(!finished(), k_op, "all {} updates are done", o_.steps);
  const double lr = LrSchedule{o_.adamw.lr, o_.steps, o_.warmup_fraction}.lr(step_);
  opt_->set_lr(lr);
  reseed_dropout(model_.device(), o_.seed, step_);
  std::vector<int64_t> idx;
  for (int64_t b = 0; b < o_.batch; ++b)
    idx.push_back(block_for_position(step_ * o_.batch + b, data_.train.size(0), o_.seed));
  const at::Tensor all = data_.train.index_select(0, at::tensor(idx, at::kLong));
  const at::Tensor blocks = calib::rank_share(all, *world_).to(model_.device());
  lora_.set_training(true);
  const double targets = double(all.numel() - all.size(0));  // of the whole batch
  const UpdateResult u =
      run_update(model_, head_, blocks, targets, params_, *opt_, o_.clip_norm, *world_);
  step_ += 1;
  tokens_ += all.numel();
  const StepRecord r{step_, u.loss, lr, u.grad_norm};
  res_.steps_log.push_back(r);
  res_.steps = step_;
  update_clock();
  return r;
}

bool Trainer::validation_due() const {
  return step_ > 0 && (step_ % o_.eval_every == 0 || step_ == o_.steps);
}

double Trainer::evaluate() {
  require_started("evaluate");
  lora_.set_training(false);
  const double val = validation_nll(model_, head_, data_.val, o_.batch, *world_);
  res_.val_log.push_back({step_, val});
  const bool best = val < res_.best_val_nll;
  if (val < res_.best_val_nll - o_.min_delta) res_.improved_step = step_;
  if (best) {
    res_.best_val_nll = val;
    res_.best_step = step_;
  }
  res_.stopped_early =
      o_.patience > 0 && step_ < o_.steps && step_ - res_.improved_step >= o_.patience;
  save(best, val);
  world_->barrier();  // rank 0's checkpoint is on disk before any rank reads one
  update_clock();
  return val;
}

bool Trainer::finished() const { return step_ >= o_.steps || res_.stopped_early; }

void Trainer::load_best() {
  lora_.set_training(false);
  auto best = load_checkpoint(run_dir_, "best");
  check(best.has_value(), k_op, "run '{}' has no best checkpoint", run_dir_.string());
  assign(best->tensors);
}

void Trainer::save(bool is_best, double val) {
  if (world_->rank() != 0) return;
  Checkpoint c;
  c.step = step_;
  c.tensors = named_;
  c.optimizer_state = opt_->save_state();
  c.state = trainer_state_to_json({signature_, res_.steps_log, res_.val_log, res_.best_step,
                                   res_.best_val_nll, res_.improved_step, res_.stopped_early});
  save_checkpoint(run_dir_, c, is_best, val, hooks_.checkpoint);
}

void Trainer::assign(const std::map<std::string, at::Tensor>& values) {
  at::NoGradGuard no_grad;
  check(values.size() == named_.size(), k_op, "checkpoint holds {} tensors, expected {}",
        values.size(), named_.size());
  for (auto& [n, t] : named_) {
    auto it = values.find(n);
    check(it != values.end() && it->second.sizes() == t.sizes(), k_op,
          "checkpoint tensor '{}' missing or of another shape", n);
    t.copy_(it->second.to(t.device(), t.scalar_type()));
  }
}

void Trainer::update_clock() {
  res_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  res_.tokens_per_second = res_.seconds > 0 ? double(tokens_) / res_.seconds : 0.0;
}

void Trainer::require_started(const char* what) const {
  check(started_, k_op, "{} before start() or resume()", what);
}

FinetuneResult finetune(model::Transformer& model, adapt::LoraAdapters& lora,
                        const std::map<std::string, at::Tensor>& kernel_params,
                        const FinetuneData& data, const FinetuneOptions& o, const fs::path& run_dir,
                        bool resume, const ProgressFn& progress, const FinetuneHooks& hooks) {
  Trainer t(model, lora, kernel_params, data, o, run_dir, hooks);
  if (!(resume && t.resume())) t.start();
  while (!t.finished()) {
    const StepRecord r = t.step();
    if (t.validation_due()) t.evaluate();
    report(progress, r.step, o.steps, "updates",
           fmt::format("loss {:.4f} lr {:.2e} tok/s {:.0f}", r.loss, r.lr,
                       t.result().tokens_per_second));
    if (hooks.after_step) hooks.after_step(r.step);
  }
  t.load_best();
  return t.result();
}

}  // namespace oal::train
