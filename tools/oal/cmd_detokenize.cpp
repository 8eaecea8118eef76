// `oal detokenize --tokenizer T (--ids "1 2 3" | --file F) [--json]`: the text of token
// ids (the inverse of `oal tokenize`).
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "oal/core/error.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"
#include "token_text.h"

namespace {

struct DetokenizeArgs {
  std::string tokenizer, ids, file;
  bool json = false;
};

void run(const DetokenizeArgs& a) {
  constexpr std::string_view op = "detokenize";
  oal::check(a.ids.empty() != a.file.empty(), op, "give exactly one of --ids and --file");
  const auto tok = oal::text::load_tokenizer(a.tokenizer);
  const std::vector<int32_t> ids =
      oal::cli::parse_token_ids(a.file.empty() ? a.ids : oal::text::read_text_file(a.file));
  for (int32_t id : ids)
    oal::check(id >= 0 && id < tok->vocab_size(), op,
               "token id {} is outside the vocabulary (0..{})", id, tok->vocab_size() - 1);
  const std::string text = tok->decode(ids);
  if (a.json) {
    nlohmann::json j{{"tokenizer", a.tokenizer}, {"count", ids.size()}, {"text", text}};
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  fmt::print("{}\n", text);
}

oal::cli::Registrar reg{
    "detokenize", "Text of token ids (the inverse of tokenize)", [](CLI::App& app) {
      auto a = std::make_shared<DetokenizeArgs>();
      app.add_option("--tokenizer", a->tokenizer,
                     "tokenizer.json, a model directory holding one, a .gguf model, or a llama2.c "
                     "tokenizer .bin")
          ->required();
      auto* ids = app.add_option("--ids", a->ids,
                                 "Token ids separated by spaces and/or commas, optionally in "
                                 "[ ] (what `oal tokenize --ids-only` prints)");
      auto* file = app.add_option("--file", a->file, "Read the ids from this file");
      ids->excludes(file);
      app.add_flag("--json", a->json, "Machine-readable output: tokenizer, count, text");
      return [a] { run(*a); };
    }};

}  // namespace
