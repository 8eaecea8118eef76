// Baselines (TaylorShift, Performer, DiJiang, SpectraFormer) and the shared feature-map
// evaluator: each path equals its definition, forward == decode == O(N²) reference.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include <ATen/CPUGeneratorImpl.h>

#include "oal/attention/baselines/dijiang.h"
#include "oal/attention/baselines/feature_linear.h"
#include "oal/attention/baselines/performer.h"
#include "oal/attention/baselines/spectraformer.h"
#include "oal/attention/baselines/taylorshift.h"
#include "oal/core/error.h"

namespace {

namespace attn = oal::attn;

// ||a - b||_F / ||b||_F in fp64.
double rel_err(const at::Tensor& a, const at::Tensor& b) {
  auto ad = a.detach().to(at::kDouble), bd = b.detach().to(at::kDouble);
  return (ad - bd).norm().item<double>() / std::max(bd.norm().item<double>(), 1e-300);
}

// Seeded N(0, scale²) tensor, fp64.
at::Tensor randn(std::vector<int64_t> shape, uint64_t seed, double scale = 1.0) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::normal(0.0, scale, shape, gen, at::TensorOptions().dtype(at::kDouble));
}

// Positive random features (exp of normals) [B, H, T, F].
at::Tensor pos_features(std::vector<int64_t> shape, uint64_t seed) {
  return at::exp(randn(shape, seed, 0.7));
}

// fp64 throughout: differences are rounding of O(T·F) sums, ~1e-15 relative; 1e-11
// leaves room for cancellation-free accumulation over a few hundred terms.
constexpr double k_fp64_tol = 1e-11;

TEST(FeatureEvaluator, ChunkedAndAtPathsEqualPairwise) {
  for (int64_t Hkv : {1, 2}) {
    for (int64_t g : {1, 2, 3}) {
      for (bool per_query_keys : {false, true}) {
        for (int64_t T : {1, 2, 7, 8, 9, 17}) {
          const int64_t Hq = Hkv * g, Hf = per_query_keys ? Hq : Hkv, F = 5, Dv = 3;
          auto fq = pos_features({2, Hq, T, F}, 1 + T);
          auto fk = pos_features({2, Hf, T, F}, 2 + T);
          auto v = randn({2, Hkv, T, Dv}, 3 + T);
          auto ref = attn::feature_attention_pairwise(fq, fk, v);
          // Independent scalar loop for one (batch, head, position).
          {
            const int64_t b = 1, h = Hq - 1, i = T - 1, hf = per_query_keys ? h : h / g,
                          hv = h / g;
            std::vector<double> num(Dv, 0.0);
            double den = 0;
            for (int64_t j = 0; j <= i; ++j) {
              double w = (fq[b][h][i] * fk[b][hf][j]).sum().item<double>();
              den += w;
              for (int64_t e = 0; e < Dv; ++e) num[e] += w * v[b][hv][j][e].item<double>();
            }
            for (int64_t e = 0; e < Dv; ++e)
              EXPECT_NEAR(ref[b][h][i][e].item<double>(), num[e] / den, 1e-12);
          }
          for (int64_t chunk : {1, 3, 8, 64})
            EXPECT_LT(rel_err(attn::feature_attention_chunked(fq, fk, v, chunk), ref), k_fp64_tol)
                << "T=" << T << " chunk=" << chunk;
          std::vector<int64_t> pos;
          for (int64_t p = T % 2; p < T; p += 2) pos.push_back(p);
          auto idx = at::tensor(pos, at::kLong);
          auto want = ref.index_select(2, idx);
          for (auto path : {attn::AtPath::rows, attn::AtPath::prefix, attn::AtPath::automatic})
            EXPECT_LT(rel_err(attn::feature_attention_at(fq.index_select(2, idx), fk, v, pos, path),
                              want),
                      k_fp64_tol);
        }
      }
    }
  }
}

TEST(FeatureEvaluator, PrefixStateContinuesAcrossCalls) {
  auto fq = pos_features({1, 2, 11, 4}, 5), fk = pos_features({1, 1, 11, 4}, 6);
  auto v = randn({1, 1, 11, 3}, 7);
  auto ref = attn::feature_attention_pairwise(fq, fk, v);
  attn::FeaturePrefix pre;
  auto a = attn::feature_attention_chunked(fq.narrow(2, 0, 4), fk.narrow(2, 0, 4),
                                           v.narrow(2, 0, 4), 3, &pre);
  auto b = attn::feature_attention_chunked(fq.narrow(2, 4, 7), fk.narrow(2, 4, 7),
                                           v.narrow(2, 4, 7), 3, &pre);
  EXPECT_LT(rel_err(at::cat({a, b}, 2), ref), k_fp64_tol);
}

