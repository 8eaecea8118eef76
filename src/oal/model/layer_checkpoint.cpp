#include "oal/model/layer_checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <mutex>

#include "oal/core/error.h"
#include "oal/model/transformer.h"

namespace oal::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The default CPU generator's state (dropout's masks come from it).
at::Tensor rng_state() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_rng_state(const at::Tensor& state) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

struct LayerCheckpoint : torch::autograd::Function<LayerCheckpoint> {
  // anchor: an empty tensor that records a graph, so that the output does even when x
  // does not (the first layer's input is the frozen embedding) and the backward runs.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& anchor,
                            const Transformer* model, int64_t i) {
    (void)anchor;
    ctx->saved_data["rng"] = rng_state();
    // The model outlives the update that runs this backward (checkpointed_layer's
    // contract); IValue holds no raw pointer, so it is kept as an integer.
    ctx->saved_data["model"] = reinterpret_cast<int64_t>(model);
    ctx->saved_data["layer"] = i;
    ctx->save_for_backward({x});
    return model->layer(i, x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto* model = reinterpret_cast<const Transformer*>(ctx->saved_data["model"].toInt());
    const at::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    const at::Tensor after = rng_state();
    set_rng_state(ctx->saved_data["rng"].toTensor());
    at::Tensor y;
    {
      const at::AutoGradMode on(true);
      y = model->layer(ctx->saved_data["layer"].toInt(), x);
    }
    set_rng_state(after);
    torch::autograd::backward({y}, {grad[0]});
    return {x.grad(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor checkpointed_layer(const Transformer& model, int64_t i, const at::Tensor& x) {
  // Another device's dropout draws from its own generator, which is not replayed.
  check(x.device().is_cpu(), "finetune",
        "--checkpoint-layers replays the CPU generator's dropout masks; the model is on {}: "
        "train without it there", x.device().str());
  static const at::Tensor anchor = at::empty({0}).requires_grad_(true);
  return LayerCheckpoint::apply(x, anchor, &model, i);
}

}  // namespace oal::model
