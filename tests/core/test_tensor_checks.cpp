#include <gtest/gtest.h>

#include <limits>

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace {

// check_finite has a raw scan for contiguous fp32 CPU tensors and at::isfinite for the
// rest; both must refuse every non-finite value at every position, so each bad value is
// placed at the first, a middle and the last element (a vectorised scan's head, body
// and tail) of sizes around vector widths.
TEST(TensorChecks, CheckFiniteRefusesNanAndInfAnywhere) {
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(),
                       -std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (int64_t n : {1, 7, 16, 17, 33, 1000}) {
    for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
      const at::Tensor ok = at::randn({n}).to(dtype);
      EXPECT_NO_THROW(oal::check_finite(ok, "op", "x")) << n;
      for (float b : bad) {
        for (int64_t at_pos : {int64_t{0}, n / 2, n - 1}) {
          at::Tensor t = ok.clone();
          t[at_pos] = b;
          EXPECT_THROW(oal::check_finite(t, "op", "x"), oal::Error)
              << "n " << n << " dtype " << c10::toString(dtype) << " value " << b << " at "
              << at_pos;
        }
      }
    }
  }
}

TEST(TensorChecks, CheckFiniteAcceptsExtremeFiniteValuesAndEmpty) {
  const at::Tensor t = at::tensor({std::numeric_limits<float>::max(),
                                   -std::numeric_limits<float>::max(),
                                   std::numeric_limits<float>::denorm_min(), -0.0f, 0.0f});
  EXPECT_NO_THROW(oal::check_finite(t, "op", "x"));
  EXPECT_NO_THROW(oal::check_finite(at::empty({0, 3}), "op", "x"));
}

TEST(TensorChecks, CheckFiniteScansViewsAsTheyAre) {
  // A strided view (not contiguous) takes the ATen path; an offset view the raw scan.
  at::Tensor t = at::zeros({4, 6});
  t[3][5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NO_THROW(oal::check_finite(t.narrow(0, 0, 3), "op", "x"));
  EXPECT_THROW(oal::check_finite(t.narrow(0, 3, 1), "op", "x"), oal::Error);
  EXPECT_THROW(oal::check_finite(t.t(), "op", "x"), oal::Error);
  EXPECT_NO_THROW(oal::check_finite(t.narrow(1, 0, 5).t(), "op", "x"));
}

TEST(TensorChecks, CheckFiniteMessageNamesOperationAndTensor) {
  try {
    oal::check_finite(at::full({2, 3}, std::numeric_limits<float>::infinity()), "attend", "q");
    FAIL() << "expected an error";
  } catch (const oal::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[attend]"), std::string::npos) << m;
    EXPECT_NE(m.find("q contains NaN or Inf"), std::string::npos) << m;
  }
}

}  // namespace
