#pragma once
// Seeded test inputs for the kernel tests.
#include <random>
#include <vector>

namespace oal::test {

// n values uniform in [-1, 1) from std::mt19937(seed).
inline std::vector<float> uniform(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& e : x) e = u(g);
  return x;
}

}  // namespace oal::test
