// gguf_quants: type layouts and sizes, fp16/bf16 conversion, and every block format
// decoded from blocks built here by hand. Each block test packs chosen quants and
// scales into bytes following the layout (the inverse of what dequantize does) and
// expects the values the format's formula gives, plus a few spot values worked out by
// hand. All values are small dyadic rationals, exact in float32, so every comparison
// is exact. The comparison with the gguf package is test_gguf_quants_reference.cpp.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "oal/core/error.h"
#include "oal/io/gguf_quants.h"

using oal::io::dequantize;
using oal::io::ggml_nbytes;
using oal::io::ggml_type_info;
using oal::io::ggml_type_name;
using oal::io::GgmlType;

namespace {

uint32_t id(GgmlType t) { return static_cast<uint32_t>(t); }

// Halfs used below.
constexpr uint16_t k_h_one = 0x3C00, k_h_half = 0x3800, k_h_two = 0x4000,
                   k_h_quarter = 0x3400, k_h_eighth = 0x3000, k_h_minus_one = 0xBC00,
                   k_h_minus_half = 0xB800, k_h_three = 0x4200, k_h_minus_16 = 0xCC00;

void put_u16(std::vector<uint8_t>& b, size_t off, uint16_t v) {
  b[off] = uint8_t(v & 0xFF);
  b[off + 1] = uint8_t(v >> 8);
}

std::vector<float> run(GgmlType t, const std::vector<uint8_t>& bytes, int64_t n) {
  EXPECT_EQ(bytes.size(), ggml_nbytes(id(t), n));
  std::vector<float> out(size_t(n), -12345.f);
  dequantize(id(t), bytes.data(), n, out.data());
  return out;
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// Expects `fn` to throw an oal::Error whose message contains every one of `parts`.
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception; expected one mentioning " << parts.front();
  } catch (const oal::Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << e.what() << "' lacks '" << p << "'";
  }
}

}  // namespace

// ---- Type table and sizes ---------------------------------------------------------

TEST(GgufTypes, LayoutsOfKnownTypes) {
  struct Want {
    uint32_t id;
    const char* name;
    int64_t size, bytes;
    bool deq;
  };
  // From ggml-common.h's block structs (and gguf's GGML_QUANT_SIZES).
  const Want want[] = {{0, "F32", 1, 4, true},       {1, "F16", 1, 2, true},
                       {3, "Q4_1", 32, 20, true},    {7, "Q5_1", 32, 24, true},
                       {8, "Q8_0", 32, 34, true},    {9, "Q8_1", 32, 40, false},
                       {10, "Q2_K", 256, 84, true},  {11, "Q3_K", 256, 110, true},
                       {14, "Q6_K", 256, 210, true}, {15, "Q8_K", 256, 292, true},
                       {17, "IQ2_XS", 256, 74, false}, {23, "IQ4_XS", 256, 136, false},
                       {27, "I64", 1, 8, false},     {29, "IQ1_M", 256, 56, false},
                       {30, "BF16", 1, 2, true},     {34, "TQ1_0", 256, 54, false},
                       {35, "TQ2_0", 256, 66, false}, {39, "MXFP4", 32, 17, false}};
  for (const auto& w : want) {
    const auto info = ggml_type_info(w.id);
    ASSERT_TRUE(info.has_value()) << w.name;
    EXPECT_EQ(info->name, w.name);
    EXPECT_EQ(info->block_size, w.size) << w.name;
    EXPECT_EQ(info->block_bytes, w.bytes) << w.name;
    EXPECT_EQ(info->dequantizable, w.deq) << w.name;
    EXPECT_EQ(ggml_type_name(w.id), w.name);
  }
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 77u})
    EXPECT_FALSE(ggml_type_info(removed).has_value()) << removed;
  EXPECT_EQ(ggml_type_name(77), "type 77");
}

