// A layer-scores file (`oal layer-scores --out`, read by `oal convert --layers auto:K`):
// what the reader accepts must rank its layers for every count it allows.
#include "fuzz_input.h"
#include "oal/analysis/layer_scores.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = oal::fuzz::fresh_dir();
  oal::fuzz::write_file(dir, "scores.json", oal::fuzz::as_bytes(data, size));
  oal::fuzz::expect_only_oal_errors([&] {
    const auto s = oal::analysis::read_layer_scores(dir / "scores.json");
    for (int64_t k = 1; k <= int64_t(s.layers.size()); ++k)
      (void)oal::analysis::least_window_mass_layers(s, k);
  });
  return 0;
}
