// tokenizer_config.json (BOS/EOS names) beside a tokenizer.json; input parts:
// tokenizer_config.json, tokenizer.json.
#include "fuzz_input.h"
#include "tokenizer_probe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = oal::fuzz::fresh_dir();
  oal::fuzz::write_parts(dir, data, size, {"tokenizer_config.json", "tokenizer.json"});
  oal::fuzz::expect_only_oal_errors([&] { oal::fuzz::load_and_use_tokenizer(dir); });
  return 0;
}
