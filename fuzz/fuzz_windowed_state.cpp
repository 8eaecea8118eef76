// A windowed layer's decode state read back from a saved conversation (oal serve's state
// file, src/oal/serve/state_file.h): the first layer's tensors restored into three
// windowed layers (S = 2, W = 3, d = 4, two query heads on one KV head): over an OAL
// kernel (HD state), over TaylorShift (feature prefix and ring features, fp32), over
// Performer with 8 features (fp64, with its key shift), and the OAL one with its KV head
// kept exact (a KV cache beside the windowed state). A state that restore() accepts
// must take W + 1 more tokens (the CPU step's circular ring turned round), give a
// snapshot that restores and steps again, or refuse with oal::Error.
#include <ATen/ATen.h>

#include <memory>

#include "fuzz_input.h"
#include "oal/attention/baselines/performer.h"
#include "oal/attention/baselines/taylorshift.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/serve/state_file.h"

namespace {

namespace attn = oal::attn;

const std::vector<attn::WindowedAttention>& windowed_layers() {
  static const std::vector<attn::WindowedAttention> layers = [] {
    const auto oal = std::make_shared<attn::QuadraticAttention>(
        attn::QuadraticAttention::from_kernels(std::vector<attn::QuadraticKernel>(
            2, attn::QuadraticKernel::taylor(attn::QuadraticKernel::single_group(4)))));
    std::vector<attn::WindowedAttention> out;
    out.emplace_back(oal, attn::Window{2, 3}, at::zeros({2}));
    out.emplace_back(attn::TaylorShiftAttention::init(2, 1, 4), attn::Window{2, 3}, at::zeros({2}));
    out.emplace_back(attn::PerformerAttention::init(2, 1, 4, 0, 0, 8), attn::Window{2, 3},
                     at::zeros({2}));
    // The OAL layer again with its KV head kept exact (full_heads.h): the snapshot adds
    // the kept heads' cache ("full_k", "full_v") to the windowed tensors.
    out.emplace_back(oal, attn::Window{2, 3}, at::zeros({2}));
    out.back().set_full_heads({{0}});
    return out;
  }();
  return layers;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes = oal::fuzz::as_bytes(data, size);
  oal::fuzz::expect_only_oal_errors([&] {
    const auto saved = oal::serve::decode_state_file(bytes, "fuzz-identity");
    if (saved.layers.empty()) return;
    for (const auto& layer : windowed_layers()) {
      oal::fuzz::expect_only_oal_errors([&] {
        auto state = layer.new_state(1);
        state->restore(saved.layers[0]);
        at::NoGradGuard no_grad;
        // W + 1 steps: on the CPU path the circular ring turns all the way round; its
        // snapshot (the ring put back in position order) must restore and step again.
        for (int i = 0; i < 4; ++i)
          (void)state->step(at::ones({1, 2, 4}), at::full({1, 1, 4}, 0.5 * i), at::ones({1, 1, 4}));
        auto again = layer.new_state(1);
        again->restore(state->snapshot());
        (void)again->step(at::ones({1, 2, 4}), at::ones({1, 1, 4}), at::ones({1, 1, 4}));
      });
    }
  });
  return 0;
}
