#include "oal/serve/chat_format.h"

#include "oal/core/error.h"

namespace oal::serve {
namespace {

constexpr const char* k_op = "chat format";

// The default system message a ChatML template writes as a literal,
// e.g. SmolLM2's {{ '<|im_start|>system\nYou are a helpful AI assistant ...<|im_end|>\n' }}.
std::string chatml_default_system(const std::string& t) {
  const std::string open = "'<|im_start|>system\n";
  const size_t at = t.find(open);
  if (at == std::string::npos) return {};
  const size_t begin = at + open.size();
  const size_t end = t.find("<|im_end|>", begin);
  if (end == std::string::npos) return {};
  const std::string text = t.substr(begin, end - begin);
  // A Jinja expression there (e.g. ' + message['content'] + ') is not a literal.
  return text.find('\'') == std::string::npos && text.find("{{") == std::string::npos ? text : "";
}

}  // namespace

std::string ChatFormat::end_of_turn() const {
  switch (kind) {
    case ChatFormatKind::chatml: return "<|im_end|>";
    case ChatFormatKind::llama3: return "<|eot_id|>";
    case ChatFormatKind::plain: return "";
  }
  return "";
}

std::string ChatFormat::name() const {
  switch (kind) {
    case ChatFormatKind::chatml: return "chatml";
    case ChatFormatKind::llama3: return "llama3";
    case ChatFormatKind::plain: return "plain";
  }
  return "plain";
}

ChatFormat chat_format_from_template(const std::string& t) {
  if (t.empty()) return {};
  if (t.find("<|im_start|>") != std::string::npos)
    return {ChatFormatKind::chatml, chatml_default_system(t)};
  if (t.find("<|start_header_id|>") != std::string::npos) return {ChatFormatKind::llama3, {}};
  throw Error(k_op, fmt::format("the model's chat template is of a format oal does not know "
                                "(supported: ChatML as SmolLM2/Qwen2 use it, Llama-3); it begins "
                                "\"{}\"",
                                t.substr(0, 80)));
}

std::string render_chat(const ChatFormat& f, const std::vector<ChatMessage>& messages) {
  std::string out;
  switch (f.kind) {
    case ChatFormatKind::chatml:
      if (!f.default_system.empty() && (messages.empty() || messages.front().role != "system"))
        out += "<|im_start|>system\n" + f.default_system + "<|im_end|>\n";
      for (const auto& m : messages)
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      return out + "<|im_start|>assistant\n";
    case ChatFormatKind::llama3:
      for (const auto& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatFormatKind::plain:
      for (const auto& m : messages) out += m.content + "\n";
      return out;
  }
  return out;
}

}  // namespace oal::serve
