// A model directory: a plain HF one (config.json + model.safetensors) or a converted
// one (config.json's "oal_conversion" + oal_attention/, a calibration run directory).
// A seventh part is a sharded model's model.safetensors.index.json (its weight_map can
// name model.safetensors, the second part).
#include "fuzz_input.h"
#include "model_probe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = oal::fuzz::fresh_dir();
  oal::fuzz::write_parts(dir, data, size,
                         {"config.json", "model.safetensors", "oal_attention/calibration.json",
                          "oal_attention/kernels-oal.json", "oal_attention/kernels-global.json",
                          "oal_attention/baselines.safetensors", "model.safetensors.index.json"});
  oal::fuzz::expect_only_oal_errors([&] { oal::fuzz::load_and_run_model(dir.string()); });
  return 0;
}