TEST(GgufTypes, NbytesOfTensors) {
  // SmolLM2-135M's blk.0.attn_q.weight (Q4_1, 576 x 576) and token_embd.weight (Q8_0,
  // 576 x 49152) occupy 207360 and 30081024 bytes in its GGUF file.
  EXPECT_EQ(ggml_nbytes(id(GgmlType::Q4_1), 576 * 576), 207360u);
  EXPECT_EQ(ggml_nbytes(id(GgmlType::Q8_0), 576 * 49152), 30081024u);
  EXPECT_EQ(ggml_nbytes(id(GgmlType::F32), 576), 2304u);
  EXPECT_EQ(ggml_nbytes(id(GgmlType::Q6_K), 0), 0u);
  EXPECT_EQ(ggml_nbytes(id(GgmlType::IQ2_XS), 512), 148u);  // listed, not decoded
  expect_error([] { ggml_nbytes(id(GgmlType::Q4_1), 33); },
               {"[gguf]", "Q4_1", "33", "multiple of the block size 32"});
  expect_error([] { ggml_nbytes(id(GgmlType::Q4_1), -32); }, {"[gguf]", "-32"});
  expect_error([] { ggml_nbytes(77, 32); }, {"[gguf]", "unknown", "77"});
  // 2^61 F64 elements are 2^64 bytes.
  expect_error([] { ggml_nbytes(id(GgmlType::F64), int64_t(1) << 61); },
               {"[gguf]", "F64", "overflows"});
  const int64_t max_blocks = std::numeric_limits<int64_t>::max() / 34;
  EXPECT_EQ(ggml_nbytes(id(GgmlType::Q8_0), max_blocks * 32), uint64_t(max_blocks) * 34);
  expect_error([] { ggml_nbytes(id(GgmlType::Q8_0), (std::numeric_limits<int64_t>::max() / 34 + 1) * 32); },
               {"overflows"});
}

// ---- Plain types ------------------------------------------------------------------

TEST(GgufDequantize, Fp16Conversion) {
  const std::vector<uint16_t> h = {0x0000, 0x8000, 0x3C00, 0xC000, 0x7BFF, 0x0001, 0x03FF,
                                   0x8200, 0x0400, 0x3555, 0x7C00, 0xFC00, 0x7E00, 0x7C01,
                                   0xFE00};
  std::vector<uint8_t> bytes(2 * h.size());
  for (size_t i = 0; i < h.size(); ++i) put_u16(bytes, 2 * i, h[i]);
  const auto y = run(GgmlType::F16, bytes, int64_t(h.size()));
  EXPECT_EQ(bits(y[0]), 0x00000000u);                // +0
  EXPECT_EQ(bits(y[1]), 0x80000000u);                // -0
  EXPECT_EQ(y[2], 1.0f);
  EXPECT_EQ(y[3], -2.0f);
  EXPECT_EQ(y[4], 65504.0f);                         // largest half
  EXPECT_EQ(y[5], 5.9604644775390625e-08f);          // 2^-24, smallest subnormal
  EXPECT_EQ(y[6], 6.0975551605224609375e-05f);       // 1023 * 2^-24, largest subnormal
  EXPECT_EQ(y[7], -3.0517578125e-05f);               // -512 * 2^-24 = -2^-15
  EXPECT_EQ(y[8], 6.103515625e-05f);                 // 2^-14, smallest normal
  EXPECT_EQ(y[9], 0.333251953125f);                  // 0x3555 = 1.0101010101b * 2^-2
  EXPECT_EQ(bits(y[10]), 0x7F800000u);               // +inf
  EXPECT_EQ(bits(y[11]), 0xFF800000u);               // -inf
  EXPECT_EQ(bits(y[12]), 0x7FC00000u);               // quiet NaN
  EXPECT_EQ(bits(y[13]), 0x7F802000u);               // signalling NaN, payload 1 kept
  EXPECT_EQ(bits(y[14]), 0xFFC00000u);               // negative quiet NaN
}

