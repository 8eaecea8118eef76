#include "oal/serve/openai_response.h"

namespace oal::serve {

using nlohmann::json;

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

json ResponseShape::usage(const StreamEvent& done) const {
  return {{"prompt_tokens", done.prompt_tokens},
          {"completion_tokens", done.completion_tokens},
          {"total_tokens", done.prompt_tokens + done.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", done.cached_tokens}}}};
}

json ResponseShape::head(const char* object) const {
  return {{"id", id}, {"object", object}, {"created", created}, {"model", model}};
}

json ResponseShape::response(const std::string& text, const StreamEvent& done) const {
  json j = head(chat ? "chat.completion" : "text_completion");
  json choice = {{"index", 0}, {"finish_reason", done.finish_reason}};
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  j["choices"] = json::array({choice});
  j["usage"] = usage(done);
  j["conversation_id"] = done.conversation_id;
  return j;
}

json ResponseShape::chunk(const std::string& text, const std::string& finish, bool first) const {
  json j = head(chat ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", 0}, {"finish_reason", finish.empty() ? json() : json(finish)}};
  if (chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  j["choices"] = json::array({choice});
  return j;
}

json ResponseShape::last_chunk(const StreamEvent& done) const {
  json last = chunk("", done.finish_reason, false);
  last["usage"] = usage(done);
  last["conversation_id"] = done.conversation_id;
  return last;
}

}  // namespace oal::serve
