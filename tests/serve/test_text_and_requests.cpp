// The serve module's pure parts: stop strings and UTF-8 hold-back (TextStream), OpenAI
// request parsing and its errors, chat formats. Expected values are written out by hand.
#include <gtest/gtest.h>

#include "oal/core/error.h"
#include "oal/serve/api_error.h"
#include "oal/serve/chat_format.h"
#include "oal/serve/openai_request.h"
#include "oal/serve/text_stream.h"

using namespace oal::serve;

TEST(TextStream, StopStringSplitAcrossPiecesIsNeverSent) {
  TextStream t({"END"});
  EXPECT_EQ(t.push("hello E"), "hello ");  // "E" could start "END": held back
  EXPECT_EQ(t.push("N"), "");
  EXPECT_EQ(t.push("D and more"), "");
  EXPECT_TRUE(t.stopped());
  EXPECT_EQ(t.finish(), "");
  EXPECT_EQ(t.sent(), "hello ");
}

TEST(TextStream, HeldBackPrefixIsReleasedWhenItDoesNotBecomeAStop) {
  TextStream t({"END", "\n\n"});
  EXPECT_EQ(t.push("a E"), "a ");
  EXPECT_EQ(t.push("x\n"), "Ex");
  EXPECT_EQ(t.push("y"), "\ny");
  EXPECT_FALSE(t.stopped());
  EXPECT_EQ(t.push("\n"), "");
  EXPECT_EQ(t.finish(), "\n");
}

TEST(TextStream, IncompleteUtf8IsHeldUntilComplete) {
  TextStream t;
  // "é" = C3 A9, "€" = E2 82 AC split over tokens.
  EXPECT_EQ(t.push("caf\xC3"), "caf");
  EXPECT_EQ(t.push("\xA9 \xE2\x82"), "\xC3\xA9 ");
  EXPECT_EQ(t.push("\xAC"), "\xE2\x82\xAC");
  // A dangling lead byte at the end becomes U+FFFD, never invalid JSON text.
  EXPECT_EQ(t.push("\xE2"), "");
  EXPECT_EQ(t.finish(), "\xEF\xBF\xBD");
}

TEST(TextStream, Utf8Helpers) {
  EXPECT_EQ(utf8_complete_prefix("ab\xC3"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F\x98"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F\x98\x80"), 6u);
  EXPECT_EQ(utf8_sanitize("a\xFF" "b\xC0\xAF"), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8_sanitize("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
}

namespace {
RequestLimits limits() { return {.max_tokens = 100, .default_max_tokens = 7, .max_stop = 4}; }

// The field an invalid body is blamed on.
std::string bad_param(const std::string& body, bool chat = false) {
  try {
    chat ? (void)parse_chat_request(body, limits()) : (void)parse_completion_request(body, limits());
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << body;
    return e.body()["error"]["param"].is_null() ? "" : e.body()["error"]["param"].get<std::string>();
  }
  ADD_FAILURE() << "accepted: " << body;
  return "?";
}
}  // namespace

TEST(OpenAiRequest, CompletionFieldsAndDefaults) {
  CompletionRequest r = parse_completion_request(
      R"({"model":"m","prompt":"hi","temperature":0,"top_p":0.5,"top_k":3,"seed":9,
          "stop":["a","b"],"stream":true,"user":"ignored"})",
      limits());
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(*r.prompt, "hi");
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_EQ(r.params.temperature, 0);
  EXPECT_EQ(r.params.top_p, 0.5);
  EXPECT_EQ(r.params.top_k, 3);
  EXPECT_EQ(*r.params.seed, 9u);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.params.stream);
  r = parse_completion_request(R"({"prompt":[1,2,3],"max_tokens":100,"stop":"x"})", limits());
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.params.temperature, 1.0);  // OpenAI's default
  EXPECT_EQ(r.params.max_tokens, 100);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"x"}));
}

