#include "oal/attention/oal/quadratic.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::attn {
namespace {

constexpr std::string_view k_op = "quadratic_kernel";

// Checks that `groups` partitions 0..d-1 (d = total size) with no empty group; returns d.
int64_t check_partition(const std::vector<std::vector<int64_t>>& groups, std::string_view op) {
  check(!groups.empty(), op, "expected at least one group, got none");
  int64_t d = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    check(!groups[g].empty(), op, "group {} is empty; every group needs a dimension", g);
    d += static_cast<int64_t>(groups[g].size());
  }
  std::vector<int> seen(d, 0);
  for (size_t g = 0; g < groups.size(); ++g)
    for (int64_t r : groups[g]) {
      check(r >= 0 && r < d, op,
            "group {} holds dimension {}, outside 0..{} (groups must partition 0..d-1)", g, r,
            d - 1);
      check(seen[r]++ == 0, op, "dimension {} appears in more than one place; groups must "
            "partition 0..{} with every dimension exactly once", r, d - 1);
    }
  return d;
}

// Lower-triangular Cholesky-like factor of the PSD 2x2 [[m00, m01], [m01, m11]].
std::vector<double> factor_2x2(double m00, double m01, double m11, std::string_view op) {
  const double tol = 1e-12 * std::max({1.0, std::abs(m00), std::abs(m11)});
  check(std::isfinite(m00) && std::isfinite(m01) && std::isfinite(m11), op,
        "global coefficients must be finite");
  check(m00 >= -tol && m11 >= -tol && m00 * m11 - m01 * m01 >= -tol, op,
        "global quadratic needs a >= eps, c >= 0 and b² <= 4 (a - eps) c (M = [[{}, {}], "
        "[{}, {}]] is not positive semidefinite)",
        m00, m01, m01, m11);
  double l00 = std::sqrt(std::max(m00, 0.0));
  if (l00 <= 0) return {0.0, std::sqrt(std::max(m11, 0.0)), 0.0};
  double l10 = m01 / l00;
  double l11 = std::sqrt(std::max(m11 - l10 * l10, 0.0));
  return {l00, l10, l11};
}

}  // namespace

QuadraticKernel::QuadraticKernel(std::vector<std::vector<int64_t>> groups,
                                 std::vector<double> packed_lower, double eps)
    : groups_(std::move(groups)), packed_(std::move(packed_lower)), eps_(eps) {
  dim_ = check_partition(groups_, k_op);
  int64_t want = packed_size(num_groups());
  check(static_cast<int64_t>(packed_.size()) == want, k_op,
        "packed L for G = {} groups needs (G+1)(G+2)/2 = {} values, got {}", num_groups(),
        want, packed_.size());
  for (double x : packed_)
    check(std::isfinite(x), k_op, "L contains a non-finite value ({}); expected finite", x);
  check(std::isfinite(eps_) && eps_ > 0, k_op, "eps must be finite and > 0, got {}", eps_);
}

QuadraticKernel QuadraticKernel::from_lower(std::vector<std::vector<int64_t>> groups,
                                            const at::Tensor& L, double eps) {
  check_dim(L, 2, k_op, "L [G+1, G+1]");
  int64_t n = static_cast<int64_t>(groups.size()) + 1;
  check(L.size(0) == n && L.size(1) == n, k_op, "L for {} groups must be [{}, {}], got {}",
        n - 1, n, n, shape_str(L));
  auto Ld = L.detach().to(at::kDouble).cpu();
  check(at::triu(Ld, 1).abs().max().item<double>() == 0.0, k_op,
        "L must be lower-triangular (non-zero entries above the diagonal)");
  return QuadraticKernel(std::move(groups), pack_lower(Ld), eps);
}

std::vector<std::vector<int64_t>> QuadraticKernel::single_group(int64_t d) {
  check(d >= 1, k_op, "dimension must be >= 1, got {}", d);
  std::vector<int64_t> all(d);
  for (int64_t r = 0; r < d; ++r) all[r] = r;
  return {all};
}

QuadraticKernel QuadraticKernel::global(std::vector<std::vector<int64_t>> groups, double a,
                                        double b, double c, double eps) {
  check(std::isfinite(eps) && eps > 0, k_op, "eps must be finite and > 0, got {}", eps);
  auto l = factor_2x2(a - eps, b / 2, c, k_op);
  int64_t d = check_partition(groups, k_op);
  QuadraticKernel g1(single_group(d), l, eps);
  return embed_global(g1, std::move(groups));
}

