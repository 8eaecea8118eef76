#pragma once
// Chat messages → the prompt text a model was trained on. Jinja templates are not
// interpreted; the template text stored with the model (GGUF tokenizer.chat_template,
// tokenizer_config.json's chat_template) is recognised by its markers as one of the
// formats of the model families oal runs:
//   chatml  (SmolLM2, Qwen2): <|im_start|>{role}\n{content}<|im_end|>\n … <|im_start|>assistant\n
//           with the template's default system message when the first message is not one;
//   llama3  (Llama-3.x):      <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>
//           … <|start_header_id|>assistant<|end_header_id|>\n\n (BOS comes from the tokenizer);
//   plain   (no template, e.g. stories260K): the contents, one per line.
#include <string>
#include <vector>

#include "oal/serve/openai_request.h"

namespace oal::serve {

enum class ChatFormatKind { chatml, llama3, plain };

struct ChatFormat {
  ChatFormatKind kind = ChatFormatKind::plain;
  std::string default_system;  // chatml: the template's system message for chats without one
  // The text that ends an assistant turn (chatml "<|im_end|>", llama3 "<|eot_id|>";
  // "" for plain): its token is a stop token of chat requests.
  std::string end_of_turn() const;
  std::string name() const;
};

// The format a template text describes (formats::open_model finds the text stored with a
// model); "" → plain. Throws oal::Error("[chat format] ...")
// for a template of a format not recognised, naming the supported ones.
ChatFormat chat_format_from_template(const std::string& template_text);

// The prompt for `messages`, ending where the assistant's answer begins.
std::string render_chat(const ChatFormat& format, const std::vector<ChatMessage>& messages);

}  // namespace oal::serve
