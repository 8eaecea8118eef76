// continuation_logprob against a plain reference: the full forward's log-softmax summed
// at the continuation positions.
#include <gtest/gtest.h>

#include "oal/core/error.h"
#include "oal/eval/continuation_logprob.h"
#include "common/tiny_model.h"

namespace {

using namespace oal;

TEST(ContinuationLogprob, MatchesFullForwardReference) {
  model::Transformer m(test::tiny_weights());
  const std::vector<int64_t> ctx = {1, 5, 9, 3}, cont = {7, 2, 30};
  at::Tensor all = at::tensor(std::vector<int64_t>{1, 5, 9, 3, 7, 2, 30}, at::kLong).unsqueeze(0);
  at::NoGradGuard g;
  at::Tensor logp = at::log_softmax(m.forward(all), -1).squeeze(0).to(at::kDouble);
  double ref = logp[3][7].item<double>() + logp[4][2].item<double>() + logp[5][30].item<double>();
  // fp32 log-softmax, summed in fp64: the only difference is the forward length (7 vs 6
  // tokens), which a causal model does not see; agreement to fp32 rounding.
  EXPECT_NEAR(eval::continuation_logprob(m, ctx, cont), ref, 1e-5);
  EXPECT_THROW(eval::continuation_logprob(m, {}, cont), Error);
  EXPECT_THROW(eval::continuation_logprob(m, ctx, {40}), Error);
  EXPECT_THROW(eval::continuation_logprob(m, std::vector<int64_t>(64, 1), cont), Error);
}

}  // namespace
