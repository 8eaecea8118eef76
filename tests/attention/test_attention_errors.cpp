// Bad input to the operator gets an oal::Error naming the operation and what was
// expected — never a crash or a silent NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "oal/attention/oal/chunked_attention.h"
#include "oal/attention/oal/references.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/oal/quadratic.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::expect_error;
using oal::test::randn;

TEST(AttentionErrors, KernelValidation) {
  const std::string op = "[quadratic_kernel]";
  expect_error([] { QuadraticKernel({{0, 1}, {1, 2}}, {1, 0, 1, 0, 0, 1}); }, {op, "exactly once"});
  expect_error([] { QuadraticKernel({{0, 3}, {1}}, {1, 0, 1, 0, 0, 1}); }, {op, "partition"});
  expect_error([] { QuadraticKernel({{0, 1}, {}}, {1, 0, 1, 0, 0, 1}); }, {op, "empty"});
  expect_error([] { QuadraticKernel({}, {1}); }, {op, "at least one group"});
  expect_error([] { QuadraticKernel({{0, 1}}, {1, 0, 1}, 0.0); }, {op, "eps"});
  expect_error([] { QuadraticKernel({{0, 1}}, {1, 0, 1}, -1e-6); }, {op, "eps"});
  expect_error([] { QuadraticKernel({{0, 1}}, {1, 0, 1, 2}); }, {op, "needs (G+1)(G+2)/2 = 3 values, got 4"});
  expect_error([] { QuadraticKernel({{0}, {1}}, {1, 0, 1}); }, {op, "= 6 values, got 3"});
  expect_error([] { QuadraticKernel({{0, 1}}, {1, std::nan(""), 1}); }, {op, "non-finite"});
  expect_error([] { QuadraticKernel::from_lower({{0, 1}}, at::ones({2, 2}, at::kDouble)); },
               {op, "lower-triangular"});
  expect_error([] { QuadraticKernel::from_lower({{0, 1}}, at::eye(3, at::kDouble)); }, {op, "[2, 2]"});
  auto a = QuadraticKernel::taylor({{0, 1}}), b = QuadraticKernel::taylor({{0, 1, 2}});
  expect_error([&] { LayerKernels::from({a, b}); }, {"[layer_kernels]", "d = "});
  expect_error([&] { LayerKernels::from({a, QuadraticKernel::taylor({{0, 1}}, 1e-3)}); },
               {"[layer_kernels]", "one eps"});
}

TEST(AttentionErrors, ShapesAndHeads) {
  auto lk = LayerKernels::from(oal::test::random_kernels(4, 8, 2, 1));
  auto q = randn({1, 4, 10, 8}, 1), k = randn({1, 2, 10, 8}, 2), v = randn({1, 2, 10, 4}, 3);
  const std::string op = "[hd_chunked]";
  expect_error([&] { hd_chunked(q, k.narrow(2, 0, 9), v.narrow(2, 0, 9), lk); }, {op, "lengths differ"});
  expect_error([&] { hd_chunked(q, k, v.narrow(2, 0, 9), lk); }, {op, "k and v must agree"});
  expect_error([&] { hd_chunked(q, randn({1, 2, 10, 6}, 4), v, lk); }, {op, "head dims differ"});
  expect_error([&] { hd_chunked(q, randn({2, 2, 10, 8}, 4), randn({2, 2, 10, 4}, 5), lk); },
               {op, "batch sizes differ"});
  expect_error([&] { hd_chunked(q, randn({1, 3, 10, 8}, 4), randn({1, 3, 10, 4}, 5), lk); },
               {op, "multiple of KV heads"});
  expect_error([&] { hd_chunked(q.narrow(1, 0, 2), k, v, lk); }, {op, "kernels are for 4 query heads"});
  expect_error([&] { hd_chunked(q, k, v, LayerKernels::from(oal::test::random_kernels(4, 6, 2, 1))); },
               {op, "d = 6"});
  expect_error([&] { hd_chunked(q[0], k, v, lk); }, {op, "4 dimensions"});
  expect_error([&] { hd_chunked(q, k, v, lk, {.chunk = 0}); }, {op, "chunk"});
  expect_error([&] { hd_chunked(q.to(at::kLong), k, v, lk); }, {op, "floating-point"});
  expect_error([&] { hd_pairwise(q, k, v.to(at::kFloat), lk); }, {"[hd_pairwise]", "one dtype"});
  expect_error([&] { hd_recurrent(q, randn({1, 3, 10, 8}, 4), randn({1, 3, 10, 4}, 5), lk); },
               {"[hd_recurrent]", "multiple of KV heads"});
  expect_error([&] { hd_step(q.select(2, 0), k, v.select(2, 0), lk, *std::make_unique<HdState>()); },
               {"[hd_step]", "3 dimensions"});
  auto st = HdState::zeros(1, 2, 8, 5, at::kDouble);  // Dv 5, inputs have 4
  expect_error([&] { hd_extend(q, k, v, lk, st); }, {op, "state S is"});
  auto st32 = HdState::zeros(1, 2, 8, 4, at::kFloat);
  expect_error([&] { hd_extend(q, k, v, lk, st32); }, {op, "state dtype"});
  // a hand-broken LayerKernels
  auto bad = lk;
  bad.group_of = lk.group_of.clone();
  bad.group_of[1][3] = 7;
  expect_error([&] { hd_chunked(q, k, v, bad); }, {op, "head 1 dimension 3"});
  bad = lk;
  bad.eps = 0;
  expect_error([&] { hd_chunked(q, k, v, bad); }, {op, "eps"});
}

