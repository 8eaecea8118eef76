// An HF tokenizer.json (byte-level BPE) alone in a directory, loaded and used.
#include "fuzz_input.h"
#include "tokenizer_probe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = oal::fuzz::fresh_dir();
  oal::fuzz::write_file(dir, "tokenizer.json", oal::fuzz::as_bytes(data, size));
  oal::fuzz::expect_only_oal_errors([&] { oal::fuzz::load_and_use_tokenizer(dir / "tokenizer.json"); });
  return 0;
}
