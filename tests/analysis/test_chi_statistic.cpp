// The contribution statistic (--chi): names, profiles, a strongly NEGATIVE outlier
// dimension (inputs and a model) that the magnitude statistics move out of the bulk while
// the signed one buries it, the Gaussian control's share under mean-abs, and old
// analysis / kernel files that predate the field.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "oal/analysis/analysis_json.h"
#include "oal/analysis/analyze.h"
#include "oal/analysis/chi_statistic.h"
#include "oal/analysis/contribution.h"
#include "oal/analysis/gaussian_control.h"
#include "oal/analysis/grouping.h"
#include "oal/analysis/layer_groups.h"
#include "oal/core/error.h"
#include "oal/fixtures/synthetic.h"
#include "oal/model/transformer.h"
#include "planted_model.h"

namespace oa = oal::analysis;
namespace om = oal::model;

namespace {

constexpr oa::ChiStatistic k_all[] = {oa::ChiStatistic::mean_abs, oa::ChiStatistic::abs_mean,
                                      oa::ChiStatistic::signed_mean};

// P prompts of N(0, 1) q, k [1, 1, T, D]; dimension `neg` gets q = +5 + noise and
// k = -5 + noise, so q_r k_r ≈ -25 on every pair: the largest |contribution| of the head,
// with a strongly negative sign.
struct PlantedRows {
  at::Tensor signed_rows, magnitude_rows;  // [P, D]
};

PlantedRows negative_outlier_rows(int64_t prompts, int64_t t, int64_t d, int64_t neg) {
  std::vector<at::Tensor> s, m;
  for (int64_t p = 0; p < prompts; ++p) {
    at::Tensor q = oa::standard_normal({1, 1, t, d}, oa::mix_seed(7, 2 * p));
    at::Tensor k = oa::standard_normal({1, 1, t, d}, oa::mix_seed(7, 2 * p + 1));
    q.select(3, neg).add_(5.0);
    k.select(3, neg).sub_(5.0);
    s.push_back(oa::contribution_scores(q, k)[0][0]);
    m.push_back(oa::contribution_magnitudes(q, k)[0][0]);
  }
  return {at::stack(s, 0), at::stack(m, 0)};
}

oa::Grouping group_with(oa::ChiStatistic stat, const PlantedRows& rows) {
  oa::GroupingOptions o;
  o.chi = stat;
  o.bootstrap = 200;
  return oa::group_dimensions(oa::statistic_rows(stat, rows.signed_rows, rows.magnitude_rows), o);
}

// A synthetic model whose planted key rows are negated in every layer and KV head: RoPE
// rotates each planted pair within itself, so post-RoPE k of the planted dims flips sign
// and their χ becomes strongly negative.
oal::fixtures::SyntheticOptions small_model() {
  return oal::test::planted_model_options(1);
}

om::ModelWeights negated_key_model(const oal::fixtures::SyntheticOptions& so) {
  om::ModelWeights w = oal::fixtures::make_synthetic_weights(so);
  const auto planted = oal::fixtures::synthetic_planted_dims(so);
  for (int64_t l = 0; l < so.num_layers; ++l) {
    at::Tensor& wk = w.tensors.at(fmt::format("model.layers.{}.self_attn.k_proj.weight", l));
    for (int64_t kv = 0; kv < so.num_kv_heads; ++kv)
      for (int64_t r : planted[l]) wk[kv * so.head_dim + r].mul_(-1.0);
  }
  return w;
}

std::vector<std::vector<int32_t>> token_prompts(int64_t count, int64_t vocab) {
  std::vector<std::vector<int32_t>> out;
  uint64_t x = 99;
  for (int64_t p = 0; p < count; ++p) {
    std::vector<int32_t> ids(static_cast<size_t>(20 + p % 9));
    for (auto& id : ids) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      id = static_cast<int32_t>(3 + (x >> 33) % static_cast<uint64_t>(vocab - 3));
    }
    out.push_back(ids);
  }
  return out;
}

}  // namespace

TEST(ChiStatistic, NamesRoundTripAndUnknownNamesAreRejected) {
  for (oa::ChiStatistic s : k_all)
    EXPECT_EQ(oa::parse_chi_statistic(oa::chi_statistic_name(s)), s);
  EXPECT_EQ(oa::chi_statistic_name(oa::ChiStatistic::mean_abs), "mean-abs");
  try {
    oa::parse_chi_statistic("abs");
    FAIL() << "expected an unknown-statistic error";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected mean-abs, abs-mean or signed"),
              std::string::npos)
        << e.what();
  }
}

