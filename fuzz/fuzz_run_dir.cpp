// A calibration run directory (`oal fidelity`, `oal convert`), also merged as the only
// partial run (`oal merge-calibration`, which reads the "shard" block); input parts:
// calibration.json, kernels-oal.json, kernels-global.json, baselines.safetensors,
// window.safetensors (a windowed run's c_h).
#include "fuzz_input.h"
#include "oal/attention/method_store.h"
#include "oal/calib/run_dir.h"
#include "oal/calib/run_merge.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = oal::fuzz::fresh_dir();
  oal::fuzz::write_parts(dir, data, size,
                         {"calibration.json", "kernels-oal.json", "kernels-global.json",
                          "baselines.safetensors", "window.safetensors"});
  oal::fuzz::expect_only_oal_errors([&] { (void)oal::attn::read_method_store(dir); });
  oal::fuzz::expect_only_oal_errors([&] { oal::calib::merge_runs({dir}, dir / "merged"); });
  return 0;
}
