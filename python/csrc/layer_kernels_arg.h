#pragma once
// The per-layer OAL kernels as the Python ops pass them: two tensors and eps instead of
// attn::LayerKernels (a dispatcher schema holds tensors and scalars only).
//   group_of [Hq, d] int64   group (0..G_h-1) of every dimension of every query head
//   L        [Hq, n, n]      lower-triangular factors, n = Gmax + 1 (tril(L) is used)
//   eps      > 0
// G_h (the head's group count) is max(group_of[h]) + 1; LayerKernels::validate checks
// the rest (no empty group, finite L, eps > 0) and names `op` in its errors.
#include <ATen/ATen.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "oal/attention/oal/quadratic.h"

namespace oal::python {

inline attn::LayerKernels layer_kernels(std::string_view op, const at::Tensor& group_of,
                                        const at::Tensor& L, double eps, int64_t dim) {
  attn::LayerKernels lk;
  lk.group_of = group_of;
  lk.L = L;
  lk.eps = eps;
  // Group counts only from a well-formed group_of; otherwise validate() reports it.
  if (group_of.defined() && group_of.dim() == 2 && group_of.scalar_type() == at::kLong &&
      group_of.size(0) > 0 && group_of.size(1) > 0) {
    const at::Tensor top = std::get<0>(group_of.detach().cpu().max(1)).contiguous();
    const int64_t* g = top.data_ptr<int64_t>();
    for (int64_t h = 0; h < top.size(0); ++h) lk.groups.push_back(g[h] + 1);
  }
  lk.validate(op, dim);
  return lk;
}

}  // namespace oal::python
