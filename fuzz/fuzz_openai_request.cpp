// Request bodies of `oal serve`: the first byte picks the parser (completions, chat
// completions, /tokenize, /detokenize), the rest is the body. Every bad body must be an
// ApiError (answered as a 4xx), never a crash or another exception.
#include "fuzz_input.h"
#include "oal/serve/api_error.h"
#include "oal/serve/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  const oal::serve::RequestLimits limits;
  oal::fuzz::expect_only_oal_errors([&] {
    try {
      switch (data[0] % 4) {
        case 0: (void)oal::serve::parse_completion_request(body, limits); break;
        case 1: (void)oal::serve::parse_chat_request(body, limits); break;
        case 2: (void)oal::serve::parse_tokenize_request(body); break;
        default: (void)oal::serve::parse_detokenize_request(body, 49152); break;
      }
    } catch (const oal::serve::ApiError&) {
      // The answer a client gets for a bad request.
    }
  });
  return 0;
}
