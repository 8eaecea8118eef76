#pragma once
// The request bodies of /v1/completions, /v1/chat/completions, /tokenize and /detokenize,
// parsed and validated into typed structs. Every wrong type or value is an ApiError 400 naming the field;
// unknown fields are ignored (clients send extras), fields that would change the answer
// but are not supported (n > 1, logprobs, echo, tools) are refused rather than ignored.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace oal::serve {

// Limits the server applies while parsing (from `oal serve` options).
struct RequestLimits {
  int64_t max_tokens = 4096;       // largest max_tokens accepted
  int64_t default_max_tokens = 256;  // when the request gives none (OpenAI: 16 for completions)
  size_t max_stop = 4;             // OpenAI allows up to 4 stop strings
};

struct GenerationParams {
  int64_t max_tokens = 0;
  double temperature = 1.0;  // [0, 2]; 0 = greedy
  double top_p = 1.0;        // (0, 1]
  int64_t top_k = 0;         // >= 0; 0 = no limit (an extension, as llama-server's)
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;  // non-empty strings
  bool stream = false;
  bool ignore_eos = false;  // an extension (as llama-server's): end-of-text tokens do not stop
  // An extension: the saved conversation to continue and to save this one under ("" =
  // the longest saved prefix of the prompt, saved under a new id).
  std::string conversation_id;
};

struct CompletionRequest {
  std::string model;                   // "" when not given
  std::optional<std::string> prompt;   // text, or
  std::vector<int32_t> prompt_tokens;  // token ids (when the prompt is an array of ints)
  GenerationParams params;
};

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

struct ChatRequest {
  std::string model;
  std::vector<ChatMessage> messages;  // non-empty
  GenerationParams params;
};

// POST /tokenize (llama-server's route): {"content": text, "add_special": false,
// "with_pieces": false}. add_special: prepend BOS as completions do.
struct TokenizeRequest {
  std::string content;  // may be empty (no tokens)
  bool add_special = false;
  bool with_pieces = false;  // answer [{"id", "piece"}] instead of ids
};

// POST /detokenize: {"tokens": [id, ...]}, every id within the vocabulary.
struct DetokenizeRequest {
  std::vector<int32_t> tokens;
};

// Parse the raw body (JSON text). Throw ApiError 400 naming the field.
CompletionRequest parse_completion_request(const std::string& body, const RequestLimits& limits);
ChatRequest parse_chat_request(const std::string& body, const RequestLimits& limits);
TokenizeRequest parse_tokenize_request(const std::string& body);
DetokenizeRequest parse_detokenize_request(const std::string& body, int32_t vocab_size);

}  // namespace oal::serve
