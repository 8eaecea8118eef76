// A llama2.c tokenizer .bin, loaded (the loader picks the format from the file) and used.
#include "fuzz_input.h"
#include "tokenizer_probe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = oal::fuzz::fresh_dir();
  oal::fuzz::write_file(dir, "tok.bin", oal::fuzz::as_bytes(data, size));
  oal::fuzz::expect_only_oal_errors([&] { oal::fuzz::load_and_use_tokenizer(dir / "tok.bin"); });
  return 0;
}
