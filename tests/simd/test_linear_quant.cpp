// linear_quant and dequantize_rows (projections on ggml-quantized weights) against the
// plain reference: io::dequantize of the whole matrix (itself checked bit for bit
// against the gguf package, tests/io/test_gguf_quants_reference.cpp) and an fp64
// product; on every SIMD target, the decode pass (M <= 8) and the prefill panels.
#include <gtest/gtest.h>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "oal/core/error.h"
#include "oal/io/gguf_quants.h"
#include "oal/simd/isa.h"
#include "oal/simd/linear_quant.h"
#include "random_data.h"

namespace simd = oal::simd;
using oal::io::GgmlType;

namespace {

struct TypeCase {
  GgmlType type;
  std::vector<int> half_fields;  // byte offsets of the block's fp16 scales and mins
  float scale;                   // magnitude of those halfs: keeps |w| around 1
};

// Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q4_K/Q5_K/Q6_K/F16/BF16 take the SIMD decoders; Q3_K the
// scalar row fallback.
const std::vector<TypeCase> k_types = {
    {GgmlType::Q8_0, {0}, 1.0f / 127},   {GgmlType::Q4_0, {0}, 1.0f / 8},
    {GgmlType::Q4_1, {0, 2}, 1.0f / 16}, {GgmlType::Q5_0, {0}, 1.0f / 16},
    {GgmlType::Q5_1, {0, 2}, 1.0f / 32}, {GgmlType::Q6_K, {208}, 1.0f / 1024},
    {GgmlType::Q4_K, {0, 2}, 1.0f / 256}, {GgmlType::Q5_K, {0, 2}, 1.0f / 512},
    {GgmlType::Q3_K, {108}, 1.0f / 256}, {GgmlType::F16, {0}, 1.0f},
    {GgmlType::BF16, {0}, 1.0f},
};

// rows x cols weights of `t`: random bytes, every fp16 field a random half of
// magnitude <= t.scale with either sign.
std::vector<uint8_t> random_matrix(const TypeCase& t, int64_t rows, int64_t cols, unsigned seed) {
  const auto info = *oal::io::ggml_type_info(uint32_t(t.type));
  const int64_t blocks = rows * cols / info.block_size;
  std::vector<uint8_t> m(static_cast<size_t>(blocks * info.block_bytes));
  std::mt19937 g(seed);
  for (auto& b : m) b = static_cast<uint8_t>(g());
  std::uniform_real_distribution<float> u(-t.scale, t.scale);
  for (int64_t b = 0; b < blocks; ++b)
    for (int off : t.half_fields) {
      const uint16_t h = t.type == GgmlType::BF16 ? c10::BFloat16(u(g)).x : c10::Half(u(g)).x;
      std::memcpy(&m[size_t(b * info.block_bytes + off)], &h, 2);
    }
  return m;
}

std::vector<float> reference_weights(const TypeCase& t, const std::vector<uint8_t>& m,
                                     int64_t rows, int64_t cols) {
  std::vector<float> w(static_cast<size_t>(rows * cols));
  oal::io::dequantize(uint32_t(t.type), m.data(), rows * cols, w.data());
  return w;
}

int64_t block_of(GgmlType t) { return oal::io::ggml_type_info(uint32_t(t))->block_size; }

}  // namespace

TEST(LinearQuant, DequantizeRowsIsBitwiseTheScalarDecoder) {
  // The SIMD decoders compute d·q (+ m) with one rounding like io::dequantize, whose
  // products are exact (see test_gguf_quants_reference.cpp): no tolerance.
  for (simd::SimdTarget target : simd::available_targets()) {
    simd::ScopedTarget guard(target);
    for (const TypeCase& t : k_types) {
      const int64_t rows = 37, cols = 2 * std::max<int64_t>(256, block_of(t.type));
      const auto m = random_matrix(t, rows, cols, 11);
      const auto ref = reference_weights(t, m, rows, cols);
      const simd::QuantMatrix w{uint32_t(t.type), rows, cols, m.data()};
      std::vector<float> got(static_cast<size_t>((rows - 3) * cols), -9.0f);
      simd::dequantize_rows(w, 3, rows, got.data());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(std::memcmp(&got[i], &ref[3 * cols + i], 4), 0)
            << simd::target_name(target) << " " << oal::io::ggml_type_name(uint32_t(t.type))
            << " element " << i << ": " << got[i] << " vs " << ref[3 * cols + i];
    }
  }
}

