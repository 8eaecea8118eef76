// A .safetensors file: the header (length, JSON, tensor table) and the tensors it
// describes, read as `oal info` (header only) and the model loader (mapped tensors) do.
#include "fuzz_input.h"
#include "oal/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = oal::fuzz::fresh_dir();
  oal::fuzz::write_file(dir, "model.safetensors", oal::fuzz::as_bytes(data, size));
  oal::fuzz::expect_only_oal_errors([&] { oal::io::read_safetensors_header(dir / "model.safetensors"); });
  oal::fuzz::expect_only_oal_errors([&] {
    const auto file = oal::io::read_safetensors(dir / "model.safetensors");
    for (const auto& [name, t] : file.tensors) (void)t.sum();  // touch every mapped byte
  });
  return 0;
}
