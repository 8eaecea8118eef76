// A llama2.c legacy checkpoint (.bin): 7 x int32 header, then fp32 weights.
#include "fuzz_input.h"
#include "model_probe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = oal::fuzz::fresh_dir();
  oal::fuzz::write_file(dir, "model.bin", oal::fuzz::as_bytes(data, size));
  oal::fuzz::expect_only_oal_errors([&] { oal::fuzz::load_and_run_model((dir / "model.bin").string()); });
  return 0;
}
