#pragma once
// What the program runs on, for `oal version` and benchmark records.
#include <string>

namespace oal {

struct MachineInfo {
  std::string cpu;      // /proc/cpuinfo "model name"
  int logical_cores = 0;
  int threads = 0;      // ATen intra-op threads in use
  std::string blas;     // shared library that provides BLAS, e.g. libopenblasp-r0.3.21.so
  std::string libtorch; // LibTorch version
  std::string commit;   // oal git commit at build time
};

MachineInfo machine_info();

// Sets ATen's intra-op threads: `n` if > 0, else $OAL_THREADS, else all logical cores.
// (LibTorch's own default was 1 on Debian's build.) Returns the count in effect.
int configure_threads(int n = 0);

// glibc returns each large block (above its mmap threshold) to the kernel on free and
// page-faults it back on the next allocation, so ATen's many short-lived 1–100 MB tensors
// spend much of their time in the kernel (measured: `oal diagnose --methods performer
// --controls 12` 75 s with 33 s of system time, 35 s with this; an OAL prefill of 32K
// tokens 1.88 s → 1.16 s). Keeps freed memory in the heap for reuse (mmap threshold
// 1 GiB, no automatic trimming); the process's RSS then stays near its peak. The CLI
// calls it for every command.
void keep_freed_memory();
// Gives the heap's free memory back to the kernel now (malloc_trim): `oal bench` calls
// it before each cell so that the cell's first call allocates afresh and its peak
// memory is its own.
void release_freed_memory();

}  // namespace oal
