// The shared capture's bookkeeping: rank_share deals rows round-robin and gather_shares
// puts every rank's rows back in order — for uneven splits and fewer rows than ranks —
// and a rank that sends the wrong number of bytes is an error, not a silently wrong tensor.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "oal/calib/shared_capture.h"
#include "oal/core/error.h"

namespace {

using namespace oal;

// Rank `rank` of `size`, whose all_gather returns what each rank's share of `full` would
// send (rank_share computed as that rank), or `forged` bytes for rank 1 when set.
class FakeWorld : public dist::World {
 public:
  FakeWorld(int rank, int size, at::Tensor full) : rank_(rank), size_(size), full_(full) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<std::string> all_gather(const std::string& mine) override {
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) {
        out.push_back(mine);
        continue;
      }
      const at::Tensor part = calib::rank_share(full_, FakeWorld(r, size_, full_)).contiguous();
      out.emplace_back(static_cast<const char*>(part.data_ptr()), part.nbytes());
      if (r == 1 && forge) out.back() += "x";
    }
    return out;
  }
  void all_reduce_sum(at::Tensor&) override {}
  void barrier() override {}
  bool forge = false;

 private:
  int rank_, size_;
  at::Tensor full_;
};

TEST(SharedCapture, SharesGatherBackInRowOrder) {
  for (int64_t n : {7, 6, 2, 1}) {
    for (int size : {1, 2, 3}) {
      const at::Tensor full = at::arange(n * 2 * 3, at::kFloat).reshape({n, 2, 3});
      for (int rank = 0; rank < size; ++rank) {
        FakeWorld w(rank, size, full);
        const at::Tensor mine = calib::rank_share(full, w);
        EXPECT_EQ(mine.size(0), rank < n ? (n - rank + size - 1) / size : 0);
        if (mine.size(0) > 0) {
          EXPECT_TRUE(at::equal(mine[0], full[rank]));
        }
        EXPECT_TRUE(at::equal(calib::gather_shares(mine, n, w), full))
            << "n " << n << " size " << size << " rank " << rank;
      }
    }
  }
}

TEST(SharedCapture, WrongByteCountFromARankIsAnError) {
  const at::Tensor full = at::arange(5 * 4, at::kDouble).reshape({5, 4});
  FakeWorld w(0, 2, full);
  w.forge = true;
  EXPECT_THROW(calib::gather_shares(calib::rank_share(full, w), 5, w), Error);
}

}  // namespace
