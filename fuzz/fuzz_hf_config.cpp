// An HF config.json, read and validated as every HF model load does, and the planted
// dimensions a synthetic model's config records (`oal analyze` compares against them).
#include "fuzz_input.h"
#include "oal/fixtures/synthetic.h"
#include "oal/formats/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = oal::fuzz::fresh_dir();
  oal::fuzz::write_file(dir, "config.json", oal::fuzz::as_bytes(data, size));
  oal::fuzz::expect_only_oal_errors([&] {
    const auto config = oal::formats::read_hf_config(dir / "config.json");
    oal::formats::validate_config(config, "fuzz", "config.json");
  });
  oal::fuzz::expect_only_oal_errors([&] { (void)oal::fixtures::read_planted_dims(dir); });
  return 0;
}
