// A .gguf file, read as `oal info` (header, metadata listing, every tensor dequantized),
// the tokenizer loader (tokenizer.ggml.* metadata) and the model loader (one forward)
// read it.
#include <vector>

#include "fuzz_input.h"
#include "model_probe.h"
#include "oal/io/gguf.h"
#include "oal/io/gguf_quants.h"
#include "oal/io/gguf_summary.h"
#include "tokenizer_probe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = oal::fuzz::fresh_dir();
  oal::fuzz::write_file(dir, "model.gguf", oal::fuzz::as_bytes(data, size));
  const auto path = dir / "model.gguf";
  oal::fuzz::expect_only_oal_errors([&] {
    const auto g = oal::io::read_gguf(path);
    (void)oal::io::describe_gguf(g.header, true);
    (void)oal::io::gguf_summary_json(g.header, true).dump();
    for (const auto& t : g.header.tensors) {
      const auto info = oal::io::ggml_type_info(t.type);
      if (info && info->dequantizable && t.numel() <= (1 << 22)) (void)oal::io::gguf_tensor_f32(g, t);
    }
  });
  oal::fuzz::expect_only_oal_errors([&] { oal::fuzz::load_and_use_tokenizer(path); });
  oal::fuzz::expect_only_oal_errors([&] { oal::fuzz::load_and_run_model(path.string()); });
  return 0;
}