QuadraticKernel QuadraticKernel::taylor(std::vector<std::vector<int64_t>> groups, double eps) {
  check(eps > 0 && eps < 0.5, k_op,
        "Taylor initialisation needs 0 < eps < 1/2 (M00 = 1 - eps), got {}", eps);
  return global(std::move(groups), 1.0, 1.0, 0.5, eps);
}

QuadraticKernel QuadraticKernel::embed_global(const QuadraticKernel& global_kernel,
                                              std::vector<std::vector<int64_t>> groups) {
  check(global_kernel.num_groups() == 1, k_op,
        "embed_global needs a G = 1 kernel, got G = {}", global_kernel.num_groups());
  int64_t d = check_partition(groups, k_op);
  check(d == global_kernel.dim(), k_op, "embed_global: groups cover d = {}, kernel has d = {}",
        d, global_kernel.dim());
  const auto& g = global_kernel.packed_lower();  // L00, L10, L11
  int64_t n = static_cast<int64_t>(groups.size()) + 1;
  auto L = at::zeros({n, n}, at::kDouble);
  L[0][0] = g[0];
  for (int64_t r = 1; r < n; ++r) {
    L[r][0] = g[1];
    L[r][1] = g[2];
  }
  return QuadraticKernel(std::move(groups), pack_lower(L), global_kernel.eps());
}

QuadraticKernel QuadraticKernel::perturbed(double sigma, uint64_t seed) const {
  check(std::isfinite(sigma) && sigma >= 0, k_op, "sigma must be finite and >= 0, got {}",
        sigma);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, 1.0);
  auto p = packed_;
  for (double& x : p) x += sigma * noise(rng);
  return QuadraticKernel(groups_, std::move(p), eps_);
}

std::vector<int64_t> QuadraticKernel::group_of() const {
  std::vector<int64_t> g(dim_);
  for (size_t i = 0; i < groups_.size(); ++i)
    for (int64_t r : groups_[i]) g[r] = static_cast<int64_t>(i);
  return g;
}

std::vector<double> QuadraticKernel::pack_lower(const at::Tensor& L) {
  check_dim(L, 2, k_op, "L [n, n]");
  check(L.size(0) == L.size(1), k_op, "L must be square, got {}", shape_str(L));
  auto Ld = L.detach().to(at::kDouble).cpu().contiguous();
  auto acc = Ld.accessor<double, 2>();
  std::vector<double> out;
  for (int64_t i = 0; i < Ld.size(0); ++i)
    for (int64_t j = 0; j <= i; ++j) out.push_back(acc[i][j]);
  return out;
}

at::Tensor QuadraticKernel::unpack_lower(const std::vector<double>& packed, int64_t n) {
  check(static_cast<int64_t>(packed.size()) == n * (n + 1) / 2, k_op,
        "packed lower triangle of a {}x{} matrix needs {} values, got {}", n, n,
        n * (n + 1) / 2, packed.size());
  auto L = at::zeros({n, n}, at::kDouble);
  auto acc = L.accessor<double, 2>();
  size_t p = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) acc[i][j] = packed[p++];
  return L;
}

at::Tensor QuadraticKernel::lower() const { return unpack_lower(packed_, num_groups() + 1); }

at::Tensor QuadraticKernel::matrix() const {
  auto L = lower();
  return at::matmul(L, L.t());
}

KernelCoefficients QuadraticKernel::coefficients() const {
  auto M = matrix();
  auto g = group_of();
  auto idx = at::tensor(g, at::kLong) + 1;  // matrix index of each dimension's group
  KernelCoefficients c;
  c.a = eps_ + M[0][0].item<double>();
  c.b = 2.0 * M[0].index_select(0, idx);
  c.C = M.index_select(0, idx).index_select(1, idx);
  return c;
}

// ---------------------------------------------------------------------------------------

bool LayerKernels::all_global() const {
  return std::all_of(groups.begin(), groups.end(), [](int64_t g) { return g == 1; });
}

