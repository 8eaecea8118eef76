#pragma once
// FNV-1a 64: the project's one non-cryptographic hash (model fingerprints, attention
// fingerprints, the checksums of oal serve's state files). Simple and stable across
// machines; it detects corruption and mix-ups, not tampering.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace oal {

inline constexpr uint64_t k_fnv1a_offset = 1469598103934665603ull;

// Folds n bytes at p into h (start from k_fnv1a_offset).
inline void fnv1a(uint64_t& h, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
}
inline void fnv1a(uint64_t& h, std::string_view s) { fnv1a(h, s.data(), s.size()); }

}  // namespace oal
