// `oal demo`'s last section (frozen-attention fidelity of every method on stories260K)
// with a handful of updates: it runs end to end with the default contribution statistic
// and reports every method, softmax exactly 0. Checks the plumbing, not the fit quality.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "../common/shared_data.h"
#include "oal/attention/registry.h"
#include "oal/demo/demo_fidelity.h"

namespace oal::demo {
namespace {

TEST(DemoFidelity, EveryMethodIsReportedWithTheDefaultStatistic) {
  const auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  FidelityDemoOptions o;
  o.model = model.string();
  o.text = text.string();
  o.max_updates = 4;  // the fits only need to run; their quality is tested in calib
  const DemoSection s = fidelity_demo(o);

  ASSERT_EQ(s.notes.size(), 2u);
  EXPECT_NE(s.notes[1].find("mean-abs statistic"), std::string::npos) << s.notes[1];
  std::set<std::string> methods;
  for (const auto& row : s.rows) {
    ASSERT_EQ(row.size(), s.columns.size());
    methods.insert(row[0]);
    const double relmse = std::stod(row[2]);
    if (row[0] == "softmax") EXPECT_EQ(relmse, 0.0);  // the reference itself
    else EXPECT_TRUE(std::isfinite(relmse) && relmse > 0) << row[0] << " " << row[2];
  }
  const auto names = attn::method_names(attn::Window{});
  EXPECT_EQ(methods, std::set<std::string>(names.begin(), names.end()));
}

}  // namespace
}  // namespace oal::demo