TEST(ChiStatistic, ProfilesFromHandMadeMeans) {
  const std::vector<double> sgn{-3.0, 1.0, 0.5}, mag{4.0, 1.5, 0.7};
  EXPECT_EQ(oa::statistic_profile(oa::ChiStatistic::signed_mean, sgn, mag), sgn);
  EXPECT_EQ(oa::statistic_profile(oa::ChiStatistic::mean_abs, sgn, mag), mag);
  EXPECT_EQ(oa::statistic_profile(oa::ChiStatistic::abs_mean, sgn, mag),
            (std::vector<double>{3.0, 1.0, 0.5}));
  // abs-mean takes |.| of the mean, not the mean of |.|: rows (-2, 4) and (2, -2) → (0, 1).
  const at::Tensor rows = at::tensor({-2.0, 4.0, 2.0, -2.0}, at::kDouble).view({2, 2});
  EXPECT_EQ(oa::profile_of_rows(oa::ChiStatistic::abs_mean, rows), (std::vector<double>{0.0, 1.0}));
  EXPECT_EQ(oa::profile_of_rows(oa::ChiStatistic::signed_mean, rows),
            (std::vector<double>{0.0, 1.0}));
  const at::Tensor neg = at::tensor({-2.0, -4.0, -2.0, -2.0}, at::kDouble).view({2, 2});
  EXPECT_EQ(oa::profile_of_rows(oa::ChiStatistic::abs_mean, neg), (std::vector<double>{2.0, 3.0}));
  EXPECT_THROW(oa::statistic_rows(oa::ChiStatistic::mean_abs, rows, at::Tensor()), oal::Error);
}

TEST(ChiStatistic, MeanAbsIsTheExactPairMeanOfAbsoluteProducts) {
  // O(N d) prefix sums against an explicit loop over causal pairs of |q_ir k_jr| / sqrt(d).
  const at::Tensor q = oa::standard_normal({1, 2, 13, 4}, 11);
  const at::Tensor k = oa::standard_normal({1, 1, 13, 4}, 12);
  const at::Tensor fast = oa::contribution_magnitudes(q, k);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t r = 0; r < 4; ++r) {
      double acc = 0.0;
      int64_t pairs = 0;
      for (int64_t i = 0; i < 13; ++i)
        for (int64_t j = 0; j <= i; ++j, ++pairs)
          acc += std::abs(q[0][h][i][r].item<double>() * k[0][0][j][r].item<double>());
      EXPECT_NEAR(fast[0][h][r].item<double>(), acc / (pairs * 2.0), 1e-12) << h << "," << r;
    }
}

TEST(ChiStatistic, NegativeOutlierInputsLeaveTheBulkUnderMagnitudeStatistics) {
  const PlantedRows rows = negative_outlier_rows(12, 32, 16, 3);
  EXPECT_LT(rows.signed_rows.mean(0)[3].item<double>(), -4.0);  // the plant took effect
  for (oa::ChiStatistic s : {oa::ChiStatistic::mean_abs, oa::ChiStatistic::abs_mean}) {
    const oa::Grouping g = group_with(s, rows);
    SCOPED_TRACE(oa::chi_statistic_name(s));
    EXPECT_NE(g.group_of[3], 0);
    EXPECT_EQ(g.order.back(), 3);  // the largest contribution of the head
    EXPECT_EQ(g.groups.back(), (std::vector<int64_t>{3}));
  }
  // The signed statistic sorts the dimension first: it lands in the bulk (issue 12).
  const oa::Grouping s = group_with(oa::ChiStatistic::signed_mean, rows);
  EXPECT_EQ(s.order.front(), 3);
  EXPECT_EQ(s.group_of[3], 0);
}

