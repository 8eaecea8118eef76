#include "oal/calib/fit_exchange.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "oal/core/error.h"

namespace oal::calib {
namespace {

constexpr std::string_view k_op = "fit_exchange";
constexpr uint32_t k_magic = 0x4f414c46;  // "OALF"

template <typename T>
void put(std::string& out, const T& x) {
  out.append(reinterpret_cast<const char*>(&x), sizeof(T));
}

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  template <typename T>
  T get() {
    T x;
    take(&x, sizeof(T));
    return x;
  }
  void take(void* dst, size_t n) {
    check(n <= s_.size() - pos_, k_op, "truncated results: need {} more bytes at offset {} of {}",
          n, pos_, s_.size());
    std::memcpy(dst, s_.data() + pos_, n);
    pos_ += n;
  }
  bool done() const { return pos_ == s_.size(); }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

void put_tensor(std::string& out, const at::Tensor& t) {
  check(t.device().is_cpu() && (t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble),
        k_op, "expected a CPU fp32/fp64 tensor, got {}", c10::toString(t.scalar_type()));
  const at::Tensor c = t.detach().contiguous();
  put<uint8_t>(out, c.scalar_type() == at::kFloat ? 4 : 8);
  put<int64_t>(out, c.dim());
  for (int64_t s : c.sizes()) put<int64_t>(out, s);
  out.append(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

at::Tensor get_tensor(Reader& r) {
  const uint8_t elem = r.get<uint8_t>();
  check(elem == 4 || elem == 8, k_op, "bad element size {}", elem);
  const int64_t dim = r.get<int64_t>();
  check(dim >= 0 && dim <= 8, k_op, "bad tensor rank {}", dim);
  std::vector<int64_t> shape(dim);
  int64_t numel = 1;
  for (auto& s : shape) {
    s = r.get<int64_t>();
    check(s >= 0 && s < (int64_t(1) << 32), k_op, "bad tensor size {}", s);
    numel *= s;
    check(numel < (int64_t(1) << 32), k_op, "tensor too large");
  }
  at::Tensor t = at::empty(shape, elem == 4 ? at::kFloat : at::kDouble);
  r.take(t.data_ptr(), numel * elem);
  return t;
}

}  // namespace

std::vector<int> assign_tasks(const std::vector<double>& costs, int ranks) {
  check(ranks >= 1, k_op, "expected at least one rank, got {}", ranks);
  std::vector<size_t> order(costs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return costs[a] > costs[b]; });
  std::vector<double> load(ranks, 0.0);
  std::vector<int> owner(costs.size(), 0);
  for (size_t i : order) {
    const int r = int(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = r;
    load[r] += costs[i];
  }
  return owner;
}

std::string pack_results(const std::vector<std::pair<int64_t, const FitResult*>>& results) {
  std::string out;
  put(out, k_magic);
  put<int64_t>(out, int64_t(results.size()));
  for (const auto& [index, r] : results) {
    put(out, index);
    put(out, r->best_val);
    put(out, r->initial_val);
    put(out, r->best_update);
    put(out, r->updates);
    put<int64_t>(out, int64_t(r->history.size()));
    for (const auto& [u, v] : r->history) {
      put(out, u);
      put(out, v);
    }
    put<int64_t>(out, int64_t(r->best.size()));
    for (const auto& t : r->best) put_tensor(out, t);
  }
  return out;
}

std::vector<std::pair<int64_t, FitResult>> unpack_results(const std::string& bytes) {
  Reader r(bytes);
  check(r.get<uint32_t>() == k_magic, k_op, "not a packed result set");
  const int64_t n = r.get<int64_t>();
  check(n >= 0 && n <= int64_t(bytes.size()), k_op, "bad result count {}", n);
  std::vector<std::pair<int64_t, FitResult>> out;
  for (int64_t i = 0; i < n; ++i) {
    FitResult f;
    const int64_t index = r.get<int64_t>();
    f.best_val = r.get<double>();
    f.initial_val = r.get<double>();
    f.best_update = r.get<int64_t>();
    f.updates = r.get<int64_t>();
    const int64_t h = r.get<int64_t>();
    check(h >= 0 && h <= int64_t(bytes.size()), k_op, "bad history length {}", h);
    for (int64_t k = 0; k < h; ++k) {
      const int64_t u = r.get<int64_t>();
      f.history.emplace_back(u, r.get<double>());
    }
    const int64_t nt = r.get<int64_t>();
    check(nt >= 0 && nt <= 64, k_op, "bad tensor count {}", nt);
    for (int64_t k = 0; k < nt; ++k) f.best.push_back(get_tensor(r));
    out.emplace_back(index, std::move(f));
  }
  check(r.done(), k_op, "trailing bytes after {} results", n);
  return out;
}

}  // namespace oal::calib
