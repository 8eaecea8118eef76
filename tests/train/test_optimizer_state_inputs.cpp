// Optimizer state read back from a checkpoint's optimizer.bin: whatever the bytes,
// AdamW::load_state either restores the moments or throws oal::Error. The state used to
// be LibTorch's archive format, whose TorchScript deserializer crashed (SEGV) on
// data/optimizer_torch_archive_crash.bin, a corrupted archive fuzz/fuzz_checkpoint made.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <fstream>
#include <sstream>
#include <string>

#include "oal/core/error.h"
#include "oal/io/safetensors.h"
#include "oal/train/optimizer.h"

namespace {

using oal::train::AdamW;

std::string load_error(AdamW& opt, const std::string& bytes) {
  try {
    opt.load_state(bytes);
  } catch (const oal::Error& e) {
    return e.what();
  }
  return "no error";
}

at::Tensor param(std::vector<int64_t> shape) { return at::zeros(shape).set_requires_grad(true); }

// The state of an AdamW over one [2, 3] parameter after one step.
std::string one_step_state() {
  at::Tensor a = param({2, 3});
  AdamW opt({a});
  a.mutable_grad() = at::ones({2, 3});
  opt.step();
  return opt.save_state();
}

}  // namespace

TEST(OptimizerStateInputs, CorruptedTorchArchiveIsAnError) {
  std::ifstream in(OAL_SOURCE_DIR "/tests/train/data/optimizer_torch_archive_crash.bin",
                   std::ios::binary);
  ASSERT_TRUE(in.good());
  std::ostringstream bytes;
  bytes << in.rdbuf();
  AdamW opt({param({2, 4})});
  const std::string m = load_error(opt, bytes.str());
  EXPECT_EQ(m.rfind("[safetensors] optimizer state", 0), 0u) << m;
}

TEST(OptimizerStateInputs, RoundTripKeepsMoments) {
  at::Tensor b = param({2, 3});
  AdamW opt({b});
  opt.load_state(one_step_state());
  const auto again = oal::io::decode_safetensors(opt.save_state(), "saved");
  EXPECT_EQ(again.tensors.at("0.step").item<int64_t>(), 1);
  EXPECT_TRUE(at::allclose(again.tensors.at("0.exp_avg"), at::full({2, 3}, 0.1f)));
}

TEST(OptimizerStateInputs, MismatchesAreNamedErrors) {
  const std::string state = one_step_state();
  AdamW other_shape({param({3, 2})});
  EXPECT_NE(load_error(other_shape, state).find("must be floating point of shape [3, 2]"),
            std::string::npos) << load_error(other_shape, state);
  AdamW two_params({param({2, 3}), param({1})});
  EXPECT_NE(load_error(two_params, state).find("is for 1 parameters, this optimizer has 2"),
            std::string::npos);

  auto st = oal::io::decode_safetensors(state, "state");
  auto with = [&](std::map<std::string, at::Tensor> tensors) {
    return oal::io::encode_safetensors(tensors, st.metadata);
  };
  AdamW opt({param({2, 3})});
  auto missing = st.tensors;
  missing.erase("0.exp_avg_sq");
  EXPECT_NE(load_error(opt, with(missing)).find("needs 0.exp_avg"), std::string::npos);
  auto extra = st.tensors;
  extra["7.exp_avg"] = at::zeros({1});
  EXPECT_NE(load_error(opt, with(extra)).find("unexpected tensor '7.exp_avg'"), std::string::npos);
  auto negative = st.tensors;
  negative["0.step"] = at::scalar_tensor(-1, at::kLong);
  EXPECT_NE(load_error(opt, with(negative)).find("non-negative int64 scalar"), std::string::npos);
  EXPECT_NE(load_error(opt, oal::io::encode_safetensors(st.tensors)).find("expected format oal-adamw"),
            std::string::npos);
  EXPECT_NE(load_error(opt, "not an archive").find("[safetensors]"), std::string::npos);
}
