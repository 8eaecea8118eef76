// Layer scores on a model (calib/layer_scoring.h): the retrieval masses added per layer
// by score_retrieval, checked against what softmax weights must sum to, and its refusals.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error_of.h"
#include "common/tiny_model.h"
#include "oal/calib/layer_scoring.h"
#include "oal/model/transformer.h"

namespace oal::calib {
namespace {

RetrievalProbe probe(int64_t n, std::vector<int64_t> rows, std::vector<int64_t> keys) {
  RetrievalProbe p;
  for (int64_t t = 0; t < n; ++t) p.tokens.push_back((t * 7 + 3) % 32);
  p.rows = std::move(rows);
  p.keys.assign(size_t(n), false);
  for (int64_t k : keys) p.keys[size_t(k)] = true;
  return p;
}

// Without a window every causal key is beyond it, so the weight on all keys is the whole
// softmax row (1 per head, fp64 rounding); a window covering the sequence leaves none;
// in between the mass lies in [0, 1] and grows with the keys chosen.
TEST(LayerScoring, RetrievalMassesSumLikeSoftmaxWeights) {
  const model::Transformer m(test::tiny_weights(7, 3));
  std::vector<int64_t> all(20);
  for (int64_t t = 0; t < 20; ++t) all[size_t(t)] = t;
  const std::vector<RetrievalProbe> probes{probe(20, {10, 19}, all), probe(12, {11}, all)};
  auto scores_for = [&](attn::Window w, const std::vector<RetrievalProbe>& ps) {
    analysis::LayerScores s{w, 20, 1, {{0, {0.5, 0.5}, {}}, {2, {0.5, 0.5}, {}}}};
    score_retrieval(m, ps, s);
    return s;
  };
  for (const auto& l : scores_for({}, probes).layers) {
    ASSERT_EQ(l.retrieval.size(), 2u);
    for (double r : l.retrieval) EXPECT_NEAR(r, 1.0, 1e-12) << l.layer;
  }
  for (const auto& l : scores_for({0, 20}, probes).layers)
    for (double r : l.retrieval) EXPECT_EQ(r, 0.0) << l.layer;
  const auto few = scores_for({1, 2}, {probe(20, {10, 19}, {3, 5})}).layers;
  const auto more = scores_for({1, 2}, {probe(20, {10, 19}, {3, 5, 6, 12})}).layers;
  for (size_t i = 0; i < few.size(); ++i)
    for (size_t h = 0; h < 2; ++h) {
      EXPECT_GT(few[i].retrieval[h], 0.0);
      EXPECT_GT(more[i].retrieval[h], few[i].retrieval[h]);
      EXPECT_LT(more[i].retrieval[h], 1.0);
    }
}

TEST(LayerScoring, RetrievalRefusesBadProbes) {
  const model::Transformer m(test::tiny_weights(7, 2));
  analysis::LayerScores s{{0, 2}, 8, 1, {{0, {0.5, 0.5}, {}}}};
  EXPECT_NE(test::error_of([&] { score_retrieval(m, {}, s); }).find("at least one probe"),
            std::string::npos);
  RetrievalProbe p = probe(8, {7}, {1});
  p.keys.pop_back();
  EXPECT_NE(test::error_of([&] { score_retrieval(m, {p}, s); }).find("one key flag per token"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { score_retrieval(m, {probe(8, {8}, {1})}, s); }).find("rows"),
            std::string::npos);
  EXPECT_TRUE(s.layers[0].retrieval.empty());  // nothing written on a refusal
}

}  // namespace
}  // namespace oal::calib
