// Frozen-attention fidelity metrics (App. C) against hand-computed values.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include "oal/attention/softmax/softmax_method.h"
#include "oal/core/error.h"
#include "oal/linearize/fidelity.h"

namespace {

namespace attn = oal::attn;
namespace ev = oal::linearize;

at::Tensor randn(std::vector<int64_t> shape, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::normal(0.0, 1.0, shape, gen, at::TensorOptions().dtype(at::kFloat));
}

// Softmax scaled by (1 + a): its error is a · Y exactly, so RelMSE = a² before and after
// the (linear) W_o, and MSE = a² ||Y||² / n.
class ScaledSoftmax : public attn::AttentionMethod {
 public:
  explicit ScaledSoftmax(double a) : a_(a) {}
  std::string name() const override { return "scaled"; }
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) const override {
    return attn::SoftmaxAttention().forward(q, k, v) * (1 + a_);
  }
  std::unique_ptr<attn::DecodeState> new_state(int64_t) const override { return nullptr; }

 private:
  double a_;
};

TEST(Fidelity, SoftmaxRowIsExactlyZeroAndScaledMethodMatchesFormula) {
  std::vector<ev::FidelityLayer> layers;
  for (int64_t l : {0, 3}) {
    ev::FidelityLayer fl;
    fl.layer = l;
    fl.q = randn({3, 4, 10, 8}, 1 + l);
    fl.k = randn({3, 2, 10, 8}, 2 + l);
    fl.v = randn({3, 2, 10, 8}, 3 + l);
    fl.wo = randn({16, 32}, 4 + l);
    fl.methods["softmax"] = std::make_shared<attn::SoftmaxAttention>();
    fl.methods["scaled"] = std::make_shared<ScaledSoftmax>(0.1);
    layers.push_back(fl);
  }
  auto r = ev::frozen_fidelity(layers, {"softmax", "scaled"});
  ASSERT_EQ(r.rows.size(), 2u);
  const auto& s = r.rows[0].all;
  EXPECT_EQ(s.mse_before_wo, 0.0);
  EXPECT_EQ(s.relmse_before_wo, 0.0);
  EXPECT_EQ(s.mse_after_wo, 0.0);
  EXPECT_EQ(s.relmse_after_wo, 0.0);
  const auto& t = r.rows[1].all;
  // fp32 outputs: (1.1 Y - Y) carries ~1e-7 relative rounding, so a² to ~1e-5.
  EXPECT_NEAR(t.relmse_before_wo, 0.01, 1e-5);
  EXPECT_NEAR(t.relmse_after_wo, 0.01, 1e-5);
  // MSE by hand: mean over sequences of 0.01 ||Y_b||² / n_b, layers pooled.
  double want = 0;
  for (int64_t b = 0; b < 3; ++b) {
    double e = 0, n = 0;
    for (const auto& l : layers) {
      auto y = attn::SoftmaxAttention().forward(l.q.narrow(0, b, 1), l.k.narrow(0, b, 1),
                                                l.v.narrow(0, b, 1)).to(at::kDouble);
      e += 0.01 * y.pow(2).sum().item<double>();
      n += y.numel();
    }
    want += e / n / 3;
  }
  EXPECT_NEAR(t.mse_before_wo, want, 1e-5 * want);
  EXPECT_EQ(r.rows[1].layers.size(), 2u);
  EXPECT_EQ(r.rows[1].heads.size(), 8u);
  EXPECT_NEAR(r.rows[1].heads.at({3, 1}).relmse_before_wo, 0.01, 1e-5);
  auto j = ev::fidelity_json(r);
  EXPECT_EQ(j["methods"]["softmax"]["relmse_after_wo"].get<double>(), 0.0);
  EXPECT_TRUE(j["methods"]["scaled"].contains("mse_after_wo"));
}

TEST(Fidelity, RejectsMissingMethodAndBadWo) {
  ev::FidelityLayer fl;
  fl.q = randn({1, 2, 4, 4}, 1);
  fl.k = randn({1, 1, 4, 4}, 2);
  fl.v = randn({1, 1, 4, 4}, 3);
  fl.wo = randn({8, 8}, 4);
  fl.methods["softmax"] = std::make_shared<attn::SoftmaxAttention>();
  EXPECT_THROW(ev::frozen_fidelity({fl}, {"softmax", "oal"}), oal::Error);
  fl.wo = randn({8, 7}, 4);
  EXPECT_THROW(ev::frozen_fidelity({fl}, {"softmax"}), oal::Error);
}

}  // namespace
