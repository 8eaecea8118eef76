#include "oal/model/decode_layer.h"

#include <cmath>

#include "oal/attention/simd_path.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::model {
namespace {

constexpr const char* k_op = "decode layer";

bool fp32_cpu_constant(const at::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == at::kFloat &&
         t.is_contiguous() && !attn::records_grad(t);
}

// out[m] = x[m] / sqrt(mean(x[m]²) + eps) ⊙ w for M rows of D: rms_norm (transformer.h)
// with the mean of squares accumulated in fp64.
void rms_norm_rows(const float* x, const float* w, double eps, int64_t M, int64_t D, float* out) {
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * D;
    float* o = out + m * D;
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += static_cast<double>(xr[d]) * xr[d];
    const auto r = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(D) + eps));
    for (int64_t d = 0; d < D; ++d) o[d] = xr[d] * r * w[d];
  }
}

// g = silu(g) ⊙ u over n values (the MLP's gate).
void silu_mul(float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void add_into(float* out, const float* a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] += a[i];
}

// What decode_layer reads itself: x and the norms. Each projection guards its own
// weights (Linear::forward_into checks simd_ready).
bool rows_and_norms_ready(const TransformerLayer& L, const at::Tensor& x) {
  return x.device().is_cpu() && x.scalar_type() == at::kFloat && !attn::records_grad(x) &&
         fp32_cpu_constant(L.attn_norm) && fp32_cpu_constant(L.mlp_norm);
}

}  // namespace

std::string decode_layer_blocker(const TransformerLayer& L) {
  if (!fp32_cpu_constant(L.attn_norm) || !fp32_cpu_constant(L.mlp_norm))
    return "a norm weight is not contiguous fp32 on the CPU (or records autograd)";
  const std::pair<const char*, const Linear*> projections[] = {
      {"q_proj", &L.q_proj},       {"k_proj", &L.k_proj},   {"v_proj", &L.v_proj},
      {"o_proj", &L.o_proj},       {"gate_proj", &L.gate_proj}, {"up_proj", &L.up_proj},
      {"down_proj", &L.down_proj}};
  for (const auto& [name, p] : projections) {
    const std::string why = p->simd_blocker();
    if (!why.empty()) return std::string(name) + ": " + why;
  }
  return "";
}

bool decode_layer_can_run(const TransformerLayer& L, const at::Tensor& x) {
  return rows_and_norms_ready(L, x) && decode_layer_blocker(L).empty();
}

at::Tensor decode_layer(const TransformerLayer& L, const ModelConfig& c, const Rope& rope,
                        const at::Tensor& x, const std::vector<int64_t>& positions,
                        const AttendRows& attend) {
  const int64_t M = x.size(0), H = c.hidden_size, D = c.head_dim, F = c.intermediate_size;
  check(x.dim() == 2 && x.size(1) == H && static_cast<int64_t>(positions.size()) == M, k_op,
        "expected x [M, {}] and M positions, got x {} and {} positions", H, shape_str(x),
        positions.size());
  check(
      rows_and_norms_ready(L, x), k_op,
      "x and the norms must be fp32 on the CPU without autograd; the layer needs the tensor path");
  const at::Tensor xc = x.contiguous();
  const float* xp = xc.data_ptr<float>();
  const auto options = xc.options();

  std::vector<float> h(static_cast<size_t>(M * H));
  rms_norm_rows(xp, L.attn_norm.data_ptr<float>(), c.rms_norm_eps, M, H, h.data());
  at::Tensor q = at::empty({M, c.num_heads, 1, D}, options);
  at::Tensor k = at::empty({M, c.num_kv_heads, 1, D}, options);
  at::Tensor v = at::empty({M, c.num_kv_heads, 1, D}, options);
  L.q_proj.forward_into(M, h.data(), q.data_ptr<float>());
  L.k_proj.forward_into(M, h.data(), k.data_ptr<float>());
  L.v_proj.forward_into(M, h.data(), v.data_ptr<float>());
  rope.rotate_rows(q.data_ptr<float>(), M, c.num_heads, positions.data());
  rope.rotate_rows(k.data_ptr<float>(), M, c.num_kv_heads, positions.data());

  const at::Tensor y = attend(q, k, v).contiguous();
  check(y.scalar_type() == at::kFloat && y.numel() == M * c.num_heads * D, k_op,
        "attention returned {} {}, expected fp32 [{}, {}, 1, {}]", c10::toString(y.scalar_type()),
        shape_str(y), M, c.num_heads, D);
  // y [M, Hq, 1, D] is [M, Hq·D] row by row: the heads in order, as o_proj reads them.
  at::Tensor out = at::empty({M, H}, options);
  float* op = out.data_ptr<float>();
  L.o_proj.forward_into(M, y.data_ptr<float>(), op);
  add_into(op, xp, M * H);

  rms_norm_rows(op, L.mlp_norm.data_ptr<float>(), c.rms_norm_eps, M, H, h.data());
  std::vector<float> gate(static_cast<size_t>(M * F)), up(static_cast<size_t>(M * F));
  L.gate_proj.forward_into(M, h.data(), gate.data());
  L.up_proj.forward_into(M, h.data(), up.data());
  silu_mul(gate.data(), up.data(), M * F);
  L.down_proj.forward_into(M, gate.data(), h.data());
  add_into(op, h.data(), M * H);
  return out;
}

}  // namespace oal::model
