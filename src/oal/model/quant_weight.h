#pragma once
// A weight matrix kept in a ggml block type (as a GGUF file stores it, or converted to
// Q8_0 by `--weights q8_0`), instead of being widened to fp32: 4.5–8.5 bits per weight
// where fp32 takes 32 (docs/quantized.md). Linear runs it through
// simd/linear_quant.h; the embedding looks rows up through dequantize_rows.
#include <ATen/ATen.h>

#include <cstdint>

#include "oal/simd/linear_quant.h"

namespace oal::model {

struct QuantWeight {
  uint32_t type = 0;  // io::GgmlType id
  int64_t rows = 0;   // out_features (vocab for the embedding)
  int64_t cols = 0;   // in_features (hidden for the embedding)
  at::Tensor bytes;   // uint8 [rows, row bytes], contiguous CPU (a view of a mapped file, or owned)

  bool defined() const { return bytes.defined(); }
  simd::QuantMatrix view() const;
  // The whole matrix as fp32 [rows, cols] (for training and non-CPU devices).
  at::Tensor dequantize() const;
  // rows idx [n] int64 (each in [0, rows)) as fp32 [n, cols].
  at::Tensor dequantize_rows(const at::Tensor& idx) const;
};

// `bytes` uint8 [rows, row bytes] of ggml type `type` for a [rows, cols] matrix, checked
// (oal::Error "[quant weight] ..." naming `what` on a size that does not match).
QuantWeight make_quant_weight(uint32_t type, int64_t rows, int64_t cols, at::Tensor bytes,
                              const std::string& what);

// w [rows, cols] float (any float dtype; cols a multiple of 32) as Q8_0.
QuantWeight quantize_q8_0(const at::Tensor& w, const std::string& what);

}  // namespace oal::model