TEST(GgufDequantize, Bf16Conversion) {
  const std::vector<uint16_t> h = {0x3F80, 0xC049, 0x0001, 0x7F80, 0xFF80, 0x7FC1, 0x8000};
  std::vector<uint8_t> bytes(2 * h.size());
  for (size_t i = 0; i < h.size(); ++i) put_u16(bytes, 2 * i, h[i]);
  const auto y = run(GgmlType::BF16, bytes, int64_t(h.size()));
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -3.140625f);
  EXPECT_EQ(bits(y[2]), 0x00010000u);  // subnormal 2^-133
  EXPECT_EQ(bits(y[3]), 0x7F800000u);
  EXPECT_EQ(bits(y[4]), 0xFF800000u);
  EXPECT_EQ(bits(y[5]), 0x7FC10000u);  // NaN, payload kept
  EXPECT_EQ(bits(y[6]), 0x80000000u);
}

TEST(GgufDequantize, F32IsCopiedBitForBitFromAnyAlignment) {
  const uint32_t words[] = {0x3F800000u, 0x7FA00001u, 0x80000001u, 0xC2F60000u};
  std::vector<uint8_t> buf(1 + sizeof words);
  std::memcpy(buf.data() + 1, words, sizeof words);  // misaligned source
  std::vector<float> y(4);
  dequantize(id(GgmlType::F32), buf.data() + 1, 4, y.data());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(bits(y[i]), words[i]) << i;
}

// ---- 32-element formats -------------------------------------------------------------

TEST(GgufDequantize, Q4_0) {
  // d = 2; element j < 16 is the low nibble of qs[j] (= j), element j + 16 the high
  // nibble (= 15 − j); y = d·(q − 8).
  std::vector<uint8_t> b(18);
  put_u16(b, 0, k_h_two);
  for (int j = 0; j < 16; ++j) b[2 + j] = uint8_t(j | ((15 - j) << 4));
  const auto y = run(GgmlType::Q4_0, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * float(j - 8)) << j;
    EXPECT_EQ(y[j + 16], 2.0f * float(7 - j)) << j;
  }
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[15], 14.0f);
  EXPECT_EQ(y[16], 14.0f);
  EXPECT_EQ(y[31], -16.0f);
}

TEST(GgufDequantize, Q4_1TwoBlocks) {
  // Block 0: d = 0.25, m = −1, low nibbles j, high nibbles 15 − j.
  // Block 1: d = −0.5, m = 3, every byte 0x21 (low 1, high 2).   y = d·q + m.
  std::vector<uint8_t> b(40);
  put_u16(b, 0, k_h_quarter);
  put_u16(b, 2, k_h_minus_one);
  for (int j = 0; j < 16; ++j) b[4 + j] = uint8_t(j | ((15 - j) << 4));
  put_u16(b, 20, k_h_minus_half);
  put_u16(b, 22, k_h_three);
  for (int j = 0; j < 16; ++j) b[24 + j] = 0x21;
  const auto y = run(GgmlType::Q4_1, b, 64);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * float(j) - 1.0f) << j;
    EXPECT_EQ(y[j + 16], 0.25f * float(15 - j) - 1.0f) << j;
    EXPECT_EQ(y[32 + j], 2.5f) << j;
    EXPECT_EQ(y[48 + j], 2.0f) << j;
  }
  EXPECT_EQ(y[15], 2.75f);
  EXPECT_EQ(y[31], -1.0f);
}

TEST(GgufDequantize, Q5_0) {
  // d = 0.5; qs all zero but qs[3] = 0x5A (element 3: 10, element 19: 5); qh has bits
  // 0, 19 and 31 set (element j's fifth bit is bit j).   y = d·(q − 16).
  std::vector<uint8_t> b(22);
  put_u16(b, 0, k_h_half);
  const uint32_t qh = (1u << 0) | (1u << 19) | (1u << 31);
  for (int i = 0; i < 4; ++i) b[2 + i] = uint8_t(qh >> (8 * i));
  b[6 + 3] = 0x5A;
  const auto y = run(GgmlType::Q5_0, b, 32);
  EXPECT_EQ(y[0], 0.0f);    // 16 → 0
  EXPECT_EQ(y[1], -8.0f);   // 0 → −16
  EXPECT_EQ(y[3], -3.0f);   // 10 → −6
  EXPECT_EQ(y[19], 2.5f);   // 5 + 16 = 21 → 5
  EXPECT_EQ(y[31], 0.0f);   // 16
  int minus8 = 0;
  for (float v : y) minus8 += v == -8.0f;
  EXPECT_EQ(minus8, 28);
}

