#include "oal/core/blas_threads.h"

#include <dlfcn.h>

namespace oal {
namespace {

using SetFn = void (*)(int);
using GetFn = int (*)();

SetFn set_fn() {
  static const auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  return fn;
}
GetFn get_fn() {
  static const auto fn = reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return fn;
}

}  // namespace

ScopedSingleThreadBlas::ScopedSingleThreadBlas() {
  if (set_fn() == nullptr || get_fn() == nullptr) return;
  previous_ = get_fn()();
  if (previous_ > 1) set_fn()(1);
  else previous_ = 0;
}

ScopedSingleThreadBlas::~ScopedSingleThreadBlas() {
  if (previous_ > 0) set_fn()(previous_);
}

}  // namespace oal
