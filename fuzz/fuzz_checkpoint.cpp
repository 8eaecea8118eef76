// A fine-tuning run directory as `oal finetune --resume` reads it; input parts:
// last.json, then state.json, trainable.safetensors and optimizer.bin of
// checkpoints/step-000001. The trainer's state (state.json) is read as --resume reads
// it, and the optimizer state is loaded into an AdamW over the checkpoint's own tensors
// (shapes as the trainer would have them).
#include <ATen/ATen.h>

#include "fuzz_input.h"
#include "oal/train/checkpoint.h"
#include "oal/train/optimizer.h"
#include "oal/train/trainer_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = oal::fuzz::fresh_dir();
  const std::string step = "checkpoints/step-000001/";
  oal::fuzz::write_parts(dir, data, size,
                         {"last.json", step + "state.json", step + "trainable.safetensors",
                          step + "optimizer.bin"});
  oal::fuzz::expect_only_oal_errors([&] {
    const auto ckpt = oal::train::load_checkpoint(dir, "last");
    if (!ckpt) return;
    (void)oal::train::trainer_state_from_json(ckpt->state, "state.json");
    std::vector<at::Tensor> params;
    for (const auto& [name, t] : ckpt->tensors)
      if (at::isFloatingType(t.scalar_type()))
        params.push_back(t.to(at::kFloat).detach().requires_grad_(true));
    if (params.empty()) params.push_back(at::zeros({1}).requires_grad_(true));
    oal::train::AdamW opt(params);
    opt.load_state(ckpt->optimizer_state);
  });
  return 0;
}