TEST(FeatureEvaluator, RejectsBadInput) {
  auto fq = pos_features({1, 2, 4, 3}, 1), fk = pos_features({1, 1, 4, 3}, 2);
  auto v = randn({1, 1, 4, 2}, 3);
  EXPECT_THROW(attn::feature_attention_chunked(fq, fk, v, 0), oal::Error);
  EXPECT_THROW(attn::feature_attention_chunked(fq, pos_features({1, 1, 4, 5}, 2), v), oal::Error);
  EXPECT_THROW(attn::feature_attention_at(fq.narrow(2, 0, 2), fk, v, {2, 1}), oal::Error);
  EXPECT_THROW(attn::feature_attention_at(fq.narrow(2, 0, 1), fk, v, {4}), oal::Error);
  // Zero features: denominator 0 must raise, not return NaN.
  EXPECT_THROW(attn::feature_attention_chunked(fq, at::zeros_like(fk), v), oal::Error);
  // The denominators are checked once, after every chunk (chunk 2 here) and before the
  // prefix changes: a call that fails in a later chunk leaves a decoder's prefix as it was.
  attn::FeaturePrefix prefix;
  attn::feature_attention_chunked(fq, fk, v, 2, &prefix);
  const at::Tensor S = prefix.S.clone(), z = prefix.z.clone();
  at::Tensor late_zero = fq.clone();
  late_zero.narrow(2, 3, 1).zero_();  // the last query of the second chunk sees 0 weight
  EXPECT_THROW(attn::feature_attention_chunked(late_zero, at::zeros_like(fk), v, 2, &prefix),
               oal::Error);
  EXPECT_TRUE(prefix.S.equal(S) && prefix.z.equal(z));
}

// All four baselines built for Hq query / Hkv KV heads and head dim D.
std::vector<std::shared_ptr<attn::FeatureMapMethod>> baselines(int64_t Hq, int64_t Hkv,
                                                               int64_t D, uint64_t seed) {
  auto ts = attn::TaylorShiftAttention::init(Hq, Hkv, D);
  {
    at::NoGradGuard g;
    ts->tau().copy_(at::linspace(0.5, 2.0, Hq));
  }
  auto dj = attn::DiJiangAttention::init(Hq, Hkv, D, 3, seed);
  {
    at::NoGradGuard g;
    dj->theta().copy_(randn({Hq, D}, seed + 1, 0.3).to(at::kFloat));
  }
  return {ts, attn::PerformerAttention::init(Hq, Hkv, D, 3, seed, 40), dj,
          attn::SpectraFormerAttention::init(Hq, Hkv, D, 3, seed)};
}

TEST(Baselines, ForwardEqualsDecodeEqualsPairwise) {
  for (int64_t Hkv : {1, 2}) {
    for (int64_t g : {1, 2}) {
      const int64_t Hq = Hkv * g, D = 8, T = 13;
      auto q = randn({2, Hq, T, D}, 11, 1.5), k = randn({2, Hkv, T, D}, 12, 1.5);
      auto v = randn({2, Hkv, T, 5}, 13);
      for (auto& m : baselines(Hq, Hkv, D, 21)) {
        auto y = m->forward(q, k, v);
        auto ref = m->forward_pairwise(q, k, v);
        EXPECT_LT(rel_err(y, ref), k_fp64_tol) << m->name();
        auto st = m->new_state(2);
        std::vector<at::Tensor> steps;
        for (int64_t t = 0; t < T; ++t)
          steps.push_back(st->step(q.select(2, t), k.select(2, t), v.select(2, t)).unsqueeze(2));
        EXPECT_LT(rel_err(at::cat(steps, 2), ref), k_fp64_tol) << m->name();
        EXPECT_EQ(st->tokens(), T);
        // Uneven extends reach the same outputs; the state size does not grow.
        auto st2 = m->new_state(2);
        auto a = st2->extend(q.narrow(2, 0, 5), k.narrow(2, 0, 5), v.narrow(2, 0, 5));
        int64_t bytes = st2->state_bytes();
        auto b = st2->extend(q.narrow(2, 5, 8), k.narrow(2, 5, 8), v.narrow(2, 5, 8));
        EXPECT_EQ(st2->state_bytes(), bytes) << m->name();
        EXPECT_LT(rel_err(at::cat({a, b}, 2), ref), k_fp64_tol) << m->name();
        // Outputs at sampled positions.
        std::vector<int64_t> pos{0, 4, 5, 12};
        EXPECT_LT(rel_err(m->forward_at(q, k, v, pos),
                          ref.index_select(2, at::tensor(pos, at::kLong))),
                  k_fp64_tol)
            << m->name();
      }
    }
  }
}

