#include "oal/model/weight_format.h"

#include <array>
#include <utility>

#include "oal/core/error.h"
#include "oal/io/gguf_quants.h"

namespace oal::model {
namespace {

constexpr std::array<std::pair<WeightFormat, const char*>, 5> k_names = {{
    {WeightFormat::automatic, "auto"},
    {WeightFormat::f32, "f32"},
    {WeightFormat::stored, "stored"},
    {WeightFormat::bf16, "bf16"},
    {WeightFormat::q8_0, "q8_0"},
}};

constexpr uint32_t k_q8_0 = static_cast<uint32_t>(io::GgmlType::Q8_0);

HeldWeight from_float(const at::Tensor& t, WeightFormat format, const std::string& name) {
  switch (format) {
    case WeightFormat::stored:
      if (t.scalar_type() != at::kDouble) return {t, {}};
      break;
    case WeightFormat::bf16: return {t.to(at::kBFloat16).contiguous(), {}};
    case WeightFormat::q8_0:
      if (t.dim() == 2 && t.size(1) % 32 == 0) return {{}, quantize_q8_0(t, name)};
      break;
    case WeightFormat::automatic:
    case WeightFormat::f32: break;
  }
  return {t.to(at::kFloat).contiguous(), {}};
}

}  // namespace

WeightFormat parse_weight_format(const std::string& name) {
  for (const auto& [f, n] : k_names)
    if (name == n) return f;
  fail("weights", "unknown weight format '{}'; expected auto, f32, stored, bf16 or q8_0", name);
}

std::string weight_format_name(WeightFormat format) {
  for (const auto& [f, n] : k_names)
    if (f == format) return n;
  return "?";
}

HeldWeight hold_weight(const at::Tensor& dense, const QuantWeight& quant, WeightFormat format,
                       const std::string& name) {
  if (!quant.defined()) return from_float(dense, format, name);
  switch (format) {
    case WeightFormat::automatic:
    case WeightFormat::stored: return {{}, quant};
    case WeightFormat::q8_0:
      if (quant.type == k_q8_0) return {{}, quant};
      return {{}, quantize_q8_0(quant.dequantize(), name)};
    case WeightFormat::bf16: return {quant.dequantize().to(at::kBFloat16), {}};
    case WeightFormat::f32: break;
  }
  return {quant.dequantize(), {}};
}

}  // namespace oal::model
