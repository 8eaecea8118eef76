// `oal demo` section 1 (operator on synthetic data): structure, sanity of the numbers,
// and option validation. Tiny sizes: this checks the plumbing, not the speed.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "oal/core/error.h"
#include "oal/eval/demo_operator.h"

namespace oal::eval {
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
  o.fit_steps = 3;
  o.chunk = 16;
  o.block = 16;
  o.repeats = 1;
  o.decode_tokens = 2;
  return o;
}

TEST(DemoOperator, ReportsEveryMethodAgainstSoftmax) {
  int64_t calls = 0;
  auto sec = operator_demo(tiny(), [&](int64_t, int64_t, std::string_view, std::string_view) { ++calls; });
  EXPECT_EQ(calls, 6);  // 3 Adam steps for each of the two fitted kernels
  ASSERT_EQ(sec.rows.size(), 4u);
  EXPECT_EQ(sec.rows.size(), sec.data["methods"].size());
  EXPECT_TRUE(sec.data["synthetic"].get<bool>());
  const auto& m = sec.data["methods"];
  EXPECT_EQ(m[0]["rel_mse"].get<double>(), 0.0);  // softmax is the reference
  for (size_t i = 1; i < m.size(); ++i) {
    double r = m[i]["rel_mse"].get<double>();
    EXPECT_TRUE(std::isfinite(r) && r > 0 && r < 1.0) << m[i]["method"];
    // HD state: [B, Hkv, 1 + d + d(d+1)/2, dv + 1] fp32
    EXPECT_EQ(m[i]["state_bytes"].get<int64_t>(), 1 * 1 * (1 + 8 + 36) * 5 * 4);
    EXPECT_GT(m[i]["prefill_ms"].get<double>(), 0.0);
  }
  // softmax KV cache after the 48-token prefill: k and v, fp32
  EXPECT_EQ(m[0]["state_bytes"].get<int64_t>(), 48 * 1 * (8 + 4) * 4);
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
}  // namespace oal::eval
