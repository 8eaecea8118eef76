#include "oal/calib/shared_capture.h"

#include <cstring>
#include <string>

#include "oal/attention/softmax/softmax_method.h"
#include "oal/calib/layer_data.h"
#include "oal/core/error.h"

namespace oal::calib {
namespace {

constexpr const char* k_op = "shared capture";

// The softmax outputs a fit is matched against, for captured q, k, v.
at::Tensor softmax_targets(const analysis::LayerCapture& c) {
  at::NoGradGuard g;
  return attn::SoftmaxAttention().forward(c.q, c.k, c.v);
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
  if (world.size() == 1)
    return fit_inputs(capture_qkv(model, train, layers, progress),
                      capture_qkv(model, val, layers, progress));
  // One deal over both splits' blocks keeps the ranks' shares within one block of each
  // other (e.g. 2 train + 1 val on 3 ranks: one block each).
  const int64_t n_train = train.size(0), n_val = val.size(0);
  const at::Tensor all = at::cat({train, val});
  const at::Tensor mine = rank_share(all, world);
  // A rank with no block (fewer blocks than ranks) captures the first block and sends
  // none of it: the gather needs the tensors' trailing shape, and a forward pass cannot
  // run on zero sequences.
  const bool idle = mine.size(0) == 0;
  auto captured = capture_qkv(model, idle ? all.narrow(0, 0, 1) : mine, layers,
                              idle ? ProgressFn{} : progress);
  std::vector<LayerFitInput> inputs;
  for (auto& [layer, c] : captured) {
    const int64_t keep = idle ? 0 : c.q.size(0);
    auto gathered = [&](const at::Tensor& t) {
      return gather_shares(t.narrow(0, 0, keep), all.size(0), world);
    };
    const at::Tensor q = gathered(c.q), k = gathered(c.k), v = gathered(c.v),
                     y = gathered(softmax_targets(c));
    c = {};  // this rank's copy is no longer needed
    auto first = [&](const at::Tensor& t) { return t.narrow(0, 0, n_train); };
    auto rest = [&](const at::Tensor& t) { return t.narrow(0, n_train, n_val); };
    inputs.push_back({layer, {first(q), first(k), first(v), first(y),
                              rest(q), rest(k), rest(v), rest(y)}});
  }
  return inputs;
}

}  // namespace oal::calib