TEST(OpenAiRequest, EveryBadFieldIsNamed) {
  EXPECT_EQ(bad_param(""), "");
  EXPECT_EQ(bad_param("{not json"), "");
  EXPECT_EQ(bad_param("[1]"), "");
  EXPECT_EQ(bad_param("{}"), "prompt");
  EXPECT_EQ(bad_param(R"({"prompt":""})"), "prompt");
  EXPECT_EQ(bad_param(R"({"prompt":["a","b"]})"), "prompt");
  EXPECT_EQ(bad_param(R"({"prompt":[1,-2]})"), "prompt");
  EXPECT_EQ(bad_param(R"({"prompt":"x","max_tokens":0})"), "max_tokens");
  EXPECT_EQ(bad_param(R"({"prompt":"x","max_tokens":101})"), "max_tokens");
  EXPECT_EQ(bad_param(R"({"prompt":"x","max_tokens":1e30})"), "max_tokens");
  EXPECT_EQ(bad_param(R"({"prompt":"x","max_tokens":"5"})"), "max_tokens");
  EXPECT_EQ(bad_param(R"({"prompt":"x","temperature":-1})"), "temperature");
  EXPECT_EQ(bad_param(R"({"prompt":"x","temperature":"hot"})"), "temperature");
  EXPECT_EQ(bad_param(R"({"prompt":"x","top_p":0})"), "top_p");
  EXPECT_EQ(bad_param(R"({"prompt":"x","top_k":-3})"), "top_k");
  EXPECT_EQ(bad_param(R"({"prompt":"x","stop":["a","b","c","d","e"]})"), "stop");
  EXPECT_EQ(bad_param(R"({"prompt":"x","stop":[""]})"), "stop");
  EXPECT_EQ(bad_param(R"({"prompt":"x","stop":7})"), "stop");
  EXPECT_EQ(bad_param(R"({"prompt":"x","stream":"yes"})"), "stream");
  EXPECT_EQ(bad_param(R"({"prompt":"x","n":2})"), "n");
  EXPECT_EQ(bad_param(R"({"prompt":"x","logprobs":3})"), "logprobs");
  EXPECT_EQ(bad_param(R"({"prompt":"x","model":5})"), "model");
  EXPECT_EQ(bad_param(R"({"prompt":"x","seed":1.5})"), "seed");
}

TEST(OpenAiRequest, ChatMessages) {
  ChatRequest r = parse_chat_request(
      R"({"messages":[{"role":"developer","content":"be brief"},
                      {"role":"user","content":[{"type":"text","text":"he"},{"type":"text","text":"llo"}]}],
          "max_completion_tokens":5})",
      limits());
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "hello");
  EXPECT_EQ(r.params.max_tokens, 5);
  EXPECT_EQ(bad_param(R"({"messages":[]})", true), "messages");
  EXPECT_EQ(bad_param(R"({"messages":[{"role":"robot","content":"x"}]})", true), "messages[0].role");
  EXPECT_EQ(bad_param(R"({"messages":[{"role":"user"}]})", true), "messages[0].content");
  EXPECT_EQ(bad_param(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", true),
            "messages[0].content");
  EXPECT_EQ(bad_param(R"({"messages":[{"role":"user","content":"x"}],"tools":[]})", true), "tools");
}

TEST(ChatFormat, ChatMLWithTheTemplatesDefaultSystemMessage) {
  // SmolLM2-135M-Instruct's template (tokenizer.chat_template of its GGUF file).
  const std::string smollm2 =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
      "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
      "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|im_start|>assistant\n' }}{% endif %}";
  const ChatFormat f = chat_format_from_template(smollm2);
  EXPECT_EQ(f.kind, ChatFormatKind::chatml);
  EXPECT_EQ(f.default_system, "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  EXPECT_EQ(render_chat(f, {{"user", "Hi"}}),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_chat(f, {{"system", "S"}, {"user", "Hi"}}),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(f.end_of_turn(), "<|im_end|>");
}

TEST(ChatFormat, Llama3AndPlainAndUnknown) {
  const ChatFormat l = chat_format_from_template(
      "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
      "{{ m['content'] }}<|eot_id|>{% endfor %}");
  EXPECT_EQ(l.kind, ChatFormatKind::llama3);
  EXPECT_EQ(render_chat(l, {{"user", "Hi"}}),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(chat_format_from_template("").kind, ChatFormatKind::plain);
  EXPECT_EQ(render_chat(ChatFormat{}, {{"user", "Once"}, {"user", "Lily"}}), "Once\nLily\n");
  EXPECT_THROW(chat_format_from_template("[INST] {{ m }} [/INST]"), oal::Error);
}
