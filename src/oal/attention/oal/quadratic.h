#pragma once
// The OAL quadratic kernel of one (layer, query head), and its batched per-layer form.
//
// Per head: a partition of the d query-key dimensions into G groups (group g holds the
// dimension indices groups[g]; g(r) is the group of dimension r), a lower-triangular
// L of size (G+1) x (G+1) and eps > 0. With x_r = q_r k_r / sqrt(d),
// s_g = sum_{r in group g} x_r and s̄ = [1, s_1, ..., s_G]:
//
//   kappa(q, k) = eps + s̄ᵀ L Lᵀ s̄ = eps + ||Lᵀ s̄||²  >= eps > 0          (paper Eq. 7)
//
// Expanded with M = L Lᵀ (paper Eq. 3/24):
//   kappa = a + sum_r b_r x_r + sum_{r,t} C_rt x_r x_t,
//   a = eps + M00,  b_r = 2 M_{0,g(r)+1},  C_rt = M_{g(r)+1, g(t)+1}
// (matrix index 0 is the constant, index g+1 is group g). G = 1 is the learned global
// quadratic a + b s + c s².
//
// L is stored packed: the row-major lower triangle (L00, L10, L11, L20, L21, L22, ...),
// (G+1)(G+2)/2 numbers. Dimensions are numbered 0..d-1, groups 0..G-1; the group order
// is the caller's (the official release puts the bulk first).
#include <ATen/ATen.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace oal::attn {

inline constexpr double k_default_eps = 1e-6;

// Expanded coefficients of one head (fp64): a, b [d], C [d, d] (symmetric).
struct KernelCoefficients {
  double a = 0;
  at::Tensor b;
  at::Tensor C;
};

class QuadraticKernel {
 public:
  // Validates: groups a partition of 0..d-1 (d = total number of indices; every index
  // exactly once, no empty group), packed_lower.size() == (G+1)(G+2)/2, all finite,
  // eps finite and > 0. Throws oal::Error("quadratic_kernel", ...).
  QuadraticKernel(std::vector<std::vector<int64_t>> groups, std::vector<double> packed_lower,
                  double eps = k_default_eps);
  // From a dense lower-triangular L [G+1, G+1] (entries above the diagonal must be 0).
  static QuadraticKernel from_lower(std::vector<std::vector<int64_t>> groups,
                                    const at::Tensor& L, double eps = k_default_eps);

  // --- Initialisations -------------------------------------------------------------
  // The global quadratic a + b s + c s² (a > eps, c > 0, b² < 4 (a - eps) c, i.e. M ≻ 0),
  // embedded into `groups`: M00 = a - eps, M0g = b / 2, Mgh = c for all groups g, h, which
  // gives the same kernel for any partition (s = sum_g s_g; paper App. D).
  static QuadraticKernel global(std::vector<std::vector<int64_t>> groups, double a, double b,
                                double c, double eps = k_default_eps);
  // Taylor 1 + s + s²/2 in `groups`: global(groups, 1, 1, 1/2). eps is absorbed so that
  // a = eps + M00 = 1 exactly (M00 = 1 - eps; needs eps < 1/2 for M ≻ 0 at G = 1).
  static QuadraticKernel taylor(std::vector<std::vector<int64_t>> groups,
                                double eps = k_default_eps);
  // One group holding all d dimensions (the learned-global / TaylorShift-shaped case).
  static std::vector<std::vector<int64_t>> single_group(int64_t d);
  // A G = 1 kernel's L embedded into `groups` (same kernel value for every q, k):
  // L'00 = L00, L'g0 = L10, L'g1 = L11 for every group g >= 1, all else 0. `global_kernel`
  // must have one group covering the same d.
  static QuadraticKernel embed_global(const QuadraticKernel& global_kernel,
                                      std::vector<std::vector<int64_t>> groups);
  // This kernel with N(0, sigma²) noise added to every packed L entry (seeded,
  // deterministic for a seed on one standard library).
  QuadraticKernel perturbed(double sigma, uint64_t seed) const;

  // --- Accessors ---------------------------------------------------------------------
  int64_t dim() const { return dim_; }
  int64_t num_groups() const { return static_cast<int64_t>(groups_.size()); }
  double eps() const { return eps_; }
  const std::vector<std::vector<int64_t>>& groups() const { return groups_; }
  const std::vector<double>& packed_lower() const { return packed_; }
  // Group index (0..G-1) of every dimension, size d.
  std::vector<int64_t> group_of() const;
  // Dense lower-triangular L [G+1, G+1], fp64.
  at::Tensor lower() const;
  // M = L Lᵀ [G+1, G+1], fp64.
  at::Tensor matrix() const;
  // a, b_r, C_rt (fp64) as documented above.
  KernelCoefficients coefficients() const;

  // Packed length for G groups: (G+1)(G+2)/2.
  static int64_t packed_size(int64_t groups) { return (groups + 1) * (groups + 2) / 2; }
  // Row-major lower triangle of a square [n, n] tensor -> n(n+1)/2 doubles, and back.
  static std::vector<double> pack_lower(const at::Tensor& L);
  static at::Tensor unpack_lower(const std::vector<double>& packed, int64_t n);

 private:
  std::vector<std::vector<int64_t>> groups_;
  std::vector<double> packed_;
  double eps_;
  int64_t dim_;
};

// All query heads of one layer, batched for evaluation. Heads with fewer groups than
// max_groups are padded with empty groups (zero rows/columns of L): an empty group has
// s_g = 0, so the padding changes no kernel value and receives zero gradient.
//   group_of [Hq, d] int64, values in 0..Gmax-1 (group of each dimension, per head)
//   L        [Hq, Gmax+1, Gmax+1] lower-triangular (fp64 by default; evaluation uses
//            tril(L) cast to the compute dtype, so it may be fp32 and may require grad)
//   groups   [Hq] int64-like vector: G of each head (<= Gmax)
//   eps      one eps for the layer
struct LayerKernels {
  at::Tensor group_of;
  at::Tensor L;
  std::vector<int64_t> groups;
  double eps = k_default_eps;

  int64_t heads() const { return group_of.size(0); }
  int64_t dim() const { return group_of.size(1); }
  int64_t max_groups() const { return L.size(1) - 1; }
  // True when every head has G = 1 (the learned global quadratic).
  bool all_global() const;

  // Packs kernels (one per query head, same d and eps) into the batched form; L in
  // `dtype`, a fresh leaf tensor (requires_grad false; set it to train).
  static LayerKernels from(const std::vector<QuadraticKernel>& kernels,
                           at::ScalarType dtype = at::kDouble);
  // Back to one QuadraticKernel per head (leading (G+1) x (G+1) block of L, detached).
  std::vector<QuadraticKernel> to_kernels() const;
  // Throws oal::Error naming `op` unless the fields are consistent (shapes, ranges,
  // non-empty groups 0..G-1 per head, finite L, eps > 0) and d == `dim` when dim > 0.
  void validate(std::string_view op, int64_t dim = 0) const;
};

}  // namespace oal::attn
