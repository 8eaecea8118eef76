// The flash softmax's own exp (simd_tiles-inl.h exp_nonpositive, through softmax_exp_f32)
// against the C library's exp in double, on every SIMD target this CPU runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "oal/simd/flash_softmax.h"
#include "oal/simd/isa.h"

namespace simd = oal::simd;

namespace {

// Every float in [-86, 0] would be 2^31 values; a stride through their bit patterns
// visits ~1.1 M of them, every exponent and many mantissas, plus the reduction's
// boundaries (multiples of ln2/2, where n changes) and the ends of the range.
std::vector<float> grid() {
  std::vector<float> x;
  const uint32_t lo = 0x80000000u, hi = 0xC2AC0000u;  // -0.0 .. -86.0
  for (uint64_t b = lo; b <= hi; b += 1931) {
    const auto bits = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    x.push_back(f);
  }
  for (int n = 0; n >= -248; --n) {
    const float m = static_cast<float>(n * std::log(2.0) / 2);
    x.insert(x.end(), {m, std::nextafter(m, 0.0f), std::nextafter(m, -100.0f)});
  }
  x.insert(x.end(), {0.0f, -0.0f, -86.0f, -1e-30f, -std::numeric_limits<float>::denorm_min()});
  return x;
}

}  // namespace

TEST(SoftmaxExp, WithinTwoUlpOfExpOnItsRange) {
  const std::vector<float> x = grid();
  std::vector<float> y(x.size());
  for (simd::SimdTarget t : simd::available_targets()) {
    const simd::ScopedTarget force(t);
    simd::softmax_exp_f32(x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worst = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double ref = std::exp(static_cast<double>(x[i]));
      // In units of the float spacing at ref (results are normal: exp(-86) ~ 4e-38 >
      // 2^-126). The polynomial's own error is 2.6e-9 relative (0.04 ulp); the rest is
      // float rounding in the reduction and 7 FMAs, so about 1 ulp. 2 ulp bounds it with
      // room; a wrong coefficient or exponent shift is off by >> 1000 ulp.
      const double ulp = std::ldexp(1.0, std::ilogb(ref) - 23);
      const double err = std::abs(y[i] - ref) / ulp;
      worst = std::max(worst, err);
      ASSERT_LE(err, 2.0) << simd::target_name(t) << " x=" << x[i] << " got " << y[i] << " want "
                          << ref;
    }
    RecordProperty(std::string("worst_ulp_") + simd::target_name(t), std::to_string(worst));
  }
}

TEST(SoftmaxExp, ClampsBelowItsRangeAndTakesAnyLength) {
  // Below -86 the result stays exp(-86) (a tiny positive, never 0 or garbage): the online
  // softmax sums these into l >= 1, where they vanish.
  const std::vector<float> x = {-86.0f, -87.0f, -1000.0f, -std::numeric_limits<float>::infinity(),
                                -0.5f, -3.0f, -10.0f};
  for (simd::SimdTarget t : simd::available_targets()) {
    const simd::ScopedTarget force(t);
    for (size_t n = 1; n <= x.size(); ++n) {  // every tail length: masked loads and stores
      std::vector<float> y(n + 1, 42.0f);
      simd::softmax_exp_f32(x.data(), y.data(), static_cast<int64_t>(n));
      EXPECT_EQ(y[n], 42.0f) << "wrote past n = " << n;
      for (size_t i = 0; i < n; ++i) {
        const double want = std::exp(std::max(static_cast<double>(x[i]), -86.0));
        EXPECT_NEAR(y[i], want, want * 3e-7) << simd::target_name(t) << " x=" << x[i];
      }
    }
  }
}
