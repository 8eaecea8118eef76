// SIMD target selection: what is compiled and supported, forcing, names.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "oal/core/error.h"
#include "oal/simd/isa.h"

namespace simd = oal::simd;

TEST(SimdTargets, BestFirstAndForcible) {
  const auto targets = simd::available_targets();
  ASSERT_FALSE(targets.empty());
  EXPECT_EQ(simd::active_target(), targets.front());
  std::set<std::string> names;
  for (simd::SimdTarget t : targets) {
    names.insert(simd::target_name(t));
    EXPECT_EQ(simd::parse_target(simd::target_name(t)), t);
    simd::ScopedTarget guard(t);
    EXPECT_EQ(simd::active_target(), t) << simd::target_name(t);
    // Forcing does not shrink what is available.
    EXPECT_EQ(simd::available_targets(), targets);
  }
  EXPECT_EQ(names.size(), targets.size()) << "target names must be distinct";
  EXPECT_EQ(simd::active_target(), targets.front()) << "ScopedTarget restores the default";
  EXPECT_EQ(simd::target_name(targets.back()), "scalar") << "the baseline is always compiled";
}

#if defined(__x86_64__) && defined(__GNUC__)
TEST(SimdTargets, AvxCpusNeverRunScalar) {
  // The issue this guards: an AVX2 CPU fell back to plain loops (12x slower).
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    EXPECT_TRUE(simd::target_name(simd::active_target()) == "avx2" ||
                simd::target_name(simd::active_target()) == "avx512")
        << simd::target_name(simd::active_target());
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    EXPECT_EQ(simd::target_name(simd::active_target()), "avx512");
}
#endif

TEST(SimdTargets, UnknownNamesAreClearErrors) {
  try {
    simd::parse_target("avx9000");
    FAIL() << "expected an error";
  } catch (const oal::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("simd"), std::string::npos) << msg;
    EXPECT_NE(msg.find("avx9000"), std::string::npos) << msg;
    EXPECT_NE(msg.find("scalar"), std::string::npos) << "lists the available ones: " << msg;
  }
}