TEST(LinearQuant, MatchesFp64OnEveryTypeTargetAndShape) {
  // M <= 32: the decode pass (32-row work items, x rows in groups of 8: 9 and 21 leave
  // partial groups); M > 32: prefill panels (at least 256 rows, so N = 300 can cross
  // one); K covers 1, 3, 8, 16 and 18 blocks of 32.
  const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 1, 256}, {1, 33, 96}, {2, 300, 576}, {3, 70, 256}, {5, 17, 32}, {8, 65, 512},
      {9, 300, 256}, {21, 40, 96}, {40, 33, 576}, {70, 300, 256}};
  for (simd::SimdTarget target : simd::available_targets()) {
    simd::ScopedTarget guard(target);
    for (const TypeCase& t : k_types)
      for (const auto& [M, N, K0] : shapes) {
        const int64_t K = std::max<int64_t>(K0, block_of(t.type)) / block_of(t.type) * block_of(t.type);
        const auto m = random_matrix(t, N, K, 5);
        const auto wf = reference_weights(t, m, N, K);
        const auto x = oal::test::uniform(size_t(M * K), 1), b = oal::test::uniform(size_t(N), 3);
        std::vector<float> y(static_cast<size_t>(M * N), -7.0f);
        simd::linear_quant(M, x.data(), {uint32_t(t.type), N, K, m.data()}, b.data(), y.data());
        for (int64_t i = 0; i < M; ++i)
          for (int64_t n = 0; n < N; ++n) {
            double ref = b[n], mag = 1.0;
            for (int64_t k = 0; k < K; ++k) {
              ref += double(x[i * K + k]) * wf[n * K + k];
              mag += std::abs(double(x[i * K + k]) * wf[n * K + k]);
            }
            // An fp32 sum of K + 1 terms in any order (SIMD lanes reassociate) errs by at
            // most about (K + 1)·2^-24·Σ|terms| (the worst-case bound γ_K); 1e-7 > 2^-24.
            ASSERT_NEAR(y[i * N + n], ref, 1e-7 * double(K + 1) * mag)
                << simd::target_name(target) << " " << oal::io::ggml_type_name(uint32_t(t.type))
                << " M=" << M << " N=" << N << " K=" << K << " at " << i << "," << n;
          }
      }
  }
}

TEST(LinearQuant, RefusesWhatItCannotDecode) {
  const std::vector<uint8_t> bytes(34 * 4, 0);
  std::vector<float> x(64, 1.0f), y(4, 0.0f);
  const simd::QuantMatrix q8{uint32_t(GgmlType::Q8_0), 2, 64, bytes.data()};
  EXPECT_THROW(simd::linear_quant(0, x.data(), q8, nullptr, y.data()), oal::Error);
  EXPECT_THROW(simd::linear_quant(1, x.data(), {77, 2, 64, bytes.data()}, nullptr, y.data()),
               oal::Error);
  EXPECT_THROW(simd::linear_quant(1, x.data(), {uint32_t(GgmlType::Q8_0), 2, 48, bytes.data()},
                                  nullptr, y.data()),
               oal::Error);
  EXPECT_THROW(simd::linear_quant(1, x.data(), {uint32_t(GgmlType::IQ2_XS), 1, 256, bytes.data()},
                                  nullptr, y.data()),
               oal::Error);
  EXPECT_THROW(simd::dequantize_rows(q8, 1, 3, y.data()), oal::Error);
  try {
    simd::linear_quant(1, x.data(), {uint32_t(GgmlType::Q8_0), 2, 48, bytes.data()}, nullptr,
                       y.data());
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("[linear_quant]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("multiple of 32"), std::string::npos) << e.what();
  }
}

namespace {

// x as the int8 route quantizes it, computed here in plain float arithmetic: per block of
// 32, a = max|x|, q = nearest-even(x · (127 / a)), dx = a / 127 (the same float operations
// the kernel's vectors do, so q matches exactly).
std::vector<double> int8_rounded(const std::vector<float>& x) {
  std::vector<double> r(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    float a = 0.0f;
    for (size_t e = b; e < b + 32; ++e) a = std::max(a, std::abs(x[e]));
    const float inv = a > 0.0f ? 127.0f / a : 0.0f, dx = a / 127.0f;
    for (size_t e = b; e < b + 32; ++e) r[e] = double(dx) * std::nearbyint(x[e] * inv);
  }
  return r;
}

// The fp16 min of the Q4_1 block at byte offset `at` (bytes 2-3 of the block).
double block_min(const std::vector<uint8_t>& m, int64_t at) {
  uint16_t bits;
  std::memcpy(&bits, &m[size_t(at + 2)], 2);
  return double(float(c10::Half(bits, c10::Half::from_bits())));
}

}  // namespace

TEST(LinearQuant, Int8RouteIsTheProductWithInt8Activations) {
  // The int8 route computes, per 32-block, d_w·d_x·Σ q_w·q_x (exact integers) plus Q4_1's
  // m_w·Σ x (unrounded x). The fp64 reference of that: Σ (w − m_w)·x̃ + m_w·x with x̃ the
  // int8-rounded x. What is left is fp32 accumulation across blocks and lanes, the γ_K
  // bound of the test above; an indexing or nibble-order mistake is O(1).
  const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 1, 32}, {1, 33, 96}, {2, 70, 576}, {3, 65, 256}, {8, 40, 512}, {9, 33, 96}, {32, 17, 64}};
  for (simd::SimdTarget target : simd::available_targets()) {
    simd::ScopedTarget guard(target);
    for (const TypeCase& t : k_types) {
      if (!simd::has_int8_path(uint32_t(t.type))) continue;
      const bool has_min = t.type == GgmlType::Q4_1;
      for (const auto& [M, N, K] : shapes) {
        const auto m = random_matrix(t, N, K, 9);
        const auto wf = reference_weights(t, m, N, K);
        const auto x = oal::test::uniform(size_t(M * K), 4), b = oal::test::uniform(size_t(N), 6);
        const auto xr = int8_rounded(x);
        std::vector<float> y(static_cast<size_t>(M * N), -7.0f);
        simd::linear_quant(M, x.data(), {uint32_t(t.type), N, K, m.data()}, b.data(), y.data(),
                           simd::QuantDot::int8);
        const int64_t block_bytes = oal::io::ggml_type_info(uint32_t(t.type))->block_bytes;
        for (int64_t i = 0; i < M; ++i)
          for (int64_t n = 0; n < N; ++n) {
            double ref = b[n], mag = 1.0;
            for (int64_t k = 0; k < K; ++k) {
              const double mw = has_min ? block_min(m, (n * K + k) / 32 * block_bytes) : 0.0;
              const double term = (wf[n * K + k] - mw) * xr[i * K + k] + mw * x[i * K + k];
              ref += term;
              mag += std::abs(term);
            }
            ASSERT_NEAR(y[i * N + n], ref, 1e-7 * double(K + 1) * mag)
                << simd::target_name(target) << " " << oal::io::ggml_type_name(uint32_t(t.type))
                << " M=" << M << " N=" << N << " K=" << K << " at " << i << "," << n;
          }
      }
    }
  }
}

