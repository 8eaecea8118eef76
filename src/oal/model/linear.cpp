#include "oal/model/linear.h"

namespace oal::model {

at::Tensor Linear::forward(const at::Tensor& x) const {
  const at::Tensor w = weight.scalar_type() == x.scalar_type() ? weight : weight.to(x.scalar_type());
  at::Tensor y = bias.defined() ? at::linear(x, w, bias) : at::linear(x, w);
  if (delta) y = y + delta->apply(x);
  return y;
}

}  // namespace oal::model
