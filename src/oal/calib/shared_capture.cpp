#include "oal/calib/shared_capture.h"

#include <cstring>
#include <string>

#include "oal/calib/layer_data.h"
#include "oal/core/error.h"

namespace oal::calib {
namespace {

constexpr const char* k_op = "shared capture";

// One progress count over both splits: `offset` of this rank's blocks were done before.
ProgressFn split_progress(const ProgressFn& progress, int64_t offset, int64_t total,
                          std::string split) {
  if (!progress) return {};
  return [=](int64_t done, int64_t, std::string_view what, std::string_view) {
    progress(offset + done, total, what, split);
  };
}

// Every tensor of a fit input gathered from the ranks' shares.
FitData gather_fit_data(const FitData& d, int64_t n_train, int64_t n_val, dist::World& w) {
  return {gather_shares(d.q_train, n_train, w), gather_shares(d.k_train, n_train, w),
          gather_shares(d.v_train, n_train, w), gather_shares(d.y_train, n_train, w),
          gather_shares(d.q_val, n_val, w),     gather_shares(d.k_val, n_val, w),
          gather_shares(d.v_val, n_val, w),     gather_shares(d.y_val, n_val, w)};
}

}  // namespace

at::Tensor rank_share(const at::Tensor& blocks, const dist::World& world) {
  if (world.size() == 1) return blocks;
  if (world.rank() >= blocks.size(0)) return blocks.narrow(0, 0, 0);  // fewer rows than ranks
  return blocks.index_select(0, at::arange(world.rank(), blocks.size(0), world.size(), at::kLong));
}

at::Tensor gather_shares(const at::Tensor& mine, int64_t n, dist::World& world) {
  if (world.size() == 1) return mine;
  const at::Tensor part = mine.contiguous().to(at::kCPU);
  const std::vector<std::string> all = world.all_gather(
      std::string(static_cast<const char*>(part.data_ptr()), part.nbytes()));
  std::vector<int64_t> shape = part.sizes().vec();
  shape[0] = n;
  at::Tensor out = at::empty(shape, part.options());
  const int64_t row_bytes = n > 0 ? int64_t(out.nbytes()) / n : 0;
  for (int r = 0; r < world.size(); ++r) {
    const int64_t rows = r < n ? (n - r + world.size() - 1) / world.size() : 0;
    check(int64_t(all[size_t(r)].size()) == rows * row_bytes, k_op,
          "rank {} sent {} bytes, expected {} rows of {} bytes", r, all[size_t(r)].size(), rows,
          row_bytes);
    auto* base = static_cast<char*>(out.data_ptr());
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(base + (r + i * world.size()) * row_bytes,
                  all[size_t(r)].data() + i * row_bytes, size_t(row_bytes));
  }
  return out;
}

std::vector<LayerFitInput> shared_fit_inputs(const model::Transformer& model,
                                             const at::Tensor& train, const at::Tensor& val,
                                             const std::vector<int64_t>& layers,
                                             dist::World& world, const ProgressFn& progress) {
  const at::Tensor my_train = rank_share(train, world), my_val = rank_share(val, world);
  const int64_t mine = my_train.size(0) + my_val.size(0);
  // A split with fewer blocks than ranks leaves some ranks an empty share. Such a rank
  // captures the split's first block and sends none of it: the gather needs the
  // tensors' trailing shape, and a forward pass cannot run on zero sequences.
  const bool no_train = my_train.size(0) == 0, no_val = my_val.size(0) == 0;
  auto tr = capture_qkv(model, no_train ? train.narrow(0, 0, 1) : my_train, layers,
                        no_train ? ProgressFn{} : split_progress(progress, 0, mine, "training blocks"));
  auto va = capture_qkv(model, no_val ? val.narrow(0, 0, 1) : my_val, layers,
                        no_val ? ProgressFn{}
                               : split_progress(progress, my_train.size(0), mine, "validation blocks"));
  std::vector<LayerFitInput> inputs = fit_inputs(tr, va);
  if (world.size() == 1) return inputs;
  tr.clear();
  va.clear();
  for (auto& in : inputs) {
    FitData& d = in.data;
    if (no_train)
      for (at::Tensor* t : {&d.q_train, &d.k_train, &d.v_train, &d.y_train}) *t = t->narrow(0, 0, 0);
    if (no_val)
      for (at::Tensor* t : {&d.q_val, &d.k_val, &d.v_val, &d.y_val}) *t = t->narrow(0, 0, 0);
    d = gather_fit_data(d, train.size(0), val.size(0), world);
  }
  return inputs;
}

}  // namespace oal::calib
