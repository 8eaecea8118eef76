// QuadraticAttention: naming, forward == references, decode == forward.
#include <gtest/gtest.h>

#include <c10/core/GradMode.h>

#include <cmath>
#include <string>

#include "oal/attention/oal/chunked_attention.h"
#include "oal/attention/oal/references.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/core/error.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::randn;
using oal::test::rel_err;

// The kernels are validated once, when the method is built (HdOptions::kernels_validated),
// not at every forward. A NaN that training writes into L afterwards still cannot pass:
// the SIMD path rebuilds its plan for the new L version and refuses it (fp32), the ATen
// path's κ are all NaN for that head and its readout denominator check fails (fp64).
TEST(QuadraticAttention, NaNWrittenIntoLAfterConstructionIsStillAnError) {
  for (auto dtype : {at::kFloat, at::kDouble}) {
    auto method = QuadraticAttention::from_kernels(oal::test::random_kernels(6, 8, 3, 3), {.chunk = 8});
    EXPECT_TRUE(method.options().kernels_validated);
    auto q = randn({1, 6, 12, 8}, 4, 1.0, dtype), k = randn({1, 3, 12, 8}, 5, 1.0, dtype),
         v = randn({1, 3, 12, 8}, 6, 1.0, dtype);
    c10::NoGradGuard no_grad;
    EXPECT_NO_THROW(method.forward(q, k, v));
    method.kernels().L[0][1][0].fill_(std::nan(""));
    try {
      method.forward(q, k, v);
      FAIL() << c10::toString(dtype) << ": a NaN in L went through";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_TRUE(m.find("denominator") != std::string::npos ||
                  m.find("L: expected finite") != std::string::npos)
          << c10::toString(dtype) << ": " << m;
    }
  }
}

TEST(QuadraticAttention, NameForwardAndDecode) {
  auto kernels = oal::test::random_kernels(6, 8, 3, 3);
  auto oal = QuadraticAttention::from_kernels(kernels, {.chunk = 8});
  EXPECT_EQ(oal.name(), "oal");
  std::vector<QuadraticKernel> glob;
  for (int i = 0; i < 6; ++i) glob.push_back(QuadraticKernel::taylor(QuadraticKernel::single_group(8)));
  EXPECT_EQ(QuadraticAttention::from_kernels(glob).name(), "global");
  // Inference by default: no parameters, so a plain forward takes the CPU kernels.
  EXPECT_TRUE(QuadraticAttention::from_kernels(glob).parameters().empty());
  EXPECT_EQ(QuadraticAttention::from_kernels(glob, {}, /*trainable=*/true).parameters().size(), 1u);

  auto q = randn({2, 6, 21, 8}, 4), k = randn({2, 3, 21, 8}, 5), v = randn({2, 3, 21, 8}, 6);
  c10::NoGradGuard no_grad;
  auto y = oal.forward(q, k, v);
  EXPECT_LT(rel_err(y, hd_pairwise(q, k, v, LayerKernels::from(kernels))), 1e-11);
  auto st = oal.new_state(2);
  std::vector<at::Tensor> parts{st->extend(q.narrow(2, 0, 10), k.narrow(2, 0, 10), v.narrow(2, 0, 10))};
  for (int64_t t = 10; t < 21; ++t)
    parts.push_back(st->step(q.select(2, t), k.select(2, t), v.select(2, t)).unsqueeze(2));
  EXPECT_LT(rel_err(at::cat(parts, 2), y), 1e-11);
  EXPECT_EQ(st->tokens(), 21);
  EXPECT_EQ(st->state_bytes(), 2 * 3 * simd::oal_feature_dim(8) * 9 * 8);
  // kernels survive the trip into the method and back
  auto back = oal.to_kernels();
  for (size_t h = 0; h < kernels.size(); ++h)
    EXPECT_EQ(back[h].packed_lower(), kernels[h].packed_lower());
}

}  // namespace
}  // namespace oal::attn
