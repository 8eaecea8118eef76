// A windowed layer's decode state read back from a saved conversation (oal serve's state
// file, src/oal/serve/state_file.h): the first layer's tensors restored into a windowed
// OAL layer (S = 2, W = 3, d = 4, two query heads on one KV head). A state that restore()
// accepts must take one more token, or refuse it with oal::Error.
#include <ATen/ATen.h>

#include <memory>

#include "fuzz_input.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/serve/state_file.h"

namespace {

const oal::attn::WindowedAttention& windowed_layer() {
  static const auto base = std::make_shared<oal::attn::QuadraticAttention>(
      oal::attn::QuadraticAttention::from_kernels(std::vector<oal::attn::QuadraticKernel>(
          2, oal::attn::QuadraticKernel::taylor(oal::attn::QuadraticKernel::single_group(4)))));
  static const oal::attn::WindowedAttention layer(base, {2, 3}, at::zeros({2}));
  return layer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes = oal::fuzz::as_bytes(data, size);
  oal::fuzz::expect_only_oal_errors([&] {
    const auto saved = oal::serve::decode_state_file(bytes, "fuzz-identity");
    if (saved.layers.empty()) return;
    auto state = windowed_layer().new_state(1);
    state->restore(saved.layers[0]);
    at::NoGradGuard no_grad;
    (void)state->step(at::ones({1, 2, 4}), at::ones({1, 1, 4}), at::ones({1, 1, 4}));
  });
  return 0;
}
