#include "oal/core/machine.h"

#include <ATen/Parallel.h>
#include <malloc.h>
#include <torch/version.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <thread>

namespace oal {
namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(pos + 2);
    }
  }
  return "unknown";
}

// The BLAS actually mapped into this process (the Debian alternative decides which).
std::string loaded_blas() {
  std::ifstream f("/proc/self/maps");
  std::string line;
  while (std::getline(f, line)) {
    auto pos = line.find('/');
    if (pos == std::string::npos) continue;
    std::string path = line.substr(pos);
    if (path.find("blas") != std::string::npos) {
      std::string file = path.substr(path.rfind('/') + 1);
      // Resolve the alternatives link to name the real implementation.
      std::string dir = path.substr(0, path.rfind('/'));
      if (dir.find("openblas") != std::string::npos) return "openblas (" + path + ")";
      if (dir.find("blas") != std::string::npos) return "reference blas (" + path + ")";
      return path;
    }
  }
  return "none loaded";
}

}  // namespace

MachineInfo machine_info() {
  MachineInfo m;
  m.cpu = cpu_model();
  m.logical_cores = static_cast<int>(std::thread::hardware_concurrency());
  m.threads = at::get_num_threads();
  m.blas = loaded_blas();
  m.libtorch = TORCH_VERSION;
  m.commit = OAL_GIT_COMMIT;
  return m;
}

int configure_threads(int n) {
  if (n <= 0) {
    if (const char* env = std::getenv("OAL_THREADS")) n = std::atoi(env);
  }
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  if (n <= 0) n = 1;
  at::set_num_threads(n);
  return at::get_num_threads();
}

void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  mallopt(M_TOP_PAD, 64 << 20);
}

void release_freed_memory() { malloc_trim(0); }

}  // namespace oal
