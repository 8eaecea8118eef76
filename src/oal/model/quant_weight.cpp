#include "oal/model/quant_weight.h"

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"
#include "oal/io/gguf_quants.h"

namespace oal::model {
namespace {

constexpr const char* k_op = "quant weight";

}  // namespace

simd::QuantMatrix QuantWeight::view() const {
  check(defined(), k_op, "view of an empty quantized weight");
  return {type, rows, cols, bytes.data_ptr<uint8_t>()};
}

at::Tensor QuantWeight::dequantize() const {
  at::Tensor out = at::empty({rows, cols}, at::TensorOptions().dtype(at::kFloat));
  simd::dequantize_rows(view(), 0, rows, out.data_ptr<float>());
  return out;
}

at::Tensor QuantWeight::dequantize_rows(const at::Tensor& idx) const {
  check(idx.dim() == 1 && idx.scalar_type() == at::kLong, k_op,
        "row indices: expected int64 [n], got {} {}", c10::toString(idx.scalar_type()),
        shape_str(idx));
  const at::Tensor ix = idx.to(at::kCPU).contiguous();
  const int64_t n = ix.numel();
  at::Tensor out = at::empty({n, cols}, at::TensorOptions().dtype(at::kFloat));
  const int64_t* p = ix.data_ptr<int64_t>();
  const simd::QuantMatrix m = view();
  for (int64_t i = 0; i < n; ++i) {
    check(p[i] >= 0 && p[i] < rows, k_op, "row {} out of range [0, {})", p[i], rows);
    simd::dequantize_rows(m, p[i], p[i] + 1, out.data_ptr<float>() + i * cols);
  }
  return out;
}

QuantWeight make_quant_weight(uint32_t type, int64_t rows, int64_t cols, at::Tensor bytes,
                              const std::string& what) {
  const int64_t row_bytes = static_cast<int64_t>(io::ggml_nbytes(type, cols));
  check(bytes.scalar_type() == at::kByte && bytes.device().is_cpu() && bytes.is_contiguous(),
        k_op, "{}: expected contiguous CPU uint8 bytes", what);
  check(bytes.dim() == 2 && bytes.size(0) == rows && bytes.size(1) == row_bytes, k_op,
        "{}: {} [{}, {}] needs bytes [{}, {}], got {}", what, io::ggml_type_name(type), rows,
        cols, rows, row_bytes, shape_str(bytes));
  return {type, rows, cols, std::move(bytes)};
}

QuantWeight quantize_q8_0(const at::Tensor& w, const std::string& what) {
  check(w.dim() == 2 && w.is_floating_point(), k_op, "{}: expected a 2-D float matrix, got {}",
        what, shape_str(w));
  const int64_t rows = w.size(0), cols = w.size(1);
  check(cols % 32 == 0, k_op, "{}: Q8_0 needs in_features divisible by 32, got {}", what, cols);
  const uint32_t type = static_cast<uint32_t>(io::GgmlType::Q8_0);
  const at::Tensor f = w.detach().to(at::kCPU).to(at::kFloat).contiguous();
  at::Tensor bytes = at::empty({rows, static_cast<int64_t>(io::ggml_nbytes(type, cols))},
                               at::TensorOptions().dtype(at::kByte));
  io::quantize(type, f.data_ptr<float>(), rows * cols, bytes.data_ptr<uint8_t>());
  return {type, rows, cols, std::move(bytes)};
}

}  // namespace oal::model
