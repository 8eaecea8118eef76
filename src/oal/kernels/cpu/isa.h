#pragma once
// Which instruction set the CPU kernels use. Chosen once at startup from CPUID
// (AVX-512F/BW/VL + FMA -> avx512, else the portable scalar path); tests force the
// scalar path too so both are checked against the same references.
#include <string_view>

namespace oal::kernels::cpu {

enum class Isa { scalar, avx512 };

// The ISA the kernels dispatch to now.
Isa active_isa();
// The best ISA this CPU supports.
Isa detected_isa();
// Forces `isa` (clamped to what the CPU supports); returns the previous setting.
// Not thread-safe with respect to running kernels: set it before calling them.
Isa set_isa(Isa isa);
std::string_view isa_name(Isa isa);

// RAII override for tests: forces `isa` for its lifetime.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa) : previous_(set_isa(isa)) {}
  ~ScopedIsa() { set_isa(previous_); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  Isa previous_;
};

}  // namespace oal::kernels::cpu