LayerKernels LayerKernels::from(const std::vector<QuadraticKernel>& kernels,
                                at::ScalarType dtype) {
  constexpr std::string_view op = "layer_kernels";
  check(!kernels.empty(), op, "expected at least one query head's kernel, got none");
  int64_t d = kernels[0].dim();
  double eps = kernels[0].eps();
  int64_t gmax = 0;
  for (size_t h = 0; h < kernels.size(); ++h) {
    check(kernels[h].dim() == d, op, "head {} has d = {}, head 0 has d = {}", h,
          kernels[h].dim(), d);
    check(kernels[h].eps() == eps, op, "head {} has eps = {}, head 0 has {}; a layer uses one eps",
          h, kernels[h].eps(), eps);
    gmax = std::max(gmax, kernels[h].num_groups());
  }
  int64_t hq = static_cast<int64_t>(kernels.size());
  LayerKernels lk;
  lk.eps = eps;
  lk.group_of = at::empty({hq, d}, at::kLong);
  auto L = at::zeros({hq, gmax + 1, gmax + 1}, at::kDouble);
  for (int64_t h = 0; h < hq; ++h) {
    const auto& k = kernels[h];
    lk.group_of[h].copy_(at::tensor(k.group_of(), at::kLong));
    int64_t n = k.num_groups() + 1;
    L[h].narrow(0, 0, n).narrow(1, 0, n).copy_(k.lower());
    lk.groups.push_back(k.num_groups());
  }
  lk.L = L.to(dtype);
  return lk;
}

std::vector<QuadraticKernel> LayerKernels::to_kernels() const {
  validate("layer_kernels");
  auto gof = group_of.cpu().contiguous();
  auto acc = gof.accessor<int64_t, 2>();
  auto Ld = at::tril(L.detach().to(at::kDouble).cpu());
  std::vector<QuadraticKernel> out;
  for (int64_t h = 0; h < heads(); ++h) {
    std::vector<std::vector<int64_t>> gr(groups[h]);
    for (int64_t r = 0; r < dim(); ++r) gr[acc[h][r]].push_back(r);
    int64_t n = groups[h] + 1;
    out.push_back(QuadraticKernel::from_lower(std::move(gr),
                                              Ld[h].narrow(0, 0, n).narrow(1, 0, n), eps));
  }
  return out;
}

void LayerKernels::validate(std::string_view op, int64_t want_dim) const {
  check_dim(group_of, 2, op, "kernel group_of [Hq, d]");
  check_dim(L, 3, op, "kernel L [Hq, G+1, G+1]");
  check(group_of.scalar_type() == at::kLong, op, "kernel group_of must be int64, got {}",
        c10::toString(group_of.scalar_type()));
  check_floating(L, op, "kernel L");
  int64_t hq = group_of.size(0), d = group_of.size(1);
  check(L.size(0) == hq && L.size(1) == L.size(2) && L.size(1) >= 2, op,
        "kernel L must be [Hq = {}, G+1, G+1] with G >= 1, got {}", hq, shape_str(L));
  check(static_cast<int64_t>(groups.size()) == hq, op,
        "kernel group counts: expected {} (one per head), got {}", hq, groups.size());
  check(want_dim <= 0 || d == want_dim, op, "kernels have d = {}, inputs have D = {}", d,
        want_dim);
  check(std::isfinite(eps) && eps > 0, op, "kernel eps must be finite and > 0, got {}", eps);
  check_finite(L, op, "kernel L");
  auto gof = group_of.cpu().contiguous();
  auto acc = gof.accessor<int64_t, 2>();
  int64_t gmax = L.size(1) - 1;
  for (int64_t h = 0; h < hq; ++h) {
    int64_t G = groups[h];
    check(G >= 1 && G <= gmax, op, "head {} has {} groups; expected 1..{}", h, G, gmax);
    std::vector<int64_t> count(G, 0);
    for (int64_t r = 0; r < d; ++r) {
      int64_t g = acc[h][r];
      check(g >= 0 && g < G, op, "head {} dimension {} in group {}, expected 0..{}", h, r, g,
            G - 1);
      ++count[g];
    }
    for (int64_t g = 0; g < G; ++g)
      check(count[g] > 0, op, "head {} group {} is empty; groups must not be empty", h, g);
  }
}

}  // namespace oal::attn
