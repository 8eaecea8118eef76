// A kernel JSON file, ours or the official release layout. What loads must also write
// back and load again (ours), so nothing accepted is unrepresentable.
#include <cstdlib>

#include "fuzz_input.h"
#include "oal/attention/oal/kernel_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = oal::fuzz::fresh_dir();
  oal::fuzz::write_file(dir, "kernels.json", oal::fuzz::as_bytes(data, size));
  oal::fuzz::expect_only_oal_errors([&] {
    const auto kernels = oal::attn::read_kernels(dir / "kernels.json");
    oal::attn::write_kernels(dir / "again.json", kernels);
    try {
      (void)oal::attn::read_kernels(dir / "again.json");
    } catch (const oal::Error&) {
      std::abort();  // accepted once, rejected after its own round trip
    }
  });
  return 0;
}
