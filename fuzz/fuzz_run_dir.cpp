// A calibration run directory (`oal fidelity`, `oal convert`); input parts:
// calibration.json, kernels-oal.json, kernels-global.json, baselines.safetensors.
#include "fuzz_input.h"
#include "oal/calib/run_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = oal::fuzz::fresh_dir();
  oal::fuzz::write_parts(dir, data, size,
                         {"calibration.json", "kernels-oal.json", "kernels-global.json",
                          "baselines.safetensors"});
  oal::fuzz::expect_only_oal_errors([&] { (void)oal::calib::read_run(dir); });
  return 0;
}
