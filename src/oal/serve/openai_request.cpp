#include "oal/serve/openai_request.h"

#include <cmath>
#include <limits>

#include "oal/serve/api_error.h"
#include "oal/serve/state_file.h"

namespace oal::serve {
namespace {

using nlohmann::json;

json parse_object(const std::string& body) {
  if (body.empty()) throw bad_request("", "empty request body; expected a JSON object");
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw bad_request("", "the request body is not valid JSON");
  if (!j.is_object()) throw bad_request("", "expected a JSON object, got {}", j.type_name());
  return j;
}

// The field when present and not null.
const json* field(const json& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

double number_in(const json& j, const char* name, double lo, double hi, double fallback) {
  const json* f = field(j, name);
  if (!f) return fallback;
  if (!f->is_number())
    throw bad_request(name, "'{}' must be a number, got {}", name, f->type_name());
  const double x = f->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw bad_request(name, "'{}' must lie in [{}, {}], got {}", name, lo, hi, x);
  return x;
}

int64_t integer_in(const json& j, const char* name, int64_t lo, int64_t hi, int64_t fallback) {
  const json* f = field(j, name);
  if (!f) return fallback;
  if (!f->is_number_integer())
    throw bad_request(name, "'{}' must be an integer, got {}", name, f->dump());
  if (f->is_number_unsigned() && f->get<uint64_t>() > static_cast<uint64_t>(hi))
    throw bad_request(name, "'{}' must lie in [{}, {}], got {}", name, lo, hi, f->dump());
  const int64_t x = f->get<int64_t>();
  if (x < lo || x > hi)
    throw bad_request(name, "'{}' must lie in [{}, {}], got {}", name, lo, hi, x);
  return x;
}

bool flag(const json& j, const char* name) {
  const json* f = field(j, name);
  if (!f) return false;
  if (!f->is_boolean())
    throw bad_request(name, "'{}' must be true or false, got {}", name, f->dump());
  return f->get<bool>();
}

std::string model_name(const json& j) {
  const json* f = field(j, "model");
  if (!f) return {};
  if (!f->is_string())
    throw bad_request("model", "'model' must be a string, got {}", f->type_name());
  return f->get<std::string>();
}

std::vector<std::string> stop_strings(const json& j, size_t max_stop) {
  const json* f = field(j, "stop");
  if (!f) return {};
  std::vector<std::string> out;
  if (f->is_string()) {
    out.push_back(f->get<std::string>());
  } else if (f->is_array()) {
    for (const json& s : *f) {
      if (!s.is_string())
        throw bad_request("stop", "'stop' must hold strings, got {}", s.type_name());
      out.push_back(s.get<std::string>());
    }
  } else {
    throw bad_request("stop", "'stop' must be a string or an array of strings, got {}",
                      f->type_name());
  }
  if (out.size() > max_stop)
    throw bad_request("stop", "'stop' holds {} strings; at most {} are allowed", out.size(),
                      max_stop);
  for (const auto& s : out)
    if (s.empty()) throw bad_request("stop", "'stop' strings must not be empty");
  return out;
}

// Fields that would change the answer and are not implemented: refused, not ignored.
void refuse_unsupported(const json& j) {
  if (integer_in(j, "n", 1, 1 << 20, 1) != 1)
    throw bad_request("n", "only n = 1 is supported (one choice per request)");
  for (const char* name : {"echo", "logprobs"})
    if (const json* f = field(j, name); f && !(f->is_boolean() && !f->get<bool>()))
      throw bad_request(name, "'{}' is not supported by oal serve", name);
  for (const char* name :
       {"tools", "functions", "response_format", "best_of", "suffix", "logit_bias"})
    if (field(j, name)) throw bad_request(name, "'{}' is not supported by oal serve", name);
}

GenerationParams generation_params(const json& j, const RequestLimits& limits, bool chat) {
  refuse_unsupported(j);
  GenerationParams p;
  const char* max_name =
      chat && field(j, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  p.max_tokens = integer_in(j, max_name, 1, limits.max_tokens, limits.default_max_tokens);
  p.temperature = number_in(j, "temperature", 0.0, 2.0, 1.0);
  p.top_p = number_in(j, "top_p", 0.0, 1.0, 1.0);
  if (p.top_p == 0) throw bad_request("top_p", "'top_p' must lie in (0, 1], got 0");
  p.top_k = integer_in(j, "top_k", 0, std::numeric_limits<int32_t>::max(), 0);
  if (const json* f = field(j, "seed")) {
    if (!f->is_number_integer())
      throw bad_request("seed", "'seed' must be an integer, got {}", f->dump());
    p.seed =
        f->is_number_unsigned() ? f->get<uint64_t>() : static_cast<uint64_t>(f->get<int64_t>());
  }
  p.stop = stop_strings(j, limits.max_stop);
  p.stream = flag(j, "stream");
  p.ignore_eos = flag(j, "ignore_eos");
  if (const json* f = field(j, "conversation_id")) {
    if (!f->is_string() || !valid_conversation_id(f->get<std::string>()))
      throw bad_request(
          "conversation_id",
          "'conversation_id' must be a string of 1 to 64 letters, digits, '_' or '-', got {}",
          f->dump());
    p.conversation_id = f->get<std::string>();
  }
  return p;
}

// Token ids of a JSON array; `param` names the field in errors.
std::vector<int32_t> token_array(const json& a, const char* param) {
  std::vector<int32_t> ids;
  for (const json& t : a) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      throw bad_request(param, "'{}' must hold token ids (non-negative integers), got {}", param,
                        t.dump());
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::string message_content(const json& c, size_t i) {
  const std::string param = fmt::format("messages[{}].content", i);
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array())
    throw bad_request(param, "'{}' must be a string or an array of text parts", param);
  std::string text;
  for (const json& part : c) {
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    const json* t = part.is_object() ? field(part, "text") : nullptr;
    if (!type || *type != "text" || !t || !t->is_string())
      throw bad_request(
          param, "'{}': only parts {{\"type\": \"text\", \"text\": ...}} are supported", param);
    text += t->get<std::string>();
  }
  return text;
}

}  // namespace

CompletionRequest parse_completion_request(const std::string& body, const RequestLimits& limits) {
  const json j = parse_object(body);
  CompletionRequest r;
  r.model = model_name(j);
  const json* p = field(j, "prompt");
  if (!p) throw bad_request("prompt", "'prompt' is required");
  if (p->is_string()) {
    r.prompt = p->get<std::string>();
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    r.prompt = (*p)[0].get<std::string>();
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    r.prompt_tokens = token_array(*p, "prompt");
  } else if (p->is_array() && p->size() > 1) {
    throw bad_request("prompt",
                      "several prompts in one request are not supported; send one per request");
  } else {
    throw bad_request("prompt", "'prompt' must be a string or an array of token ids, got {}",
                      p->dump());
  }
  if (r.prompt && r.prompt->empty())
    throw bad_request("prompt", "'prompt' is empty; expected some text");
  r.params = generation_params(j, limits, /*chat=*/false);
  return r;
}

ChatRequest parse_chat_request(const std::string& body, const RequestLimits& limits) {
  const json j = parse_object(body);
  ChatRequest r;
  r.model = model_name(j);
  const json* m = field(j, "messages");
  if (!m || !m->is_array() || m->empty())
    throw bad_request("messages", "'messages' must be a non-empty array of {{role, content}}");
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!msg.is_object()) throw bad_request(param, "'{}' must be an object", param);
    const json* role = field(msg, "role");
    if (!role || !role->is_string() ||
        (*role != "system" && *role != "user" && *role != "assistant" && *role != "developer"))
      throw bad_request(param + ".role", "'{}.role' must be system, developer, user or assistant",
                        param);
    const json* content = field(msg, "content");
    if (!content) throw bad_request(param + ".content", "'{}.content' is required", param);
    // "developer" is OpenAI's newer name for the system role.
    r.messages.push_back({*role == "developer" ? "system" : role->get<std::string>(),
                          message_content(*content, i)});
  }
  r.params = generation_params(j, limits, /*chat=*/true);
  return r;
}

TokenizeRequest parse_tokenize_request(const std::string& body) {
  const json j = parse_object(body);
  const json* c = field(j, "content");
  if (!c || !c->is_string())
    throw bad_request("content", "'content' must be a string (the text to tokenize)");
  return {c->get<std::string>(), flag(j, "add_special"), flag(j, "with_pieces")};
}

DetokenizeRequest parse_detokenize_request(const std::string& body, int32_t vocab_size) {
  const json j = parse_object(body);
  const json* t = field(j, "tokens");
  if (!t || !t->is_array()) throw bad_request("tokens", "'tokens' must be an array of token ids");
  DetokenizeRequest r{token_array(*t, "tokens")};
  for (int32_t id : r.tokens)
    if (id >= vocab_size)
      throw bad_request("tokens", "token id {} is outside the vocabulary [0, {})", id, vocab_size);
  return r;
}

}  // namespace oal::serve
