#pragma once
// ggml's tensor types as stored in GGUF files: their block layouts, byte sizes and
// dequantization to fp32.
//
// A ggml tensor of n elements of a block type is n / block_size blocks of block_bytes
// bytes each, back to back; each block holds its own scales (fp16 unless noted) and
// packed integer quants. The layouts and formulas follow ggml (ggml-common.h,
// ggml-quants.c) and the gguf Python package (gguf/quants.py), the reference that
// tests/io/test_gguf_quants_reference.cpp compares with, bit for bit. Every block's
// layout is written above the function that decodes it in gguf_quants.cpp.
//
// Data are little-endian, as ggml writes them on every common machine; big-endian
// GGUF files are not supported.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace oal::io {

// ggml's type ids as stored in GGUF tensor infos (ggml.h enum ggml_type). Ids 4, 5,
// 31..33 and 36..38 were removed from ggml and are unknown here.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct GgmlTypeInfo {
  std::string_view name;  // "Q4_1", as the gguf package and gguf-dump spell it
  int64_t block_size;     // elements per block (1 for the plain types)
  int64_t block_bytes;    // bytes per block
  bool dequantizable;     // dequantize() decodes it
};

// Layout of type id `id` (every type the gguf package's GGML_QUANT_SIZES knows, plus
// MXFP4, so a file holding e.g. IQ2_XS tensors can still be listed and size-checked),
// or nullopt for an unknown id.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);

// "Q4_1", or "type 77" for an unknown id.
std::string ggml_type_name(uint32_t id);

// Bytes that n elements of type `id` occupy. Throws oal::Error("[gguf] ...") when the
// type is unknown, n < 0, n is not a multiple of the block size, or the size does not
// fit in an int64 (so that it can always be a file offset).
uint64_t ggml_nbytes(uint32_t id, int64_t n);

// Dequantizes n elements (n >= 0, a multiple of the block size) of type `id` from
// `src` (ggml_nbytes(id, n) bytes, any alignment) into dst[0, n) as fp32. Throws
// oal::Error("[gguf dequantize] ...") for a type that is not dequantizable (naming it
// and listing the supported ones), a bad n, or a null pointer with n > 0.
// Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K, Q8_K. Single-threaded; callers split large tensors by blocks.
void dequantize(uint32_t id, const uint8_t* src, int64_t n, float* dst);

// Quantizes n floats (n >= 0, a multiple of 32) of src into dst (ggml_nbytes(type, n)
// bytes) as ggml's reference quantizer does (quantize_row_q8_0_ref, gguf/quants.py):
// per block of 32, d = max|x| / 127 stored as fp16 (round to nearest even), q =
// round(x / d) half away from zero, computed with 1/d from the unrounded d. Only Q8_0
// (what `--weights q8_0` converts float checkpoints to); any other type, a bad n, or a
// non-finite input is an oal::Error("[gguf quantize] ...").
void quantize(uint32_t id, const float* src, int64_t n, uint8_t* dst);

// The scalar conversions dequantize() uses (exact, subnormals, infinities and NaN
// payloads kept).
float fp16_to_fp32(uint16_t h);
float bf16_to_fp32(uint16_t h);

}  // namespace oal::io
