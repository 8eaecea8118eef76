#include "oal/simd/isa.h"

#include <atomic>
#include <cctype>
#include <cstdlib>

#include "oal/core/error.h"
#include "oal/simd/simd_config.h"
// (simd_config.h first: it decides which targets HWY_TARGETS holds.)
#include <hwy/targets.h>

namespace oal::simd {
namespace {

std::atomic<SimdTarget>& forced() {
  static std::atomic<SimdTarget> t{0};
  return t;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::vector<SimdTarget> available_targets() {
  // Supported by the CPU and compiled here, ignoring any forced target.
  const SimdTarget saved = forced().load();
  if (saved != 0) hwy::SetSupportedTargetsForTest(0);
  std::vector<SimdTarget> out = hwy::SupportedAndGeneratedTargets();
  if (saved != 0) hwy::SetSupportedTargetsForTest(saved);
  return out;
}

SimdTarget active_target() {
  const int64_t mask = hwy::SupportedTargets() & HWY_TARGETS;
  return mask & -mask;  // lowest bit = best target
}

std::string target_name(SimdTarget target) {
  if (target == HWY_AVX3) return "avx512";  // Highway calls AVX-512 F/BW/DQ/VL "AVX3"
  if (target == HWY_SCALAR || target == HWY_EMU128) return "scalar";
  return lower(hwy::TargetName(target));
}

SimdTarget parse_target(std::string_view name) {
  const std::string want = lower(name);
  std::string names;
  for (SimdTarget t : available_targets()) {
    if (target_name(t) == want) return t;
    names += (names.empty() ? "" : ", ") + target_name(t);
  }
  fail("simd", "target '{}' is not available on this CPU/build: expected one of {}", name,
       names);
}

SimdTarget force_target(SimdTarget target) {
  if (target != 0) {
    bool ok = false;
    for (SimdTarget t : available_targets()) ok = ok || t == target;
    check(ok, "simd", "cannot force target {}: not available on this CPU/build",
          target_name(target));
  }
  const SimdTarget previous = forced().exchange(target);
  hwy::SetSupportedTargetsForTest(target);  // 0 restores the CPU's own set
  return previous;
}

void apply_simd_env() {
  const char* env = std::getenv("OAL_SIMD");
  if (env == nullptr || *env == '\0' || lower(env) == "auto") return;
  force_target(parse_target(env));
}

}  // namespace oal::simd
