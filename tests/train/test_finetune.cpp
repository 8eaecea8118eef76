// The fine-tuning loop on a tiny random model: it learns, an interrupted run (between
// updates or in the middle of a checkpoint save) resumes to exactly the uninterrupted
// result, and bad input fails before any update.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "oal/attention/oal/quadratic_attention.h"
#include "oal/core/error.h"
#include "oal/train/trainer.h"
#include "common/tiny_model.h"

namespace {

namespace fs = std::filesystem;
using namespace oal;

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("oal_ft_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

// A hybrid tiny model: layer 1 runs a trainable OAL kernel.
struct HybridRun {
  model::Transformer net;
  adapt::LoraAdapters lora;
  std::map<std::string, at::Tensor> kernel;
  HybridRun()
      : net(test::tiny_weights()), lora(adapt::LoraAdapters::attach(net, {4, 8, 0.05}, 11)) {
    auto m = std::make_shared<attn::QuadraticAttention>(attn::QuadraticAttention::from_kernels(
        {attn::QuadraticKernel::taylor({{0, 1, 2, 3, 4, 5}, {6, 7}}),
         attn::QuadraticKernel::taylor(attn::QuadraticKernel::single_group(8))},
        {}, true, at::kDouble));
    net.set_attention(1, m);
    kernel["attention.layers.1.L"] = m->parameters().at(0);
  }
};

train::FinetuneData data() { return {test::tiny_blocks(8, 16, 1), test::tiny_blocks(2, 16, 2)}; }

train::FinetuneOptions options() {
  train::FinetuneOptions o;
  o.steps = 6;
  o.eval_every = 2;
  o.adamw.lr = 5e-3;
  return o;
}

TEST(Finetune, LearnsAndKeepsBestCheckpoint) {
  auto dir = fresh_dir("learn");
  HybridRun s;
  auto o = options();
  o.steps = 20;
  o.eval_every = 5;
  auto r = train::finetune(s.net, s.lora, s.kernel, data(), o, dir, false);
  ASSERT_EQ(r.val_log.size(), 5u);  // steps 0, 5, 10, 15, 20
  EXPECT_LT(r.best_val_nll, r.val_log.front().nll);
  EXPECT_NE(r.best_step, 0);
  // The model now holds the best checkpoint: its validation NLL is the best one (same
  // computation, same order: equal to rounding of repeated identical forwards).
  EXPECT_NEAR(train::mean_block_nll(s.net, data().val), r.best_val_nll, 1e-9);
  EXPECT_EQ(train::load_checkpoint(dir, "best")->step, r.best_step);
  fs::remove_all(dir);
}

TEST(Trainer, DrivenByHandIsTheSameRunAsFinetune) {
  // finetune() is a loop over Trainer; a caller's own loop (here: one extra validation
  // at update 3, outside the schedule) takes the same updates, so the weights after the
  // last update are the same to the bit, and its validation at 2, 4, 6 equal finetune's.
  auto ref_dir = fresh_dir("trainer_ref"), dir = fresh_dir("trainer_hand");
  HybridRun ref_run, hand_run;
  const train::FinetuneData d = data();
  const auto ref = train::finetune(ref_run.net, ref_run.lora, ref_run.kernel, d, options(),
                                   ref_dir, false);
  train::Trainer t(hand_run.net, hand_run.lora, hand_run.kernel, d, options(), dir);
  EXPECT_FALSE(t.resume());  // nothing to resume in a fresh directory
  EXPECT_THROW(t.step(), Error);  // before start()
  t.start();
  while (!t.finished()) {
    const train::StepRecord r = t.step();
    EXPECT_EQ(r.step, t.result().steps);
    if (t.validation_due() || r.step == 3) t.evaluate();
  }
  EXPECT_THROW(t.step(), Error);  // all updates done
  ASSERT_EQ(t.result().val_log.size(), ref.val_log.size() + 1);
  for (const auto& v : ref.val_log) {
    const auto it = std::find_if(t.result().val_log.begin(), t.result().val_log.end(),
                                 [&](const train::ValRecord& h) { return h.step == v.step; });
    ASSERT_NE(it, t.result().val_log.end()) << "step " << v.step;
    EXPECT_EQ(it->nll, v.nll) << "step " << v.step;
  }
  const auto a = train::load_checkpoint(ref_dir, "last"), b = train::load_checkpoint(dir, "last");
  for (const auto& [name, tensor] : a->tensors) EXPECT_TRUE(at::equal(tensor, b->tensors.at(name))) << name;
  fs::remove_all(ref_dir);
  fs::remove_all(dir);
}

TEST(Finetune, ResumeAfterInterruptionReproducesUninterruptedRun) {
  auto ref_dir = fresh_dir("ref");
  {
    HybridRun s;
    train::finetune(s.net, s.lora, s.kernel, data(), options(), ref_dir, false);
  }
  const auto ref = train::load_checkpoint(ref_dir, "last");
  ASSERT_EQ(ref->step, 6);

  // (a) killed between updates 3 and 4 (last checkpoint: step 2);
  // (b) killed while writing the step-4 checkpoint (last checkpoint: step 2).
  for (int scenario = 0; scenario < 2; ++scenario) {
    auto dir = fresh_dir("resume" + std::to_string(scenario));
    {
      HybridRun s;
      train::FinetuneHooks h;
      if (scenario == 0)
        h.after_step = [](int64_t step) {
          if (step == 3) throw std::runtime_error("interrupted");
        };
      else
        h.checkpoint = [](std::string_view stage) {
          static int saves = 0;
          if (stage == "optimizer" && ++saves == 3) throw std::runtime_error("killed mid-write");
        };
      EXPECT_THROW(train::finetune(s.net, s.lora, s.kernel, data(), options(), dir, false, {}, h),
                   std::runtime_error);
    }
    ASSERT_EQ(train::load_checkpoint(dir, "last")->step, 2) << scenario;
    {
      HybridRun s;  // a fresh process: new model, adapters re-initialised, then restored
      auto r = train::finetune(s.net, s.lora, s.kernel, data(), options(), dir, true);
      EXPECT_EQ(r.resumed_from, 2);
    }
    const auto got = train::load_checkpoint(dir, "last");
    ASSERT_EQ(got->step, 6);
    ASSERT_EQ(got->tensors.size(), ref->tensors.size());
    for (const auto& [n, t] : ref->tensors) EXPECT_TRUE(at::equal(got->tensors.at(n), t)) << n;
    EXPECT_EQ(got->state["history"], ref->state["history"]);
    fs::remove_all(dir);
  }
  fs::remove_all(ref_dir);
}

TEST(Finetune, BadInputFailsBeforeAnyUpdate) {
  HybridRun s;
  auto dir = fresh_dir("bad");
  auto d = data();
  auto o = options();
  train::FinetuneData long_ctx{test::tiny_blocks(2, 65, 1), test::tiny_blocks(1, 65, 2)};
  EXPECT_THROW(train::finetune(s.net, s.lora, s.kernel, long_ctx, o, dir, false), Error);
  train::FinetuneData bad_ids{d.train + 100, d.val};
  EXPECT_THROW(train::finetune(s.net, s.lora, s.kernel, bad_ids, o, dir, false), Error);
  train::FinetuneData mismatch{d.train, test::tiny_blocks(1, 8, 2)};
  EXPECT_THROW(train::finetune(s.net, s.lora, s.kernel, mismatch, o, dir, false), Error);
  o.steps = 0;
  EXPECT_THROW(train::finetune(s.net, s.lora, s.kernel, d, o, dir, false), Error);
  o = options();
  o.patience = -1;
  EXPECT_THROW(train::finetune(s.net, s.lora, s.kernel, d, o, dir, false), Error);
  o = options();
  o.min_delta = std::nan("");
  EXPECT_THROW(train::finetune(s.net, s.lora, s.kernel, d, o, dir, false), Error);
  EXPECT_FALSE(fs::exists(dir / "last.json"));  // nothing was written

  o = options();
  o.steps = 2;
  train::finetune(s.net, s.lora, s.kernel, d, o, dir, false);
  // Existing checkpoints without --resume, or a resume with other options: refused.
  EXPECT_THROW(train::finetune(s.net, s.lora, s.kernel, d, o, dir, false), Error);
  o.adamw.lr = 1e-3;
  EXPECT_THROW(train::finetune(s.net, s.lora, s.kernel, d, o, dir, true), Error);
  fs::remove_all(dir);
}

// Early stopping: with a min_delta no update can beat, the run stops at the first
// validation `patience` updates after the start, keeps the best checkpoint, and a resume
// of the stopped run does no further update. With patience beyond the run it runs all.
TEST(Finetune, EarlyStoppingStopsAfterPatienceWithoutImprovement) {
  auto dir = fresh_dir("patience");
  HybridRun s;
  auto o = options();
  o.steps = 20;
  o.eval_every = 2;
  o.patience = 4;
  o.min_delta = 100.0;  // NLL cannot fall by 100 nats: nothing counts as an improvement
  auto r = train::finetune(s.net, s.lora, s.kernel, data(), o, dir, false);
  EXPECT_TRUE(r.stopped_early);
  EXPECT_EQ(r.steps, 4);  // validations at 2 (2 < 4 back) and 4 (4 >= 4): stop
  ASSERT_EQ(r.val_log.size(), 3u);
  EXPECT_EQ(r.improved_step, 0);
  EXPECT_EQ(train::load_checkpoint(dir, "last")->step, 4);
  // The best checkpoint still follows any strictly lower validation NLL.
  EXPECT_LT(r.best_val_nll, r.val_log.front().nll);
  const auto again = train::finetune(s.net, s.lora, s.kernel, data(), o, dir, true);
  EXPECT_TRUE(again.stopped_early);
  EXPECT_EQ(again.steps, 4);
  EXPECT_EQ(again.steps_log.size(), 4u);
  fs::remove_all(dir);

  HybridRun t;
  o.patience = 100;
  o.min_delta = 0;
  r = train::finetune(t.net, t.lora, t.kernel, data(), o, dir, false);
  EXPECT_FALSE(r.stopped_early);
  EXPECT_EQ(r.steps, 20);
  fs::remove_all(dir);
}

TEST(Finetune, BlockOrderIsAPermutationPerEpoch) {
  std::vector<int> seen(7, 0);
  for (int64_t i = 0; i < 7; ++i) ++seen[size_t(train::block_for_position(i, 7, 42))];
  for (int c : seen) EXPECT_EQ(c, 1);
  EXPECT_EQ(train::block_for_position(3, 7, 42), train::block_for_position(3, 7, 42));
}

}  // namespace
