// An oal serve state file (a saved conversation). The whole-file reader (checksum,
// identity, every size and offset) and the header reader used to index a state
// directory; what the whole-file reader accepts must encode and decode again unchanged.
#include <cstdlib>

#include "fuzz_input.h"
#include "oal/serve/state_file.h"

namespace {
// The identity the seeds are written under (scripts/fuzz_seeds.py).
const std::string k_identity = "fuzz-identity";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes = oal::fuzz::as_bytes(data, size);
  oal::fuzz::expect_only_oal_errors([&] { (void)oal::serve::decode_state_header(bytes); });
  oal::fuzz::expect_only_oal_errors([&] {
    const auto c = oal::serve::decode_state_file(bytes, k_identity);
    const std::string again = oal::serve::encode_state_file(c, k_identity);
    try {
      const auto d = oal::serve::decode_state_file(again, k_identity);
      if (d.id != c.id || d.tokens != c.tokens || d.layers.size() != c.layers.size()) std::abort();
    } catch (const oal::Error&) {
      std::abort();  // accepted once, rejected after its own round trip
    }
  });
  return 0;
}
