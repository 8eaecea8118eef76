// analysis.json (what `oal analyze` writes and `oal group` reads).
#include "fuzz_input.h"
#include "oal/analysis/analysis_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = oal::fuzz::fresh_dir();
  oal::fuzz::write_file(dir, "analysis.json", oal::fuzz::as_bytes(data, size));
  oal::fuzz::expect_only_oal_errors([&] { (void)oal::analysis::read_analysis(dir / "analysis.json"); });
  return 0;
}