TEST(Baselines, Fp32InputGivesFp32OutputCloseToFp64) {
  auto q = randn({1, 2, 9, 8}, 31), k = randn({1, 1, 9, 8}, 32), v = randn({1, 1, 9, 4}, 33);
  for (auto& m : baselines(2, 1, 8, 5)) {
    auto y32 = m->forward(q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat));
    EXPECT_EQ(y32.scalar_type(), at::kFloat);
    // fp32 features and sums over 9 tokens: ~1e-6 relative rounding.
    EXPECT_LT(rel_err(y32, m->forward(q, k, v)), 1e-5) << m->name();
  }
}

TEST(TaylorShift, MatchesFormula) {
  const int64_t D = 4, T = 5;
  auto q = randn({1, 2, T, D}, 41), k = randn({1, 1, T, D}, 42), v = randn({1, 1, T, 3}, 43);
  auto m = attn::TaylorShiftAttention::init(2, 1, D);
  {
    at::NoGradGuard g;
    m->tau().copy_(at::tensor({0.7, 1.9}, at::kFloat));
  }
  auto y = m->forward(q, k, v);
  const double taus[2] = {double(m->tau()[0].item<float>()), double(m->tau()[1].item<float>())};
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> num(3, 0.0);
      double den = 0;
      for (int64_t j = 0; j <= i; ++j) {
        auto qi = q[0][h][i], kj = k[0][0][j];
        double s = taus[h] * (qi * kj).sum().item<double>() /
                   (qi.norm().item<double>() * kj.norm().item<double>());
        double w = 1 + s + s * s / 2;
        den += w;
        for (int e = 0; e < 3; ++e) num[e] += w * v[0][0][j][e].item<double>();
      }
      for (int e = 0; e < 3; ++e) EXPECT_NEAR(y[0][h][i][e].item<double>(), num[e] / den, 1e-12);
    }
  EXPECT_EQ(m->features(q, k).q.size(-1), 1 + D + D * (D + 1) / 2);
}

TEST(Performer, EstimatorApproachesExpOnAverageOverSeeds) {
  const int64_t D = 8;
  auto q = randn({1, 1, 1, D}, 51, 0.6), k = randn({1, 1, 1, D}, 52, 0.6);
  const double want = std::exp((q * k).sum().item<double>() / std::sqrt(double(D)));
  double sum = 0;
  const int seeds = 200;
  for (int s = 0; s < seeds; ++s) {
    auto m = attn::PerformerAttention::init(1, 1, D, 0, 1000 + s);
    auto fq = at::exp(m->log_features(q)), fk = at::exp(m->log_features(k));
    sum += (fq * fk).sum().item<double>();
  }
  // 200 seeds x 250 orthogonal features: the estimator's relative std is well under 1%
  // for these norms; 2% bounds it with margin.
  EXPECT_NEAR(sum / seeds / want, 1.0, 0.02);
}

TEST(Performer, ProjectionRowsOrthogonalWithinBlocks) {
  auto W = attn::orthogonal_random_projection(20, 8, 7);
  ASSERT_EQ(W.sizes(), (at::IntArrayRef{20, 8}));
  auto block = W.narrow(0, 0, 8);
  auto gram = at::matmul(block, block.t());
  auto off = gram - at::diag(at::diag(gram));
  EXPECT_LT(off.abs().max().item<double>(), 1e-10);
  // Same seed -> same draw; another seed -> another.
  EXPECT_TRUE(W.equal(attn::orthogonal_random_projection(20, 8, 7)));
  EXPECT_FALSE(W.equal(attn::orthogonal_random_projection(20, 8, 8)));
}

TEST(Performer, LargeKeysStayFiniteWhileDecoding) {
  // Later keys much larger than earlier ones: the running key shift must rescale.
  auto q = randn({1, 1, 6, 8}, 61), k = randn({1, 1, 6, 8}, 62);
  {
    at::NoGradGuard g;
    k.narrow(2, 3, 3).mul_(6.0);
  }
  auto v = randn({1, 1, 6, 2}, 63);
  auto m = attn::PerformerAttention::init(1, 1, 8, 0, 3, 16);
  auto st = m->new_state(1);
  std::vector<at::Tensor> steps;
  for (int64_t t = 0; t < 6; ++t)
    steps.push_back(st->step(q.select(2, t), k.select(2, t), v.select(2, t)).unsqueeze(2));
  auto ys = at::cat(steps, 2);
  EXPECT_TRUE(at::isfinite(ys).all().item<bool>());
  EXPECT_LT(rel_err(ys, m->forward_pairwise(q, k, v)), 1e-9);
}

