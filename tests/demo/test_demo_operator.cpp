// `oal demo` section 1 (operator on synthetic data): structure, sanity of the numbers,
// and option validation. Tiny sizes: this checks the plumbing, not the speed.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "oal/core/error.h"
#include "oal/demo/demo_operator.h"

namespace oal::demo {
namespace {

OperatorDemoOptions tiny() {
  OperatorDemoOptions o;
  o.q_heads = 2;
  o.kv_heads = 1;
  o.dim = 8;
  o.value_dim = 4;
  o.length = 48;
  o.outlier_dims = {1, 5};
  o.outlier_q_mean = 1.5;  // milder than the default: d = 8 concentrates scores more
  o.outlier_k_std = 1.5;
  o.fit_sequences = 1;
  o.fit_steps = 4;
  o.chunk = 16;
  o.speed_lengths = {32, 64};
  o.repeats = 1;
  o.decode_steps = 2;
  return o;
}

TEST(DemoOperator, ReportsAccuracyAndSpeedOfEveryMethodAgainstSoftmax) {
  std::set<std::string> phases;
  auto sec = operator_demo(tiny(), [&](int64_t, int64_t, std::string_view what, std::string_view) {
    phases.insert(std::string(what));
  });
  EXPECT_TRUE(phases.count("fits") && phases.count("cells"));  // calibration, then bench
  ASSERT_EQ(sec.rows.size(), 4u);
  EXPECT_EQ(sec.rows.size(), sec.data["methods"].size());
  EXPECT_EQ(sec.columns.size(), 4u + 2u + 3u);  // two prefill lengths, decode, state, path
  EXPECT_TRUE(sec.data["synthetic"].get<bool>());
  const auto& m = sec.data["methods"];
  EXPECT_EQ(m[0]["rel_mse"].get<double>(), 0.0);  // softmax is the reference
  for (size_t i = 1; i < m.size(); ++i) {
    double r = m[i]["rel_mse"].get<double>();
    EXPECT_TRUE(std::isfinite(r) && r > 0 && r < 1.0) << m[i]["method"];
    // HD state: [B, Hkv, 1 + d + d(d+1)/2, dv + 1] fp32
    EXPECT_EQ(m[i]["state_bytes"].get<int64_t>(), 1 * 1 * (1 + 8 + 36) * 5 * 4);
    EXPECT_GT(m[i]["prefill_ms"]["64"].get<double>(), 0.0);
  }
  // The fitted kernels beat the unfitted Taylor kernel they start from (on another draw).
  EXPECT_LT(m[1]["rel_mse"].get<double>(), m[3]["rel_mse"].get<double>());
  // softmax KV cache: k and v of every held token, fp32, at least the 64-token context
  // (the decode timing adds its steps); it grows, the HD state does not.
  const int64_t kv = m[0]["state_bytes"].get<int64_t>(), per_token = 1 * (8 + 4) * 4;
  EXPECT_EQ(kv % per_token, 0);
  EXPECT_GE(kv / per_token, 64);
  EXPECT_NE(sec.notes.front().find("Synthetic"), std::string::npos);
}

TEST(DemoOperator, BadOptionsAreErrors) {
  auto o = tiny();
  o.outlier_dims = {9};
  EXPECT_THROW(operator_demo(o), oal::Error);
  o = tiny();
  o.kv_heads = 3;
  try {
    operator_demo(o);
    ADD_FAILURE() << "expected oal::Error";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("[demo_operator]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace oal::demo
