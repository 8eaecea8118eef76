// Spreading fits over ranks: the assignment balances costs and is the same everywhere;
// results survive the byte round trip exactly; corrupt bytes are errors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "oal/calib/fit_exchange.h"
#include "oal/core/error.h"

namespace oal::calib {
namespace {

TEST(FitExchange, AssignmentBalancesCostAndIsDeterministic) {
  // One per-layer fit of cost 14 and 28 head fits of cost 1 over 3 ranks: the big one
  // alone on a rank, the rest split 14 / 14.
  std::vector<double> costs(28, 1.0);
  costs.insert(costs.begin() + 5, 14.0);
  const auto owner = assign_tasks(costs, 3);
  std::vector<double> load(3, 0.0);
  for (size_t i = 0; i < costs.size(); ++i) load[owner[i]] += costs[i];
  EXPECT_EQ(load, (std::vector<double>{14, 14, 14}));
  EXPECT_EQ(owner, assign_tasks(costs, 3));
  EXPECT_EQ(assign_tasks(costs, 1), std::vector<int>(costs.size(), 0));
  EXPECT_THROW(assign_tasks(costs, 0), oal::Error);
}

TEST(FitExchange, ResultsRoundTripBitExactly) {
  FitResult a;
  a.best = {at::randn({3, 3}), at::randn({5}, at::kDouble), at::randn({})};
  a.best_val = 0.125;
  a.initial_val = 1.0 / 3.0;
  a.best_update = 40;
  a.updates = 60;
  a.history = {{0, 0.5}, {20, 0.25}};
  FitResult b;
  const std::string bytes = pack_results({{7, &a}, {2, &b}});
  const auto back = unpack_results(bytes);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].first, 7);
  EXPECT_EQ(back[1].first, 2);
  const FitResult& c = back[0].second;
  EXPECT_EQ(c.best_val, a.best_val);
  EXPECT_EQ(c.initial_val, a.initial_val);
  EXPECT_EQ(c.best_update, 40);
  EXPECT_EQ(c.updates, 60);
  EXPECT_EQ(c.history, a.history);
  ASSERT_EQ(c.best.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(c.best[i].scalar_type(), a.best[i].scalar_type());
    EXPECT_TRUE(c.best[i].equal(a.best[i]));
  }
  EXPECT_TRUE(back[1].second.best.empty());
}

TEST(FitExchange, CorruptBytesAreErrors) {
  FitResult a;
  a.best = {at::ones({4})};
  const std::string bytes = pack_results({{0, &a}});
  EXPECT_THROW(unpack_results(bytes.substr(0, bytes.size() - 3)), oal::Error);
  EXPECT_THROW(unpack_results(bytes + "x"), oal::Error);
  EXPECT_THROW(unpack_results("nonsense"), oal::Error);
  EXPECT_THROW(unpack_results(""), oal::Error);
}

}  // namespace
}  // namespace oal::calib