TEST(GgufDequantize, Q5_1) {
  // d = 1, m = −16; qs[j] = j | j << 4; qh = 0xFFFF0000 (only the high half of the
  // block has fifth bits).   y = d·q + m.
  std::vector<uint8_t> b(24);
  put_u16(b, 0, k_h_one);
  put_u16(b, 2, k_h_minus_16);
  b[4] = 0x00, b[5] = 0x00, b[6] = 0xFF, b[7] = 0xFF;
  for (int j = 0; j < 16; ++j) b[8 + j] = uint8_t(j | (j << 4));
  const auto y = run(GgmlType::Q5_1, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], float(j) - 16.0f) << j;
    EXPECT_EQ(y[j + 16], float(j)) << j;
  }
}

TEST(GgufDequantize, Q8_0) {
  // d = −0.5; qs[j] = j − 16, then qs[0] = −128 and qs[31] = 127.   y = d·q.
  std::vector<uint8_t> b(34);
  put_u16(b, 0, k_h_minus_half);
  for (int j = 0; j < 32; ++j) b[2 + j] = uint8_t(int8_t(j - 16));
  b[2] = 0x80;
  b[33] = 0x7F;
  const auto y = run(GgmlType::Q8_0, b, 32);
  EXPECT_EQ(y[0], 64.0f);
  EXPECT_EQ(y[31], -63.5f);
  for (int j = 1; j < 31; ++j) EXPECT_EQ(y[j], -0.5f * float(j - 16)) << j;
}

// ---- K formats ----------------------------------------------------------------------

TEST(GgufDequantize, Q8_K) {
  // d = 0.25 as fp32; qs[j] = j − 128; bsums garbage (unused).   y = d·q.
  std::vector<uint8_t> b(292, 0xEE);
  const float d = 0.25f;
  std::memcpy(b.data(), &d, 4);
  for (int j = 0; j < 256; ++j) b[4 + j] = uint8_t(int8_t(j - 128));
  const auto y = run(GgmlType::Q8_K, b, 256);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(y[j], 0.25f * float(j - 128)) << j;
  EXPECT_EQ(y[0], -32.0f);
  EXPECT_EQ(y[255], 31.75f);
}

TEST(GgufDequantize, Q2_K) {
  // d = 1, dmin = 0.5; sub-block s (16 elements) has sc = s, m = 15 − s; quant of
  // element e is (e / 3) % 4, stored in bits 2k of qs[32h + l] for e = 128h + 32k + l.
  std::vector<uint8_t> b(84);
  auto q = [](int e) { return (e / 3) % 4; };
  for (int s = 0; s < 16; ++s) b[s] = uint8_t(s | ((15 - s) << 4));
  for (int e = 0; e < 256; ++e) b[16 + 32 * (e / 128) + e % 32] |= uint8_t(q(e) << (2 * ((e / 32) % 4)));
  put_u16(b, 80, k_h_one);
  put_u16(b, 82, k_h_half);
  const auto y = run(GgmlType::Q2_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 16;
    EXPECT_EQ(y[e], float(s) * float(q(e)) - 0.5f * float(15 - s)) << e;
  }
  EXPECT_EQ(y[0], -7.5f);     // s 0, q 0
  EXPECT_EQ(y[200], 22.5f);   // s 12, q 2: 24 − 1.5
  EXPECT_EQ(y[255], 15.0f);   // s 15, q 1
}