TEST(SpectraFormer, FastFoodEqualsDenseMatrix) {
  for (int64_t D : {8, 64}) {
    auto m = attn::SpectraFormerAttention::init(2, 1, D, 1, 9);
    auto u = randn({3, 5, D}, 71);
    auto W = m->fastfood_dense();
    EXPECT_LT(rel_err(m->fastfood(u), at::matmul(u, W.t())), 1e-12);
    auto x = randn({4, D}, 72);
    EXPECT_LT(rel_err(attn::hadamard_transform(x), at::matmul(x, attn::hadamard_matrix(D).t())),
              1e-14);
  }
}

TEST(SpectraFormer, SixtyFivePositiveFeaturesForHeadDim64) {
  auto m = attn::SpectraFormerAttention::init(2, 1, 64, 0, 3);
  auto f = m->features(randn({1, 2, 5, 64}, 81), randn({1, 1, 5, 64}, 82));
  EXPECT_EQ(f.q.size(-1), 65);
  EXPECT_EQ(f.k.size(1), 2);  // key features per query head
  EXPECT_GE(f.q.min().item<double>(), attn::k_spectraformer_offset);
  // Each row's largest feature is exp(0) + offset (row-max stabilisation).
  EXPECT_NEAR(f.k.amax(-1).min().item<double>(), 1 + attn::k_spectraformer_offset, 1e-12);
  EXPECT_THROW(attn::SpectraFormerAttention::init(1, 1, 12, 0, 3), oal::Error);
}

TEST(DiJiang, FeaturesPositiveAndProjectionOrthonormalDct) {
  auto C = attn::dct_matrix(8);
  EXPECT_LT(rel_err(at::matmul(C, C.t()), at::eye(8, at::kDouble)), 1e-14);
  auto m = attn::DiJiangAttention::init(2, 1, 8, 0, 5);
  auto f = m->features(randn({1, 2, 6, 8}, 91, 3.0), randn({1, 1, 6, 8}, 92, 3.0));
  EXPECT_GT(f.q.min().item<double>(), 0.0);
  EXPECT_GT(f.k.min().item<double>(), 0.0);
  // theta = 0: both sides are plain softmax rows (sum 1).
  EXPECT_LT((f.k.sum(-1) - 1).abs().max().item<double>(), 1e-12);
  EXPECT_LT((f.q.sum(-1) - 1).abs().max().item<double>(), 1e-12);
}

TEST(Baselines, TrainableParametersReceiveGradients) {
  auto q = randn({1, 2, 7, 8}, 101).to(at::kFloat), k = randn({1, 1, 7, 8}, 102).to(at::kFloat);
  auto v = randn({1, 1, 7, 3}, 103).to(at::kFloat);
  for (auto& m : baselines(2, 1, 8, 7)) {
    auto params = m->parameters();
    if (m->name() == "performer") {
      EXPECT_TRUE(params.empty());
      continue;
    }
    ASSERT_FALSE(params.empty()) << m->name();
    for (auto& p : params) p.set_requires_grad(true);
    m->forward_at(q, k, v, {1, 3, 6}).pow(2).sum().backward();
    for (auto& p : params) {
      ASSERT_TRUE(p.grad().defined()) << m->name();
      EXPECT_TRUE(at::isfinite(p.grad()).all().item<bool>()) << m->name();
      EXPECT_GT(p.grad().abs().sum().item<double>(), 0.0) << m->name();
    }
  }
}

TEST(Baselines, StateDictRoundTrip) {
  auto a = baselines(2, 1, 8, 1), b = baselines(2, 1, 8, 2);
  auto q = randn({1, 2, 6, 8}, 111), k = randn({1, 1, 6, 8}, 112), v = randn({1, 1, 6, 3}, 113);
  for (size_t i = 0; i < a.size(); ++i) {
    b[i]->load_state_dict(a[i]->state_dict());
    EXPECT_TRUE(b[i]->forward(q, k, v).equal(a[i]->forward(q, k, v))) << a[i]->name();
    auto sd = a[i]->state_dict();
    sd.begin()->second = at::zeros({3}, at::kFloat);
    EXPECT_THROW(b[i]->load_state_dict(sd), oal::Error) << a[i]->name();
  }
}

TEST(Baselines, RejectMismatchedShapes) {
  auto m = attn::TaylorShiftAttention::init(2, 1, 8);
  auto q = randn({1, 2, 4, 8}, 1), k = randn({1, 1, 4, 8}, 2), v = randn({1, 1, 4, 3}, 3);
  EXPECT_THROW(m->forward(q.narrow(3, 0, 4), k.narrow(3, 0, 4), v), oal::Error);
  EXPECT_THROW(m->forward(randn({1, 3, 4, 8}, 4), k, v), oal::Error);
  auto bad = q.clone();
  bad[0][0][0][0] = NAN;
  EXPECT_THROW(m->forward(bad, k, v), oal::Error);
}

}  // namespace