TEST(ChiStatistic, NegativeOutlierModelDimensionsLeaveTheBulk) {
  const oal::fixtures::SyntheticOptions so = small_model();
  const om::Transformer model(negated_key_model(so));
  const auto planted = oal::fixtures::synthetic_planted_dims(so);
  oa::PromptSet prompts;
  prompts.calibration = token_prompts(16, model.config().vocab_size);
  oa::AnalyzeOptions ao;
  ao.top_k = 2;
  const oa::AnalysisResult r = oa::analyze_model(model, prompts, ao);
  EXPECT_EQ(r.chi, oa::ChiStatistic::mean_abs);
  for (oa::ChiStatistic s : k_all) {
    oa::GroupingOptions go;
    go.chi = s;
    go.bootstrap = 200;
    const auto groups = oa::group_analysis(r, go);
    for (size_t h = 0; h < r.layers[0].heads.size(); ++h) {
      SCOPED_TRACE(testing::Message() << oa::chi_statistic_name(s) << " head " << h);
      for (int64_t dim : planted[0]) {
        EXPECT_LT(r.layers[0].heads[h].chi[dim], 0.0);  // the plant is negative
        if (s == oa::ChiStatistic::signed_mean)
          EXPECT_EQ(groups[0].heads[h].group_of[dim], 0);
        else
          EXPECT_NE(groups[0].heads[h].group_of[dim], 0);
      }
    }
  }
  // The analysis' own top dims follow mean-abs: the planted pair.
  for (const auto& h : r.layers[0].heads)
    EXPECT_EQ(std::set<int64_t>(h.top_dims.begin(), h.top_dims.end()),
              std::set<int64_t>(planted[0].begin(), planted[0].end()));
}

TEST(ChiStatistic, GaussianControlTopShareIsWithinOnePointOfKOverDUnderMeanAbs) {
  // A model with head_dim 64; its analysis' Gaussian control draws i.i.d. N(0, 1) q, k of
  // the calibration prompts' shape. Under mean-abs every dimension has the same expected
  // statistic (2/π)/8, so the top-5 share must be 5/64 = 7.81% up to sampling noise.
  oal::fixtures::SyntheticOptions so = small_model();
  so.hidden_size = 128;
  so.num_heads = 2;
  so.num_kv_heads = 1;
  so.head_dim = 64;
  so.planted_pairs = 0;
  const om::Transformer model(oal::fixtures::make_synthetic_weights(so));
  oa::PromptSet prompts;
  prompts.calibration = token_prompts(40, model.config().vocab_size);
  for (auto& p : prompts.calibration) p.resize(128, 7);
  oa::AnalyzeOptions ao;
  ao.top_k = 5;
  const oa::AnalysisResult r = oa::analyze_model(model, prompts, ao);
  for (const auto& h : r.layers[0].heads)
    EXPECT_NEAR(h.gaussian_top_share, 5.0 / 64.0, 0.01) << "head " << h.head;
}

TEST(ChiStatistic, FilesWithoutTheFieldMeanSigned) {
  oa::AnalysisResult r;
  r.model = "old";
  r.num_layers = 1;
  r.num_heads = 1;
  r.num_kv_heads = 1;
  r.head_dim = 2;
  r.hidden_size = 2;
  r.top_k = 1;
  r.calibration_lengths = {3, 3};
  oa::LayerAnalysis l;
  oa::HeadAnalysis h;
  h.chi_per_prompt = {{-1.0, 0.5}, {-3.0, 0.5}};
  h.chi = {-2.0, 0.5};
  h.magnitude = {2.5, 0.6};
  h.order = {0, 1};
  h.top_dims = {1};
  l.heads.push_back(h);
  r.layers.push_back(l);
  nlohmann::json j = oa::analysis_to_json(r);
  j.erase("chi_statistic");
  j["layers"][0]["heads"][0].erase("score");
  const oa::AnalysisResult back = oa::analysis_from_json(j);
  EXPECT_EQ(back.chi, oa::ChiStatistic::signed_mean);
  EXPECT_EQ(back.layers[0].heads[0].score, (std::vector<double>{-2.0, 0.5}));
  // No per-prompt magnitudes: mean-abs regrouping asks for a re-run, signed still works.
  oa::GroupingOptions go;
  go.alpha = 1.0;
  go.g_min = 1;
  EXPECT_THROW(oa::group_analysis(back, go), oal::Error);
  go.chi = oa::ChiStatistic::signed_mean;
  EXPECT_NO_THROW(oa::group_analysis(back, go));
  // Kernel JSON meta: absent → signed, present → parsed.
  EXPECT_EQ(oa::kernels_chi_statistic({{"source", "oal group"}}), oa::ChiStatistic::signed_mean);
  EXPECT_EQ(oa::kernels_chi_statistic({{"grouping", {{"chi_statistic", "abs-mean"}}}}),
            oa::ChiStatistic::abs_mean);
  EXPECT_THROW(oa::kernels_chi_statistic({{"grouping", {{"chi_statistic", "x"}}}}), oal::Error);
}
