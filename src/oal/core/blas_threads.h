#pragma once
// OpenBLAS keeps a thread pool of its own besides ATen's. Work that is already spread
// over ATen's threads (independent fits, diagnostic controls) must keep each BLAS call
// single-threaded, or the two pools fight for the cores: on this project's 2-core
// machine `oal diagnose --methods performer --controls 4` took 85 s with both pools
// and 53 s with OpenBLAS at one thread.
namespace oal {

// Sets OpenBLAS to one thread for the guard's lifetime and restores the previous count
// afterwards. A no-op when the process has not loaded OpenBLAS (symbols looked up at
// run time, so no link dependency). Not for concurrent use from several threads: create
// it on the thread that starts the parallel work.
class ScopedSingleThreadBlas {
 public:
  ScopedSingleThreadBlas();
  ~ScopedSingleThreadBlas();
  ScopedSingleThreadBlas(const ScopedSingleThreadBlas&) = delete;
  ScopedSingleThreadBlas& operator=(const ScopedSingleThreadBlas&) = delete;

 private:
  int previous_ = 0;  // 0: nothing to restore
};

}  // namespace oal