TEST(AttentionErrors, NonFiniteInputs) {
  auto lk = LayerKernels::from(oal::test::random_kernels(2, 4, 2, 1));
  auto q = randn({1, 2, 6, 4}, 1), k = randn({1, 1, 6, 4}, 2), v = randn({1, 1, 6, 3}, 3);
  auto qn = q.clone(), kn = k.clone(), vn = v.clone();
  qn[0][1][2][3] = std::numeric_limits<double>::infinity();
  kn[0][0][5][0] = std::nan("");
  vn[0][0][0][0] = -std::numeric_limits<double>::infinity();
  using Fn = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const LayerKernels&);
  for (const auto& entry : {std::pair<Fn, std::string>{&hd_pairwise, "[hd_pairwise]"},
                            std::pair<Fn, std::string>{&hd_recurrent, "[hd_recurrent]"}}) {
    const Fn fn = entry.first;  // not a structured binding: clang 14 cannot capture one
    const std::string& name = entry.second;
    expect_error([&] { fn(qn, k, v, lk); }, {name, "q contains NaN or Inf"});
    expect_error([&] { fn(q, kn, v, lk); }, {name, "k contains NaN or Inf"});
    expect_error([&] { fn(q, k, vn, lk); }, {name, "v contains NaN or Inf"});
  }
  expect_error([&] { hd_pair_weights(qn, k, lk); }, {"[hd_pair_weights]", "q contains NaN"});
  expect_error([&] { hd_chunked(qn, k, v, lk); }, {"[hd_chunked]", "q contains NaN or Inf"});
  auto badL = lk;
  badL.L = lk.L.clone();
  badL.L[0][1][0] = std::nan("");
  expect_error([&] { hd_chunked(q, k, v, badL); }, {"[hd_chunked]", "kernel L contains NaN"});
}

TEST(AttentionErrors, NonPositiveDenominatorIsAnError) {
  // A state whose denominator channel is negative (as a cancelled expanded readout or a
  // corrupted state would be): the readout must fail, not divide.
  auto lk = LayerKernels::from({QuadraticKernel::taylor({{0, 1, 2, 3}})});
  auto q = randn({1, 1, 3, 4}, 1, 0.1), k = randn({1, 1, 3, 4}, 2, 0.1), v = randn({1, 1, 3, 2}, 3);
  auto st = HdState::zeros(1, 1, 4, 2, at::kDouble);
  st.h0().select(-1, 2).fill_(-50.0);  // H0 denominator channel: sum of kappa would be -50
  st.tokens = 10;
  expect_error([&] { hd_extend(q, k, v, lk, st); }, {"[hd_chunked]", "denominator not positive"});
  HdDecodeState dec(lk, st);
  expect_error([&] { dec.step(q.select(2, 0), k.select(2, 0), v.select(2, 0)); },
               {"[hd_chunked]", "denominator not positive"});
}

}  // namespace
}  // namespace oal::attn
