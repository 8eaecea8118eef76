#include "oal/kernels/cpu/isa.h"

#include <atomic>

namespace oal::kernels::cpu {
namespace {

Isa probe() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma"))
    return Isa::avx512;
#endif
  return Isa::scalar;
}

std::atomic<Isa>& current() {
  static std::atomic<Isa> isa{probe()};
  return isa;
}

}  // namespace

Isa detected_isa() {
  static const Isa isa = probe();
  return isa;
}

Isa active_isa() { return current().load(std::memory_order_relaxed); }

Isa set_isa(Isa isa) {
  if (isa == Isa::avx512 && detected_isa() != Isa::avx512) isa = Isa::scalar;
  return current().exchange(isa);
}

std::string_view isa_name(Isa isa) { return isa == Isa::avx512 ? "avx512" : "scalar"; }

}  // namespace oal::kernels::cpu
