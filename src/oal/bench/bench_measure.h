#pragma once
// What every benchmark in eval/ measures with: wall time, medians, the process's peak
// memory (/proc), and the machine's GEMM rate for %GEMM columns.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace oal::bench {

using BenchClock = std::chrono::steady_clock;

// Milliseconds since t0.
double ms_since(BenchClock::time_point t0);

// Median, min and max of ms (non-empty).
struct Timing {
  int samples = 0;
  double median = 0, min = 0, max = 0;
};
Timing summarize(std::vector<double> ms);

// Bytes the kernel reports as available for new allocations (MemAvailable), 0 if unknown.
int64_t mem_available_bytes();

// Peak resident memory of the process between start() and peak(): VmHWM after resetting
// it through /proc/self/clear_refs (reset_ok false when the kernel refuses; the peak is
// then the process lifetime maximum). extra = peak - resident size at start().
class MemProbe {
 public:
  void start();
  int64_t peak_bytes() const;
  int64_t extra_bytes() const;
  bool reset_ok() const { return reset_ok_; }

 private:
  bool reset_ok_ = false;
  int64_t before_ = 0;
};

// fp32 / bf16 1024³ at::mm rate on the current threads, GFLOP/s (median of 5).
double aten_gemm_rate(at::ScalarType dtype);
// The same fp32 product through the kernels' own micro-kernel on packed panels over the
// threads (linear_f32 with the own backend): where OpenBLAS picks narrower kernels than
// the CPU has, this is the higher rate.
double simd_gemm_rate();

// One GEMM shape the attention kernels issue, timed single-threaded with the kernels' own
// micro-kernel and with BLAS (GFLOP/s; blas 0 when BLAS is not loaded): the evidence
// behind gemm_choice()'s rule, measured on the machine at hand.
struct GemmShapeRate {
  std::string shape;
  double own = 0, blas = 0;
  std::string chosen;  // what gemm_choice() picks for it now
};
// Flash tile 64x64x64, OAL readout 448x64x2145, OAL update 2145x64x64 (Aᵀ) and 1024³.
std::vector<GemmShapeRate> gemm_backend_rates();

// A GEMM shape the attention kernels issue inside their work items: C [m, n] (+)=
// A [m, k] B [k, n], A read transposed when trans_a.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false;
  bool operator<(const GemmShape& o) const {
    return std::tie(m, n, k, trans_a) < std::tie(o.m, o.n, o.k, o.trans_a);
  }
};
// The FLOPs a prefill spends in GEMMs of one shape (its FLOP model, split by shape).
struct GemmWork {
  GemmShape shape;
  double flops = 0;
};
// The fp32 rate of one shape as the attention kernels run it, GFLOP/s: each of ATen's
// threads repeats the product through gemm_f32 (the backend gemm_choice picks, one BLAS
// thread each) on its own operands, as the kernels' work items do; the rate is the sum
// over threads. This is the ceiling a kernel made of these GEMMs could reach.
double parallel_shape_rate(const GemmShape& shape);

// "bf16", "fp32", else ATen's name.
std::string dtype_name(at::ScalarType t);

}  // namespace oal::bench
