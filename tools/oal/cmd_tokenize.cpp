// `oal tokenize --tokenizer T (--text S | --file F) [--bos] [--ids-only] [--json]`: the
// token ids of a text and the piece of text each one stands for (llama.cpp's tokenize).
#include <fmt/core.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "oal/core/error.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"
#include "token_text.h"

namespace {

struct TokenizeArgs {
  std::string tokenizer, text, file;
  bool bos = false, ids_only = false, json = false;
};

void run(const TokenizeArgs& a) {
  constexpr std::string_view op = "tokenize";
  oal::check(a.text.empty() != a.file.empty(), op, "give exactly one of --text and --file");
  const auto tok = oal::text::load_tokenizer(a.tokenizer);
  const std::string text = a.file.empty() ? a.text : oal::text::read_text_file(a.file);
  const std::vector<int32_t> ids = tok->encode(text, a.bos);
  std::vector<std::string> pieces;
  int32_t prev = -1;
  for (int32_t id : ids) pieces.push_back(tok->decode_token(prev, id)), prev = id;

  if (a.json) {
    nlohmann::json j{{"tokenizer", a.tokenizer}, {"kind", tok->kind()}, {"count", ids.size()},
                     {"ids", ids}};
    if (!a.ids_only) j["pieces"] = pieces;
    // A piece can be part of a UTF-8 character: such bytes print as U+FFFD.
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  if (a.ids_only) {
    fmt::print("[{}]\n", fmt::join(ids, ", "));
    return;
  }
  for (size_t i = 0; i < ids.size(); ++i)
    fmt::print("{:>8} -> '{}'\n", ids[i], oal::cli::escaped_piece(pieces[i]));
}

oal::cli::Registrar reg{
    "tokenize", "Token ids of a text (and the piece each stands for)", [](CLI::App& app) {
      auto a = std::make_shared<TokenizeArgs>();
      app.add_option("--tokenizer", a->tokenizer,
                     "tokenizer.json, a model directory holding one, a .gguf model, or a llama2.c "
                     "tokenizer .bin")
          ->required();
      auto* text = app.add_option("--text", a->text, "The text");
      auto* file = app.add_option("--file", a->file, "Read the text from this file (whole)");
      text->excludes(file);
      app.add_flag("--bos", a->bos, "Put the tokenizer's BOS id first");
      app.add_flag("--ids-only", a->ids_only, "Print only the ids, as [1, 2, 3]");
      app.add_flag("--json", a->json,
                   "Machine-readable output: tokenizer, kind, count, ids, pieces");
      return [a] { run(*a); };
    }};

}  // namespace
