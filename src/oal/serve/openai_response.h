#pragma once
// OpenAI's response shapes for one request (completions and chat completions, whole or
// as server-sent events): what the HTTP handlers send, kept apart from the routing.
//   whole:  {"id", "object": "text_completion" | "chat.completion", "created", "model",
//            "choices": [{"index": 0, "text" | "message", "finish_reason"}], "usage",
//            "conversation_id" (oal's extension: continue the conversation by it)}
//   stream: "data: {chunk}\n\n" per piece ("text" | "delta"), a last chunk with
//           finish_reason, usage and conversation_id, then "data: [DONE]\n\n".
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "oal/serve/engine.h"

namespace oal::serve {

// JSON text that never throws on bytes that are not UTF-8 (they become U+FFFD).
std::string dump_json(const nlohmann::json& j);

// One server-sent event carrying `j`.
std::string sse_event(const nlohmann::json& j);

// The end of an SSE answer.
inline constexpr const char* k_sse_done = "data: [DONE]\n\n";

// The pieces of a request the OpenAI shapes differ in.
struct ResponseShape {
  bool chat = false;
  std::string id, model;
  int64_t created = 0;

  // {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details"}.
  nlohmann::json usage(const StreamEvent& done) const;
  // The whole answer (stream: false).
  nlohmann::json response(const std::string& text, const StreamEvent& done) const;
  // One SSE chunk: a piece of text, or (finish non-empty) the last chunk. The first chunk
  // of a chat answer carries the assistant role.
  nlohmann::json chunk(const std::string& text, const std::string& finish, bool first) const;
  // The last chunk: finish_reason, usage and conversation_id.
  nlohmann::json last_chunk(const StreamEvent& done) const;

 private:
  nlohmann::json head(const char* object) const;
};

}  // namespace oal::serve
