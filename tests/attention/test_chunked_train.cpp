// The linear-time training form of the chunked HD evaluation (oal/chunked_train.h): the
// output, the state after and every gradient (q, k, v, L, the initial state) against
// LibTorch autograd of the O(T²) pairwise reference (windowed_pairwise without a window,
// κ from test_util.h's kappa_from) and of the state's
// definition, across lengths, chunk sizes (1, uneven, longer than T) and GQA; the fp32
// path against the fp64 reference; the windowed layer on it against the pairwise
// training kernel; and the length at which the layers switch to it.
#include <gtest/gtest.h>

#include <torch/csrc/autograd/function.h>

#include <set>
#include <string>
#include <vector>

#include "oal/attention/kernel_train.h"
#include "oal/attention/oal/chunked_attention.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/attention/windowed/windowed_reference.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::randn;
using oal::test::rel_err;

// The state's definition (recurrent_state.h): S = sum_j phiK(k_j) [v_j ; 1]ᵀ with
// phiK(k) = [1, k, k_r k_t (r <= t, triu order)].  k [B, H, T, d], v [B, H, T, Dv].
at::Tensor state_of(const at::Tensor& k, const at::Tensor& v) {
  const int64_t d = k.size(-1);
  const at::Tensor tri = at::triu_indices(d, d, 0, at::TensorOptions().dtype(at::kLong));
  const at::Tensor pairs = k.index_select(-1, tri[0]) * k.index_select(-1, tri[1]);
  const at::Tensor phi = at::cat({at::ones_like(k.narrow(-1, 0, 1)), k, pairs}, -1);
  const at::Tensor u = at::cat({v, at::ones_like(v.narrow(-1, 0, 1))}, -1);
  return at::matmul(phi.transpose(-1, -2), u);
}

