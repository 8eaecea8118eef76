#include "oal/train/finetune.h"

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
#include "oal/train/update.h"

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
          "{} token ids must be in [0, {}), found [{}, {}]", which, model.config().vocab_size, lo, hi);
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

FinetuneResult finetune(model::Transformer& model, adapt::LoraAdapters& lora,
                        const std::map<std::string, at::Tensor>& kernel_params,
                        const FinetuneData& data, const FinetuneOptions& o, const fs::path& run_dir,
                        bool resume, const ProgressFn& progress, const FinetuneHooks& hooks) {
  check_options(o);
  check_data(model, data);
  // Trainable tensors by name: adapters (PEFT names) then kernel parameters.
  std::map<std::string, at::Tensor> named = lora.named_tensors();
  for (const auto& [n, t] : kernel_params) {
    check(t.defined() && t.is_leaf() && t.requires_grad(), k_op,
          "kernel parameter '{}' must be a leaf tensor with requires_grad", n);
    check(!named.count(n), k_op, "duplicate trainable tensor name '{}'", n);
    named[n] = t;
  }
  std::vector<std::string> names;
  std::vector<at::Tensor> params;
  for (const auto& [n, t] : named) {
    names.push_back(n);
    params.push_back(t);
  }
  const nlohmann::json signature = run_signature(o, data, names);
  AdamW opt(params, o.adamw);
  const LrSchedule sched{o.adamw.lr, o.steps, o.warmup_fraction};
  const at::Device dev = model.device();
  const LossHead head = prepare_for_training(model);

  auto assign = [&](const std::map<std::string, at::Tensor>& values) {
    at::NoGradGuard no_grad;
    check(values.size() == named.size(), k_op, "checkpoint holds {} tensors, expected {}",
          values.size(), named.size());
    for (auto& [n, t] : named) {
      auto it = values.find(n);
      check(it != values.end() && it->second.sizes() == t.sizes(), k_op,
            "checkpoint tensor '{}' missing or of another shape", n);
      t.copy_(it->second.to(t.device(), t.scalar_type()));
    }
  };

  const std::shared_ptr<dist::World> world_ptr = o.world ? o.world : dist::single_process();
  dist::World& world = *world_ptr;
  const bool root = world.rank() == 0;
  FinetuneResult res;
  int64_t step = 0;
  const bool has_ckpt = checkpoint_dir(run_dir, "last").has_value();
  world.barrier();  // every rank looked before rank 0 writes the first checkpoint
  if (resume && has_ckpt) {
    auto c = load_checkpoint(run_dir, "last");
    TrainerState st =
        trainer_state_from_json(c->state, (*checkpoint_dir(run_dir, "last") / "state.json").string());
    check(st.signature == signature, k_op,
          "cannot resume from '{}': it was written with other options or trainable tensors "
          "(checkpoint {}, now {})",
          run_dir.string(), st.signature.dump(), signature.dump());
    assign(c->tensors);
    opt.load_state(c->optimizer_state);
    res.steps_log = std::move(st.steps_log);
    res.val_log = std::move(st.val_log);
    res.best_step = st.best_step;
    res.best_val_nll = st.best_val_nll;
    res.improved_step = st.improved_step;
    res.stopped_early = st.stopped_early;
    step = c->step;
    res.resumed_from = step;
  } else {
    check(!has_ckpt, k_op, "'{}' already holds checkpoints; pass --resume or another --out",
          run_dir.string());
    if (root) fs::create_directories(run_dir);
    lora.set_training(false);
    res.best_val_nll = validation_nll(model, head, data.val, o.batch, world);
    res.best_step = 0;
    res.val_log.push_back({0, res.best_val_nll});
  }

  auto save = [&](int64_t done, bool is_best, double val) {
    if (!root) return;
    Checkpoint c;
    c.step = done;
    c.tensors = named;
    c.optimizer_state = opt.save_state();
    c.state = trainer_state_to_json({signature, res.steps_log, res.val_log, res.best_step,
                                     res.best_val_nll, res.improved_step, res.stopped_early});
    save_checkpoint(run_dir, c, is_best, val, hooks.checkpoint);
  };
  if (!resume || !has_ckpt) save(0, true, res.best_val_nll);

  const auto t0 = std::chrono::steady_clock::now();
  int64_t tokens = 0;
  const int64_t n_train = data.train.size(0);
  for (; step < o.steps && !res.stopped_early; ++step) {
    const double lr = sched.lr(step);
    opt.set_lr(lr);
    reseed_dropout(dev, o.seed, step);
    std::vector<int64_t> idx;
    for (int64_t b = 0; b < o.batch; ++b)
      idx.push_back(block_for_position(step * o.batch + b, n_train, o.seed));
    const at::Tensor all = data.train.index_select(0, at::tensor(idx, at::kLong));
    const at::Tensor blocks = calib::rank_share(all, world).to(dev);
    lora.set_training(true);
    const double targets = double(all.numel() - all.size(0));  // of the whole batch
    const UpdateResult u = run_update(model, head, blocks, targets, params, opt, o.clip_norm, world);
    const double loss_v = u.loss, gn = u.grad_norm;
    tokens += all.numel();
    res.steps_log.push_back({step + 1, loss_v, lr, gn});

    const int64_t done = step + 1;
    if (done % o.eval_every == 0 || done == o.steps) {
      lora.set_training(false);
      const double val = validation_nll(model, head, data.val, o.batch, world);
      res.val_log.push_back({done, val});
      const bool best = val < res.best_val_nll;
      if (val < res.best_val_nll - o.min_delta) res.improved_step = done;
      if (best) {
        res.best_val_nll = val;
        res.best_step = done;
      }
      res.stopped_early =
          o.patience > 0 && done < o.steps && done - res.improved_step >= o.patience;
      save(done, best, val);
      world.barrier();  // rank 0's checkpoint is on disk before any rank reads one
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report(progress, done, o.steps, "updates",
           fmt::format("loss {:.4f} lr {:.2e} tok/s {:.0f}", loss_v, lr,
                       secs > 0 ? double(tokens) / secs : 0.0));
    if (hooks.after_step) hooks.after_step(done);
  }
  res.steps = step;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.tokens_per_second = res.seconds > 0 ? double(tokens) / res.seconds : 0.0;
  lora.set_training(false);
  auto best = load_checkpoint(run_dir, "best");
  check(best.has_value(), k_op, "run '{}' has no best checkpoint", run_dir.string());
  assign(best->tensors);
  return res;
}

}  // namespace oal::train