TEST(GgufDequantize, Q3_K) {
  // d = 0.5; sub-block s has the signed scale 4s − 32; quant of element e is
  // (3e % 8) − 4 in [−4, 4): low 2 bits at bits 2k of qs[32h + l] (e = 128h + 32k + l),
  // "high" bit (set: q = low, clear: q = low − 4) at bit e / 32 of hmask[e % 32].
  std::vector<uint8_t> b(110);
  auto q = [](int e) { return (3 * e) % 8 - 4; };
  auto sc = [](int s) { return 4 * s - 32; };
  for (int e = 0; e < 256; ++e) {
    const int v = q(e), low = v >= 0 ? v : v + 4, high = v >= 0 ? 1 : 0;
    b[e % 32] |= uint8_t(high << (e / 32));
    b[32 + 32 * (e / 128) + e % 32] |= uint8_t(low << (2 * ((e / 32) % 4)));
  }
  for (int s = 0; s < 16; ++s) {
    const int u = sc(s) + 32;  // 6 bits
    if (s < 8) b[96 + s] |= uint8_t(u & 0xF);
    else b[96 + s - 8] |= uint8_t((u & 0xF) << 4);
    b[96 + 8 + s % 4] |= uint8_t((u >> 4) << (2 * (s / 4)));
  }
  put_u16(b, 108, k_h_half);
  const auto y = run(GgmlType::Q3_K, b, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * float(sc(e / 16)) * float(q(e))) << e;
  EXPECT_EQ(y[0], 64.0f);    // sc −32, q −4
  EXPECT_EQ(y[77], -24.0f);  // sc −16, q 3
  EXPECT_EQ(y[255], 14.0f);  // sc 28, q 1
}

