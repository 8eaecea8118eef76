// Error-concentration diagnostics (Table 1, App. A.2): the retained-error ratio R_S of
// the hybrid that approximates only the high-contribution subset, and the matched
// randomization test, on planted inputs whose answer is known.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "oal/core/error.h"
#include "oal/linearize/diagnose.h"

namespace oal::linearize {
namespace {

// Two sequences, Hq = 2 sharing one KV head, T = 48, D = 8. Dimensions 0 and 1 are
// large (std 3) in q and k, the rest small (std 0.3): the logits, and so TaylorShift's
// error (exp(s) vs 1 + s + s²/2 grows with |s|), live in dims 0-1.
DiagnoseLayer planted_layer(std::vector<std::vector<int64_t>> head_groups) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  at::Tensor scale = at::full({8}, 0.3, at::kFloat);
  scale.narrow(0, 0, 2).fill_(3.0);
  DiagnoseLayer l;
  l.layer = 0;
  l.q = at::randn({2, 2, 48, 8}, gen) * scale;
  l.k = at::randn({2, 1, 48, 8}, gen) * scale;
  l.v = at::randn({2, 1, 48, 8}, gen);
  l.groups = {head_groups, head_groups};
  return l;
}

DiagnoseOptions taylor_options(int64_t controls) {
  DiagnoseOptions o;
  o.methods = {"taylorshift"};  // deterministic: one seed is the whole method
  o.seeds = {0};
  o.positions = 12;
  o.controls = controls;
  o.gaussian = false;
  return o;
}

TEST(Diagnose, ErrorConcentratesOnPlantedOutlierDims) {
  const auto layer = planted_layer({{2, 3, 4, 5, 6, 7}, {0, 1}});
  const DiagnoseResult r = diagnose({layer}, taylor_options(30));
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.subset_dims, 4);  // 2 dims x 2 heads
  EXPECT_EQ(r.total_dims, 16);
  const DiagnoseRow& row = r.rows[0];
  // Approximating only dims 0-1 keeps most of the full error...
  EXPECT_GT(row.retained, 0.5);
  EXPECT_LE(row.retained, 1.5);
  // ...and no random pair of small dims comes close: every control is below R_S, so the
  // Monte Carlo p-value is its floor 1 / (B + 1).
  EXPECT_EQ(row.exceed, 0);
  EXPECT_EQ(row.controls, 30);
  EXPECT_DOUBLE_EQ(row.p_value, 1.0 / 31.0);
}

TEST(Diagnose, EmptySubsetRetainsNothingAndIsNotSignificant) {
  const auto layer = planted_layer({{0, 1, 2, 3, 4, 5, 6, 7}});  // one group: the bulk
  const DiagnoseResult r = diagnose({layer}, taylor_options(5));
  EXPECT_EQ(r.subset_dims, 0);
  // The hybrid is exact softmax, computed by another fp64 route (exact logits + the
  // baseline's log-kernel of all-zero vectors, log 1 = 0): rounding only, ~1e-32.
  EXPECT_LT(r.rows[0].retained, 1e-20);
  EXPECT_EQ(r.rows[0].exceed, 5);             // every (empty) control ties
  EXPECT_DOUBLE_EQ(r.rows[0].p_value, 1.0);
}

TEST(Diagnose, SameSeedSameNumbersWhateverTheThreadCount) {
  const auto layer = planted_layer({{0, 2, 3, 4, 5, 6}, {1, 7}});  // a mixed subset
  DiagnoseOptions o = taylor_options(12);
  o.methods = {"taylorshift", "performer"};
  o.seeds = {0, 1};
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const DiagnoseResult a = diagnose({layer}, o);
  at::set_num_threads(2);
  const DiagnoseResult b = diagnose({layer}, o);
  at::set_num_threads(threads);
  ASSERT_EQ(a.rows.size(), 2u);
  for (size_t i = 0; i < a.rows.size(); ++i) {
    EXPECT_EQ(a.rows[i].retained, b.rows[i].retained);
    EXPECT_EQ(a.rows[i].exceed, b.rows[i].exceed);
    EXPECT_EQ(a.rows[i].p_value, b.rows[i].p_value);
  }
}

TEST(Diagnose, GaussianControlIsGroupedOnItsOwnCalibrationShapedPrompts) {
  // The control's groups come from gaussian_prompts fresh N(0, 1) prompts (here 6 of 20
  // tokens, not the evaluation shape 2 x 48), grouped with --chi; its ratio is a number.
  const auto layer = planted_layer({{2, 3, 4, 5, 6, 7}, {0, 1}});
  DiagnoseOptions o = taylor_options(0);
  o.gaussian = true;
  o.gaussian_prompts = 6;
  o.gaussian_prompt_len = 20;
  o.grouping.bootstrap = 50;
  const DiagnoseResult r = diagnose({layer}, o);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_TRUE(std::isfinite(r.rows[0].gaussian));
  EXPECT_GE(r.rows[0].gaussian, 0.0);
  o.gaussian_prompts = 1;  // the grouping's bootstrap needs two prompts
  try {
    diagnose({layer}, o);
    FAIL() << "expected a too-few-Gaussian-prompts error";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected at least 2"), std::string::npos) << e.what();
  }
}

TEST(Diagnose, BadInputIsAnError) {
  auto layer = planted_layer({{2, 3, 4, 5, 6, 7}, {0, 1}});
  DiagnoseOptions o = taylor_options(0);
  o.positions = 0;
  EXPECT_THROW(diagnose({layer}, o), oal::Error);
  EXPECT_THROW(diagnose({}, taylor_options(0)), oal::Error);
  layer.groups.pop_back();  // one grouping for two heads
  EXPECT_THROW(diagnose({layer}, taylor_options(0)), oal::Error);
  auto big = planted_layer({{0, 1}, {2, 3, 4, 5, 6, 7}});  // subset larger than the bulk
  EXPECT_THROW(diagnose({big}, taylor_options(3)), oal::Error);
}

}  // namespace
}  // namespace oal::linearize
