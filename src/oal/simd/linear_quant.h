#pragma once
// Model projections y = x Wᵀ + b with W kept as a GGUF file stores it (ggml blocks):
// the weights are never widened to a whole fp32 matrix, so a decode step streams
// 4.5–8.5 bits per weight instead of 32 (docs/quantized.md).
//
// Fast paths (Highway, every SIMD target): Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 — the
// 32-element block types — and Q4_K, Q5_K, Q6_K — the super-block types of Q4_K_M /
// Q5_K_M files, whose rows not a multiple of 256 long fall back to Q5_0 / Q8_0 —
// dequantized in registers 32 weights at a time (Q8_0/Q4_0/Q4_1 also, for decode with
// QuantDot::int8, multiplied as integers with int8-rounded activations) — and F16 / BF16
// rows (16-bit weights as a safetensors file stores them). Every other type
// io::dequantize() decodes (Q2_K, Q3_K) runs through the scalar decoder one row at a
// time: correct, slower. Rows must be whole groups of 32 values for every type. The reference the
// tests compare with is io::dequantize of the whole matrix followed by an fp64 product.
#include <cstdint>
#include <string_view>

namespace oal::simd {

// How the decode pass (M <= 32 rows) multiplies Q8_0 / Q4_0 / Q4_1 weights:
//   dequant  each block expanded to fp32 in registers and FMA'd with x (x used exactly);
//   int8     as llama.cpp does: x quantized per 32-block to int8 (x ≈ dx·qx, dx =
//            max|x| / 127), an integer dot product per block, one fp32 FMA per block
//            with the two scales (x carries up to 0.4 % rounding per block).
// Prefill (M > 32) and the other types (the K types too) always dequantize. A property of
// each projection, chosen when a model is built (model::TransformerOptions::quant_dot;
// the CLI's --quant-dot or OAL_QUANT_DOT) and passed to every call.
enum class QuantDot { dequant, int8 };
std::string_view quant_dot_name(QuantDot dot);
// "dequant" or "int8"; throws oal::Error("linear_quant") naming both otherwise.
QuantDot parse_quant_dot(std::string_view name);

// A [rows, cols] matrix of ggml type `type` (an io::GgmlType id), row after row, each
// row io::ggml_nbytes(type, cols) bytes (cols a multiple of the type's block size).
// Any alignment; the memory is only read.
struct QuantMatrix {
  uint32_t type = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;
};

// Whether `type` has the SIMD path (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K,
// F16, BF16).
bool has_fast_quant_path(uint32_t type);
// Whether `type` has the int8 route (Q8_0, Q4_0, Q4_1).
bool has_int8_path(uint32_t type);

// y[M, w.rows] = x[M, w.cols] · wᵀ (+ bias[w.rows] when non-null), fp32, rows
// contiguous. M <= 32 (decoding, a server's batch): one pass over w, each row's blocks
// decoded once per group of 8 x rows and dotted with each of them. Larger M: panels of
// w rows decoded to fp32 and multiplied by linear_f32's packed GEMM (the decode cost is
// then 1/M of the product's). `dot` picks the decode pass's route (above).
// threads 0 = ATen's count. Throws oal::Error("[linear_quant] ...") for non-positive
// sizes, an unknown or undecodable type, or cols not a multiple of its block and of 32.
void linear_quant(int64_t M, const float* x, const QuantMatrix& w, const float* bias, float* y,
                  QuantDot dot = QuantDot::dequant, int threads = 0);

// Rows [r0, r1) of w as fp32 into out[(r1 - r0), w.cols]: bit for bit what
// io::dequantize gives (the SIMD decoders compute d·q + m with one rounding, as the
// scalar one does; its products are exact).
void dequantize_rows(const QuantMatrix& w, int64_t r0, int64_t r1, float* out);

}  // namespace oal::simd