namespace {

// Q4_K / Q5_K scale packing, the inverse of the decoder's: 6-bit sc[j], m[j].
void pack_k4_scales(uint8_t* b, const int* sc, const int* m) {
  for (int j = 0; j < 4; ++j) {
    b[j] = uint8_t(sc[j] | ((sc[j + 4] >> 4) << 6));
    b[j + 4] = uint8_t(m[j] | ((m[j + 4] >> 4) << 6));
    b[j + 8] = uint8_t((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

}  // namespace

TEST(GgufDequantize, Q4_K) {
  // d = 0.25, dmin = −1; sub-block j (32 elements) has sc = 10 + 7j, m = 63 − 5j;
  // quant of element e is 7e % 16, nibble (e / 32) % 2 of qs[32(e / 64) + e % 32].
  std::vector<uint8_t> b(144);
  int sc[8], m[8];
  for (int j = 0; j < 8; ++j) sc[j] = 10 + 7 * j, m[j] = 63 - 5 * j;
  auto q = [](int e) { return (7 * e) % 16; };
  put_u16(b, 0, k_h_quarter);
  put_u16(b, 2, k_h_minus_one);
  pack_k4_scales(b.data() + 4, sc, m);
  for (int e = 0; e < 256; ++e) b[16 + 32 * (e / 64) + e % 32] |= uint8_t(q(e) << (4 * ((e / 32) % 2)));
  const auto y = run(GgmlType::Q4_K, b, 256);
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(y[e], 0.25f * float(sc[e / 32]) * float(q(e)) + float(m[e / 32])) << e;
  EXPECT_EQ(y[0], 63.0f);       // q 0: −dmin·63
  EXPECT_EQ(y[130], 176.0f);    // sc 38, m 43, q 14: 9.5·14 + 43
  EXPECT_EQ(y[255], 160.75f);   // sc 59, m 28, q 9: 14.75·9 + 28
}

TEST(GgufDequantize, Q5_K) {
  // d = 0.5, dmin = 0.25; sc = 63 − 8j, m = 20 + 6j; quant of element e is 11e % 32:
  // low 4 bits as in Q4_K, fifth bit at bit e / 32 of qh[e % 32].
  std::vector<uint8_t> b(176);
  int sc[8], m[8];
  for (int j = 0; j < 8; ++j) sc[j] = 63 - 8 * j, m[j] = 20 + 6 * j;
  auto q = [](int e) { return (11 * e) % 32; };
  put_u16(b, 0, k_h_half);
  put_u16(b, 2, k_h_quarter);
  pack_k4_scales(b.data() + 4, sc, m);
  for (int e = 0; e < 256; ++e) {
    b[16 + e % 32] |= uint8_t((q(e) >> 4) << (e / 32));
    b[48 + 32 * (e / 64) + e % 32] |= uint8_t((q(e) & 0xF) << (4 * ((e / 32) % 2)));
  }
  const auto y = run(GgmlType::Q5_K, b, 256);
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(y[e], 0.5f * float(sc[e / 32]) * float(q(e)) - 0.25f * float(m[e / 32])) << e;
  EXPECT_EQ(y[0], -5.0f);      // q 0, m 20
  EXPECT_EQ(y[161], 114.0f);   // sc 23, m 50, q 11: 11.5·11 − 12.5
  EXPECT_EQ(y[255], 58.0f);    // sc 7, m 62, q 21: 3.5·21 − 15.5
}

TEST(GgufDequantize, Q6_K) {
  // d = 0.125; sub-block s has the int8 scale 9s − 70; quant of element e is 13e % 64:
  // low 4 bits are nibble h of ql[64g + l] for e = 128g + 64h + l, high 2 bits are
  // bits 2k of qh[32g + l] for e = 128g + 32k + l.   y = (d·sc)·(q − 32).
  std::vector<uint8_t> b(210);
  auto q = [](int e) { return (13 * e) % 64; };
  auto sc = [](int s) { return 9 * s - 70; };
  for (int e = 0; e < 256; ++e) {
    const int g = e / 128, r = e % 128;
    b[64 * g + r % 64] |= uint8_t((q(e) & 0xF) << (4 * (r / 64)));
    b[128 + 32 * g + r % 32] |= uint8_t((q(e) >> 4) << (2 * (r / 32)));
  }
  for (int s = 0; s < 16; ++s) b[192 + s] = uint8_t(int8_t(sc(s)));
  put_u16(b, 208, k_h_eighth);
  const auto y = run(GgmlType::Q6_K, b, 256);
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(y[e], 0.125f * float(sc(e / 16)) * float(q(e) - 32)) << e;
  EXPECT_EQ(y[0], 280.0f);      // sc −70, q 0
  EXPECT_EQ(y[70], 76.5f);      // sc −34, q 14
  EXPECT_EQ(y[129], -4.75f);    // sc 2, q 13
  EXPECT_EQ(y[255], 154.375f);  // sc 65, q 51
}

// ---- Errors -------------------------------------------------------------------------

TEST(GgufDequantize, RejectsUnsupportedTypesAndBadSizes) {
  std::vector<uint8_t> src(1024);
  std::vector<float> dst(512);
  expect_error([&] { dequantize(id(GgmlType::IQ2_XS), src.data(), 256, dst.data()); },
               {"[gguf dequantize]", "IQ2_XS", "expected one of", "Q4_1", "Q6_K", "BF16"});
  expect_error([&] { dequantize(id(GgmlType::Q8_1), src.data(), 32, dst.data()); },
               {"[gguf dequantize]", "Q8_1"});
  expect_error([&] { dequantize(77, src.data(), 32, dst.data()); },
               {"[gguf dequantize]", "type 77", "expected one of"});
  expect_error([&] { dequantize(id(GgmlType::Q4_1), src.data(), 31, dst.data()); },
               {"[gguf dequantize]", "Q4_1", "31", "multiple of the block size 32"});
  expect_error([&] { dequantize(id(GgmlType::Q6_K), src.data(), -256, dst.data()); },
               {"[gguf dequantize]", "-256"});
  expect_error([&] { dequantize(id(GgmlType::Q8_0), nullptr, 32, dst.data()); },
               {"[gguf dequantize]", "null"});
  expect_error([&] { dequantize(id(GgmlType::F16), src.data(), 2, nullptr); },
               {"[gguf dequantize]", "null"});
  EXPECT_NO_THROW(dequantize(id(GgmlType::Q4_K), nullptr, 0, nullptr));
}

TEST(GgufQuantize, RefusesOtherTypesBadSizesAndNonFinite) {
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> out(68);
  const auto q8 = id(GgmlType::Q8_0);
  EXPECT_THROW(oal::io::quantize(id(GgmlType::Q4_1), x.data(), 64, out.data()), oal::Error);
  EXPECT_THROW(oal::io::quantize(q8, x.data(), 48, out.data()), oal::Error);
  x[40] = std::nanf("");
  try {
    oal::io::quantize(q8, x.data(), 64, out.data());
    ADD_FAILURE() << "a NaN was quantized";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("[gguf quantize] Q8_0: element 40"), std::string::npos)
        << e.what();
  }
}