// Whether y's autograd graph holds a node whose name contains `name`.
bool graph_has(const at::Tensor& y, const std::string& name) {
  std::vector<torch::autograd::Node*> pending{y.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  while (!pending.empty()) {
    torch::autograd::Node* n = pending.back();
    pending.pop_back();
    if (n == nullptr || !seen.insert(n).second) continue;
    if (n->name().find(name) != std::string::npos) return true;
    for (const auto& e : n->next_edges()) pending.push_back(e.function.get());
  }
  return false;
}

struct Shape {
  int64_t batch, hq, hkv, prefix, T, d, dv, chunk;
};

struct Result {
  at::Tensor y, S, dq, dk, dv, dL;
};

// Loss = <y, wy> + <S_final, wS> over a prefix of `prefix` tokens (its state handed on as
// the initial state of the evaluated part, so its gradient flows back through it) and T
// evaluated tokens. `reference`: windowed_pairwise over the whole sequence and the state's
// definition, fp64; else hd_chunked twice under autograd (the training form).
Result run(const Shape& sh, at::ScalarType dt, bool reference, uint64_t seed,
           HdBackend backend = HdBackend::automatic) {
  const int64_t N = sh.prefix + sh.T;
  auto leaf = [](const at::Tensor& t, at::ScalarType t_dt) {
    return t.to(t_dt).set_requires_grad(true);
  };
  const at::ScalarType in = reference ? at::kDouble : dt;
  at::Tensor q = leaf(randn({sh.batch, sh.hq, N, sh.d}, seed), in);
  at::Tensor k = leaf(randn({sh.batch, sh.hkv, N, sh.d}, seed + 1), in);
  at::Tensor v = leaf(randn({sh.batch, sh.hkv, N, sh.dv}, seed + 2), in);
  LayerKernels lk = LayerKernels::from(oal::test::random_kernels(sh.hq, sh.d, 3, seed + 3), in);
  lk.L.set_requires_grad(true);
  const at::Tensor wy = randn({sh.batch, sh.hq, sh.T, sh.dv}, seed + 4);
  const int64_t Df = 1 + sh.d + sh.d * (sh.d + 1) / 2;
  const at::Tensor wS = randn({sh.batch, sh.hkv, Df, sh.dv + 1}, seed + 5, 0.01);
  at::Tensor y, S;
  if (reference) {
    y = windowed_pairwise(q, k, v, oal::test::kappa_from(q, k, lk), at::zeros({sh.hq}, at::kDouble),
                          Window{})
            .narrow(2, sh.prefix, sh.T);
    S = state_of(k, v);
  } else {
    const HdOptions o{.chunk = sh.chunk, .backend = backend};
    HdPrefill head = hd_chunked(q.narrow(2, 0, sh.prefix), k.narrow(2, 0, sh.prefix),
                                v.narrow(2, 0, sh.prefix), lk, o);
    HdPrefill rest = hd_chunked(q.narrow(2, sh.prefix, sh.T), k.narrow(2, sh.prefix, sh.T),
                                v.narrow(2, sh.prefix, sh.T), lk, o,
                                sh.prefix > 0 ? &head.state : nullptr);
    y = rest.y;
    S = rest.state.S;
    EXPECT_EQ(graph_has(y, "ChunkedTrain"), backend == HdBackend::automatic);
  }
  ((y.to(at::kDouble) * wy).sum() + (S.to(at::kDouble) * wS).sum()).backward();
  return {y.detach(), S.detach(), q.grad(), k.grad(), v.grad(), lk.L.grad()};
}

void expect_close(const Result& a, const Result& r, double tol, const std::string& where) {
  for (const Result* x : {&a, &r})
    for (const at::Tensor* t : {&x->y, &x->S, &x->dq, &x->dk, &x->dv, &x->dL})
      ASSERT_TRUE(t->defined()) << where << (x == &a ? " (training form)" : " (reference)")
                                << ": value " << (t - &x->y);
  EXPECT_LT(rel_err(a.y, r.y), tol) << "y " << where;
  EXPECT_LT(rel_err(a.S, r.S), tol) << "S " << where;
  EXPECT_LT(rel_err(a.dq, r.dq), tol) << "dq " << where;
  EXPECT_LT(rel_err(a.dk, r.dk), tol) << "dk " << where;
  EXPECT_LT(rel_err(a.dv, r.dv), tol) << "dv " << where;
  EXPECT_LT(rel_err(a.dL, r.dL), tol) << "dL " << where;
}

std::string describe(const Shape& s) {
  return "B=" + std::to_string(s.batch) + " Hq/Hkv=" + std::to_string(s.hq) + "/" +
         std::to_string(s.hkv) + " prefix=" + std::to_string(s.prefix) + " T=" +
         std::to_string(s.T) + " d=" + std::to_string(s.d) + " chunk=" + std::to_string(s.chunk);
}

// Lengths not a multiple of the chunk, a chunk of 1 and one longer than the sequence,
// GQA groups of 1, 2 and 7, with and without an initial state (one token after a
// two-token prefix: alone, a token's output is its value and q would get no gradient).
const std::vector<Shape> k_shapes = {
    {1, 2, 2, 2, 1, 6, 3, 4},   {2, 4, 2, 0, 37, 6, 5, 8},  {1, 4, 2, 5, 23, 8, 4, 1},
    {1, 7, 1, 9, 41, 8, 8, 16}, {1, 2, 1, 3, 20, 5, 2, 64}, {1, 6, 2, 0, 130, 16, 16, 64}};

// The training form in `dt` against the fp64 reference over every shape.
void expect_every_shape_close(at::ScalarType dt, uint64_t seed, double tol) {
  for (const Shape& sh : k_shapes) {
    seed += 10;
    expect_close(run(sh, dt, false, seed), run(sh, dt, true, seed), tol, describe(sh));
  }
}

// fp64 both ways: the chunked and the pairwise sums differ only in summation order and
// in the expanded state readout (phiQ · S) against the factored weights, ~1e-15 relative
// per operation over at most 130 keys; 1e-9 leaves room and any wrong term is >= 1e-3.
TEST(ChunkedTrain, MatchesAutogradOfThePairwiseReferenceInFp64) {
  expect_every_shape_close(at::kDouble, 300, 1e-9);
}

// fp32 against the fp64 reference: the state readout sums products of up to 130 keys'
// degree-2 features (~6e-8 relative rounding each, magnified where the expanded readout
// cancels), and the gradients chain three such stages; 1e-4 bounds that with margin.
TEST(ChunkedTrain, Fp32StaysCloseToTheFp64Reference) {
  expect_every_shape_close(at::kFloat, 400, 1e-4);
}

// The ATen backend keeps plain autograd of the chunk loop (what other devices run): the
// same function, so the same tolerance as the training form in fp64.
TEST(ChunkedTrain, AtenBackendIsAutogradOfTheChunkLoop) {
  uint64_t seed = 600;
  for (const Shape& sh : {k_shapes[1], k_shapes[2], k_shapes[3]}) {
    seed += 10;
    expect_close(run(sh, at::kDouble, false, seed, HdBackend::aten),
                 run(sh, at::kDouble, true, seed), 1e-9, describe(sh));
  }
}

// The windowed layer trained through the chunked form (chunked_train_from = 1) against
// the pairwise training kernel (the default at these lengths), with kernel keys in every
// case (S + W < T; beyond that neither form has anything to do): the same function, so the
// output and the gradients of q, k, v, L and c_h agree to fp32 rounding (2e-4: both fp32,
// different summation orders, as KernelTrain's tolerance against its reference).
TEST(ChunkedTrain, WindowedLayerMatchesThePairwiseKernel) {
  uint64_t seed = 500;
  for (const Window& w : {Window{4, 16}, Window{1, 3}, Window{0, 8}, Window{2, 30}})
    for (int64_t T : {33, 150}) {
      seed += 10;
      std::vector<Result> out;
      std::vector<at::Tensor> dc;
      for (int64_t from : {int64_t{1}, k_default_chunked_train_from}) {
        auto base = std::make_shared<QuadraticAttention>(QuadraticAttention::from_kernels(
            oal::test::random_kernels(4, 8, 3, seed), {.chunk = 16, .chunked_train_from = from},
            /*trainable=*/true, at::kFloat));
        WindowedAttention layer(base, w, randn({4}, seed + 1), /*trainable=*/true);
        const at::Tensor q = randn({1, 4, T, 8}, seed + 2, 1.0, at::kFloat).set_requires_grad(true);
        const at::Tensor k = randn({1, 2, T, 8}, seed + 3, 1.0, at::kFloat).set_requires_grad(true);
        const at::Tensor v = randn({1, 2, T, 8}, seed + 4, 1.0, at::kFloat).set_requires_grad(true);
        const at::Tensor y = layer.forward(q, k, v);
        const bool chunked = from == 1;
        EXPECT_EQ(graph_has(y, "ChunkedTrain"), chunked) << w.describe() << " T=" << T;
        EXPECT_EQ(graph_has(y, "KernelTrain"), from != 1) << w.describe() << " T=" << T;
        (y * randn({1, 4, T, 8}, seed + 5, 1.0, at::kFloat)).sum().backward();
        out.push_back({y.detach(), at::zeros({1}), q.grad(), k.grad(), v.grad(),
                       base->kernels().L.grad()});
        dc.push_back(layer.log_scale().grad());
      }
      const std::string where = w.describe() + " T=" + std::to_string(T);
      expect_close(out[0], out[1], 2e-4, where);
      EXPECT_LT(rel_err(dc[0], dc[1]), 2e-4) << "dc " << where;
    }
}

// The layers switch from the pairwise kernel to the chunked form at chunked_train_from
// tokens.
TEST(ChunkedTrain, LayersSwitchToItAtTheConfiguredLength) {
  QuadraticAttention layer = QuadraticAttention::from_kernels(
      oal::test::random_kernels(2, 8, 2, 7), {.chunk = 16, .chunked_train_from = 64},
      /*trainable=*/true, at::kFloat);
  for (int64_t T : {63, 64, 100}) {
    const at::Tensor q = randn({1, 2, T, 8}, 1, 1.0, at::kFloat).set_requires_grad(true);
    const at::Tensor k = randn({1, 2, T, 8}, 2, 1.0, at::kFloat);
    const at::Tensor v = randn({1, 2, T, 8}, 3, 1.0, at::kFloat);
    const at::Tensor y = layer.forward(q, k, v);
    EXPECT_EQ(graph_has(y, "KernelTrain"), T < 64) << "T=" << T;
    EXPECT_EQ(graph_has(y, "ChunkedTrain"), T >= 64) << "T=" << T;
  }
}

}  // namespace
}  // namespace oal::attn
