#pragma once
// Which SIMD target the CPU kernels run. Every kernel is written once over Google
// Highway and compiled for several targets (simd_config.h); at run time Highway picks
// the best one this CPU supports (AVX-512 > AVX2 > SSE4 > scalar on x86-64). Tests and
// benchmarks may force a lower target to measure or check it on the same machine.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace oal::simd {

// A Highway target bit (e.g. HWY_AVX2); 0 never names a target.
using SimdTarget = int64_t;

// Targets compiled into this build that this CPU can run, best first.
std::vector<SimdTarget> available_targets();
// The target the kernels dispatch to now (the best available unless forced).
SimdTarget active_target();
// "avx512", "avx2", "sse4", "neon", "scalar", ... (lower case, stable: printed by
// `oal bench` as kernels_isa and accepted by parse_target / OAL_SIMD).
std::string target_name(SimdTarget target);
// The available target named `name` (as target_name prints it). Throws
// oal::Error("simd") naming the available ones when it is unknown or not available.
SimdTarget parse_target(std::string_view name);
// Forces `target` (one of available_targets()) for every kernel call that follows, or
// restores automatic selection with 0. Returns the previous forced target (0 = none).
// Not thread-safe with respect to running kernels: set it before calling them.
SimdTarget force_target(SimdTarget target);
// Applies the OAL_SIMD environment variable (a target name, or "auto"/unset for the
// default). Throws like parse_target on a bad name. The CLI calls it once at start.
void apply_simd_env();

// RAII override for tests and benchmarks: forces `target` for its lifetime.
class ScopedTarget {
 public:
  explicit ScopedTarget(SimdTarget target) : previous_(force_target(target)) {}
  ~ScopedTarget() { force_target(previous_); }
  ScopedTarget(const ScopedTarget&) = delete;
  ScopedTarget& operator=(const ScopedTarget&) = delete;

 private:
  SimdTarget previous_;
};

}  // namespace oal::simd
