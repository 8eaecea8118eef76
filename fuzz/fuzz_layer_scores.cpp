// A layer-scores file (`oal layer-scores --out`, read by `oal convert --layers auto:K`):
// what the reader accepts must rank its layers for every count it allows, and its KV
// heads by retrieval when the file has retrieval masses.
#include "fuzz_input.h"
#include "oal/analysis/layer_scores.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = oal::fuzz::fresh_dir();
  oal::fuzz::write_file(dir, "scores.json", oal::fuzz::as_bytes(data, size));
  oal::fuzz::expect_only_oal_errors([&] {
    const auto s = oal::analysis::read_layer_scores(dir / "scores.json");
    for (int64_t k = 1; k <= int64_t(s.layers.size()); ++k)
      (void)oal::analysis::least_window_mass_layers(s, k);
    // With retrieval masses (`--full-heads auto:M`): every layer, one KV head per query
    // head, every count allowed.
    if (s.layers.empty() || s.layers[0].retrieval.empty()) return;
    std::vector<int64_t> layers;
    for (const auto& l : s.layers) layers.push_back(l.layer);
    const int64_t kv = int64_t(s.layers[0].retrieval.size());
    for (int64_t m = 1; m <= kv * int64_t(layers.size()) && m <= 64; ++m)
      oal::fuzz::expect_only_oal_errors(
          [&] { (void)oal::analysis::most_retrieving_kv_heads(s, m, layers, kv); });
  });
  return 0;
}
