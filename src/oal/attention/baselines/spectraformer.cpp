#include "oal/attention/baselines/spectraformer.h"

#include <bit>
#include <cmath>

#include "oal/attention/baselines/random_draws.h"
#include "oal/core/error.h"

namespace oal::attn {
namespace {

bool is_power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace

at::Tensor hadamard_transform(const at::Tensor& x) {
  const int64_t D = x.size(-1);
  check(is_power_of_two(D), "hadamard", "length must be a power of 2, got {}", D);
  auto lead = x.sizes().vec();
  lead.pop_back();
  at::Tensor y = x.reshape({-1, D});
  const int64_t N = y.size(0);
  for (int64_t h = 1; h < D; h *= 2) {
    at::Tensor v = y.reshape({N, D / (2 * h), 2, h});
    at::Tensor a = v.select(2, 0), b = v.select(2, 1);
    y = at::stack({a + b, a - b}, 2).reshape({N, D});
  }
  lead.push_back(D);
  return y.reshape(lead);
}

at::Tensor hadamard_matrix(int64_t n) {
  at::Tensor H = at::empty({n, n}, at::kDouble);
  auto a = H.accessor<double, 2>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      a[i][j] = (std::popcount(static_cast<uint64_t>(i & j)) % 2) ? -1.0 : 1.0;
  return H;
}

SpectraFormerAttention::SpectraFormerAttention(at::Tensor B, at::Tensor G, at::Tensor S,
                                               at::Tensor perm, int64_t q_heads,
                                               int64_t kv_heads, int64_t chunk)
    : FeatureMapMethod(q_heads, kv_heads, B.numel(), chunk),
      B_(std::move(B)), G_(std::move(G)), S_(std::move(S)), perm_(perm.to(at::kLong)) {
  const int64_t D = head_dim();
  check(is_power_of_two(D), names::spectraformer, "FastFood needs a power-of-2 head dim, got {}",
        D);
  check(B_.dim() == 1 && G_.numel() == D && S_.numel() == D && perm_.numel() == D,
        names::spectraformer, "B, G, S, perm must all be [{}]", D);
  at::Tensor sorted = std::get<0>(perm_.sort());
  check(sorted.equal(at::arange(D, at::kLong)), names::spectraformer,
        "perm must be a permutation of 0..{}", D - 1);
}

std::shared_ptr<SpectraFormerAttention> SpectraFormerAttention::init(int64_t q_heads,
                                                                     int64_t kv_heads,
                                                                     int64_t head_dim,
                                                                     int64_t layer,
                                                                     uint64_t seed) {
  const int64_t D = head_dim;
  at::Tensor B = at::where(seeded_uniform({D}, derive_seed(seed, {layer, 0xb})) < 0.5,
                           -at::ones({D}, at::kDouble), at::ones({D}, at::kDouble));
  at::Tensor G = seeded_normal({D}, derive_seed(seed, {layer, 0x6}));
  at::Tensor chi = seeded_normal({D, D}, derive_seed(seed, {layer, 0x5})).norm(2, {1});
  at::Tensor S = chi / G.norm();
  at::Generator gen = seeded_generator(derive_seed(seed, {layer, 0x9}));
  at::Tensor perm = at::randperm(D, gen, at::TensorOptions().dtype(at::kLong));
  return std::make_shared<SpectraFormerAttention>(B.to(at::kFloat), G.to(at::kFloat),
                                                  S.to(at::kFloat), perm, q_heads, kv_heads);
}

at::Tensor SpectraFormerAttention::fastfood(const at::Tensor& u) const {
  const auto dt = u.scalar_type();
  at::Tensor x = hadamard_transform(u * B_.to(dt));
  x = x.index_select(-1, perm_) * G_.to(dt);
  return hadamard_transform(x) * S_.to(dt) / std::sqrt(double(head_dim()));
}

at::Tensor SpectraFormerAttention::fastfood_dense() const {
  const int64_t D = head_dim();
  at::Tensor H = hadamard_matrix(D);
  at::Tensor P = at::zeros({D, D}, at::kDouble);  // (P y)_i = y[perm[i]]
  auto acc = perm_.accessor<int64_t, 1>();
  for (int64_t i = 0; i < D; ++i) P[i][acc[i]] = 1.0;
  auto dg = [](const at::Tensor& t) { return at::diag(t.detach().to(at::kDouble)); };
  return at::matmul(dg(S_),
                    at::matmul(H, at::matmul(dg(G_), at::matmul(P, at::matmul(H, dg(B_)))))) /
         std::sqrt(double(D));
}

FeatureMaps SpectraFormerAttention::features(const at::Tensor& q, const at::Tensor& k) const {
  const double D = double(head_dim());
  const double scale = std::pow(D, -0.25);
  at::Tensor qs = q.to(at::kDouble) * scale;
  at::Tensor ks = expand_kv_heads(k.to(at::kDouble), q_heads()) * scale;
  // OPRF coefficient per (query head, token) from the token's own query-key pair.
  at::Tensor Fs = (qs + ks).pow(2).sum(-1, true);
  at::Tensor rho = 2 * D / (at::sqrt((2 * Fs + D).pow(2) + 8 * Fs * D) + 2 * Fs + D);
  at::Tensor A = (1 - 1 / rho) / 8;
  at::Tensor beta = at::sqrt(1 - 4 * A);
  at::Tensor omega2 = (S_ * G_ * B_).to(at::kDouble).pow(2).sum();
  auto feat = [&](const at::Tensor& xs) {
    at::Tensor z = fastfood(xs * scale);
    z = at::cat({z, at::ones_like(z.narrow(-1, 0, 1))}, -1);
    at::Tensor logit = A * omega2 + beta * z - xs.pow(2).sum(-1, true);
    return at::exp(logit - std::get<0>(logit.max(-1, true))) + k_spectraformer_offset;
  };
  FeatureMaps f;
  f.q = feat(qs);
  f.k = feat(ks);
  return f;
}

TensorMap SpectraFormerAttention::state_dict() const {
  return {{"B", B_.detach().clone()},
          {"G", G_.detach().clone()},
          {"S", S_.detach().clone()},
          {"perm", perm_.clone()}};
}

void SpectraFormerAttention::load_state_dict(const TensorMap& tensors) {
  const int64_t D = head_dim();
  at::Tensor B = take(tensors, "B", {D}, names::spectraformer);
  at::Tensor G = take(tensors, "G", {D}, names::spectraformer);
  at::Tensor S = take(tensors, "S", {D}, names::spectraformer);
  at::Tensor perm = take(tensors, "perm", {D}, names::spectraformer, at::kLong);
  check(std::get<0>(perm.sort()).equal(at::arange(D, at::kLong)), names::spectraformer,
        "perm must be a permutation of 0..{}", D - 1);
  at::NoGradGuard g;
  B_.copy_(B);
  G_.copy_(G);
  S_.copy_(S);
  perm_ = perm;
}

}  // namespace oal::attn
