#include "oal/bench/bench_measure.h"

#include <ATen/Parallel.h>
#include <sys/resource.h>

#include <algorithm>
#include <fstream>

#include "oal/core/blas_threads.h"
#include "oal/simd/gemm_choice.h"
#include "oal/simd/gemm_f32.h"
#include "oal/simd/linear_f32.h"

namespace oal::bench {
namespace {

int64_t status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string k = std::string(key) + ":";
  while (std::getline(f, line))
    if (line.rfind(k, 0) == 0) return std::stoll(line.substr(k.size()));
  return -1;
}

// Resets the VmHWM high-water mark to the current RSS; false when the kernel refuses.
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

// Median of 5 timed calls of fn after one warm-up, as GFLOP/s for `flops` per call.
template <typename Fn>
double rate_of(Fn&& fn, double flops) {
  fn();
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = BenchClock::now();
    fn();
    ms.push_back(ms_since(t0));
  }
  return flops / (summarize(ms).median * 1e-3) / 1e9;
}

}  // namespace

double ms_since(BenchClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(BenchClock::now() - t0).count();
}

Timing summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  Timing t;
  const size_t n = ms.size();
  t.samples = static_cast<int>(n);
  if (n == 0) return t;
  t.median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  t.min = ms.front();
  t.max = ms.back();
  return t;
}

int64_t mem_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("MemAvailable:", 0) == 0) return std::stoll(line.substr(13)) * 1024;
  return 0;
}

void MemProbe::start() {
  reset_ok_ = reset_peak_rss();
  before_ = status_kb("VmRSS") * 1024;
}

int64_t MemProbe::peak_bytes() const {
  const int64_t kb = status_kb("VmHWM");
  if (kb >= 0) return kb * 1024;
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

int64_t MemProbe::extra_bytes() const { return std::max<int64_t>(0, peak_bytes() - before_); }

double aten_gemm_rate(at::ScalarType dtype) {
  const int64_t n = 1024;
  const at::Tensor a = at::randn({n, n}).to(dtype), b = at::randn({n, n}).to(dtype);
  return rate_of([&] { at::mm(a, b); }, 2.0 * n * n * n);
}

double simd_gemm_rate() {
  const int64_t n = 1024;
  const at::Tensor a = at::randn({n, n}), b = at::randn({n, n});
  at::Tensor c = at::empty({n, n});
  const simd::GemmPolicy saved = simd::set_gemm_policy(simd::GemmPolicy::own);
  const double rate = rate_of(
      [&] {
        simd::linear_f32(n, n, n, a.data_ptr<float>(), b.data_ptr<float>(), nullptr,
                         c.data_ptr<float>());
      },
      2.0 * n * n * n);
  simd::set_gemm_policy(saved);
  return rate;
}

std::vector<GemmShapeRate> gemm_backend_rates() {
  struct GemmCase {
    const char* name;
    int64_t M, N, K;
    bool trans_a;
  };
  const GemmCase shapes[] = {{"flash tile 64x64x64", 64, 64, 64, false},
                          {"OAL readout 448x64x2145", 448, 64, 2145, false},
                          {"OAL update 2145x64x64 (A transposed)", 2145, 64, 64, true},
                          {"square 1024x1024x1024", 1024, 1024, 1024, false}};
  ScopedSingleThreadBlas one_thread;  // as inside the kernels' work items
  std::vector<GemmShapeRate> out;
  for (const GemmCase& sh : shapes) {
    const at::Tensor a = at::randn({sh.M * sh.K}), b = at::randn({sh.K * sh.N});
    at::Tensor c = at::zeros({sh.M * sh.N});
    const int64_t a_rs = sh.trans_a ? 1 : sh.K, a_cs = sh.trans_a ? sh.M : 1;
    const double flops = 2.0 * sh.M * sh.N * sh.K;
    auto with = [&](auto gemm) {
      return rate_of([&] { gemm(sh.M, sh.N, sh.K, a.data_ptr<float>(), a_rs, a_cs,
                                b.data_ptr<float>(), sh.N, c.data_ptr<float>(), sh.N, false); },
                     flops);
    };
    GemmShapeRate r;
    r.shape = sh.name;
    r.own = with(&simd::gemm_f32_own);
    if (simd::blas_available()) r.blas = with(&simd::gemm_f32_blas);
    r.chosen = simd::gemm_backend_name(simd::gemm_choice(sh.M, sh.N, sh.K, a_rs, a_cs));
    out.push_back(r);
  }
  return out;
}

double parallel_shape_rate(const GemmShape& sh) {
  ScopedSingleThreadBlas one_thread;  // as inside the kernels' work items
  const int64_t workers = at::get_num_threads();
  const double flops = 2.0 * static_cast<double>(sh.m * sh.n * sh.k);
  // About 20 ms of work per worker per timed call at ~50 GFLOP/s, at least 4 products.
  const int64_t reps = std::max<int64_t>(4, static_cast<int64_t>(1e9 / flops));
  std::vector<at::Tensor> a, b, c;
  for (int64_t w = 0; w < workers; ++w) {
    a.push_back(at::randn({sh.m * sh.k}));
    b.push_back(at::randn({sh.k * sh.n}));
    c.push_back(at::zeros({sh.m * sh.n}));
  }
  const int64_t a_rs = sh.trans_a ? 1 : sh.k, a_cs = sh.trans_a ? sh.m : 1;
  return rate_of(
      [&] {
        at::parallel_for(0, workers, 1, [&](int64_t begin, int64_t end) {  // one per thread
          for (int64_t w = begin; w < end; ++w)
            for (int64_t r = 0; r < reps; ++r)
              simd::gemm_f32(sh.m, sh.n, sh.k, a[w].data_ptr<float>(), a_rs, a_cs,
                             b[w].data_ptr<float>(), sh.n, c[w].data_ptr<float>(), sh.n, r > 0);
        });
      },
      flops * static_cast<double>(workers * reps));
}

std::string dtype_name(at::ScalarType t) {
  return t == at::kBFloat16 ? "bf16" : t == at::kFloat ? "fp32" : c10::toString(t);
}

}  // namespace oal::bench