TEST(LinearQuant, Int8RouteStaysWithinItsRoundingOfTheExactProduct) {
  // Against the exact product (no rounding replicated): rounding x to int8 moves each
  // element by at most dx/2 = max|x_block| / 254, so |Δy| <= Σ |w|·max|x_block| / 254
  // (+ fp32 accumulation). Holds on a real-sized row (K = 896, Qwen2.5-0.5B's hidden).
  const int64_t M = 1, N = 64, K = 896;
  for (const TypeCase& t : k_types) {
    if (!simd::has_int8_path(uint32_t(t.type))) continue;
    const auto m = random_matrix(t, N, K, 21);
    const auto wf = reference_weights(t, m, N, K);
    const auto x = oal::test::uniform(size_t(K), 8);
    std::vector<float> y(N);
    simd::linear_quant(M, x.data(), {uint32_t(t.type), N, K, m.data()}, nullptr, y.data(),
                       simd::QuantDot::int8);
    for (int64_t n = 0; n < N; ++n) {
      double exact = 0.0, bound = 0.0;
      for (int64_t b0 = 0; b0 < K; b0 += 32) {
        double amax = 0.0;
        for (int64_t k = b0; k < b0 + 32; ++k) amax = std::max(amax, std::abs(double(x[k])));
        for (int64_t k = b0; k < b0 + 32; ++k) {
          exact += double(wf[n * K + k]) * x[k];
          bound += std::abs(double(wf[n * K + k])) * (amax / 254.0 + 1e-7 * K * std::abs(x[k]));
        }
      }
      EXPECT_LE(std::abs(y[n] - exact), bound) << oal::io::ggml_type_name(uint32_t(t.type)) << " row " << n;
    }
  }
}

TEST(LinearQuant, QuantDotNamesParseAndBadOnesAreRefused) {
  EXPECT_EQ(simd::parse_quant_dot("int8"), simd::QuantDot::int8);
  EXPECT_EQ(simd::parse_quant_dot("dequant"), simd::QuantDot::dequant);
  EXPECT_EQ(simd::quant_dot_name(simd::QuantDot::int8), "int8");
  try {
    simd::parse_quant_dot("int4");
    ADD_FAILURE() << "int4 accepted";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected dequant or int8"), std::string::npos) << e.what();
  }
}
