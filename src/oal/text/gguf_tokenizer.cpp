#include "oal/text/gguf_tokenizer.h"

#include <cmath>
#include <map>
#include <unordered_set>

#include "oal/core/error.h"
#include "oal/text/hf_bpe_tokenizer.h"

namespace oal::text {
namespace {

constexpr std::string_view k_op = "gguf tokenizer";

// llama.cpp's token types (llama_token_type).
constexpr int64_t k_type_control = 3;
constexpr int64_t k_type_user_defined = 4;

std::vector<std::pair<std::string, std::string>> read_merges(const io::GgufHeader& h) {
  std::vector<std::pair<std::string, std::string>> merges;
  const io::GgufValue* v = h.find("tokenizer.ggml.merges");
  if (v == nullptr) return merges;
  const auto list = v->as_string_array("tokenizer.ggml.merges");
  merges.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    // Byte-level strings never hold a raw space (it is 'Ġ'), so the first space splits.
    const size_t sp = list[i].find(' ');
    check(sp != std::string::npos && sp > 0 && sp + 1 < list[i].size(), k_op,
          "tokenizer.ggml.merges[{}] = '{}': expected 'left right'", i, list[i]);
    merges.emplace_back(list[i].substr(0, sp), list[i].substr(sp + 1));
  }
  return merges;
}

std::vector<int64_t> read_token_types(const io::GgufHeader& h, size_t n_tokens) {
  const io::GgufValue* v = h.find("tokenizer.ggml.token_type");
  if (v == nullptr) return std::vector<int64_t>(n_tokens, 1);
  auto types = v->as_int_array("tokenizer.ggml.token_type");
  check(types.size() == n_tokens, k_op,
        "tokenizer.ggml.token_type has {} entries, expected {} (one per token)", types.size(),
        n_tokens);
  return types;
}

// The name of token `key`'s id, or "" when the key is absent.
std::string special_token(const io::GgufHeader& h, const std::string& key,
                          const std::vector<std::string>& tokens) {
  const io::GgufValue* v = h.find(key);
  if (v == nullptr) return {};
  const int64_t id = v->as_int(key);
  check(id >= 0 && id < static_cast<int64_t>(tokens.size()), k_op,
        "{} = {}: expected an id in [0, {})", key, id, tokens.size());
  return tokens[id];
}

}  // namespace

SplitPattern gguf_pre_tokenizer(const std::string& pre) {
  // llama.cpp groups these names onto one regex set (llama-vocab.cpp).
  static const std::unordered_set<std::string> smollm = {
      "smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"};
  if (smollm.count(pre)) return SplitPattern::smollm;
  if (pre.empty() || pre == "default" || pre == "gpt2" || pre == "gpt-2") return SplitPattern::gpt2;
  if (pre == "qwen2") return SplitPattern::qwen2;
  if (pre == "llama-bpe" || pre == "llama3") return SplitPattern::llama3;
  fail(k_op,
       "tokenizer.ggml.pre '{}' is not supported: supported are smollm (and starcoder, refact, "
       "command-r, codeshell, exaone, minerva-7b), gpt2/default, qwen2, llama-bpe",
       pre);
}

std::string gguf_tokenizer_model(const io::GgufHeader& h) {
  const std::string& model = h.at("tokenizer.ggml.model").as_string("tokenizer.ggml.model");
  check(model == "gpt2" || model == "llama", k_op,
        "tokenizer.ggml.model '{}' is not supported: expected 'gpt2' (byte-level BPE) or 'llama' "
        "(SentencePiece)", model);
  return model;
}

std::optional<std::string> gguf_chat_template(const io::GgufHeader& h) {
  if (const io::GgufValue* t = h.find("tokenizer.chat_template"))
    return t->as_string("tokenizer.chat_template");
  return std::nullopt;
}

GgufTokenizerInfo read_gguf_tokenizer(const io::GgufHeader& h) {
  GgufTokenizerInfo info;
  const std::string model = gguf_tokenizer_model(h);
  check(model == "gpt2", k_op, "tokenizer.ggml.model '{}' is SentencePiece, not byte-level BPE "
        "(read it with read_gguf_spm_vocab)", model);
  if (const io::GgufValue* p = h.find("tokenizer.ggml.pre"))
    info.pre = p->as_string("tokenizer.ggml.pre");
  info.spec.split = gguf_pre_tokenizer(info.pre);
  // llama.cpp: Llama-3's BPE takes a piece that is itself a token whole.
  info.spec.ignore_merges = info.spec.split == SplitPattern::llama3;
  const auto tokens = h.at("tokenizer.ggml.tokens").as_string_array("tokenizer.ggml.tokens");
  check(!tokens.empty(), k_op, "tokenizer.ggml.tokens is empty");
  check(tokens.size() < (1u << 30), k_op, "tokenizer.ggml.tokens has {} entries", tokens.size());
  const auto types = read_token_types(h, tokens.size());
  std::unordered_set<std::string> seen;
  for (size_t id = 0; id < tokens.size(); ++id) {
    check(seen.insert(tokens[id]).second, k_op,
          "tokenizer.ggml.tokens[{}] = '{}' repeats an earlier token", id, tokens[id]);
    info.spec.vocab.emplace_back(tokens[id], static_cast<int32_t>(id));
    const bool added = types[id] == k_type_control || types[id] == k_type_user_defined;
    if (added && !tokens[id].empty())
      info.spec.added_tokens.push_back(
          {static_cast<int32_t>(id), tokens[id], types[id] == k_type_control});
  }
  info.spec.merges = read_merges(h);
  info.spec.bos_token = special_token(h, "tokenizer.ggml.bos_token_id", tokens);
  info.spec.eos_token = special_token(h, "tokenizer.ggml.eos_token_id", tokens);
  if (const io::GgufValue* b = h.find("tokenizer.ggml.add_bos_token"))
    info.add_bos = b->as_bool("tokenizer.ggml.add_bos_token");
  info.spec.add_bos = info.add_bos;
  info.chat_template = gguf_chat_template(h);
  return info;
}

SpmVocab read_gguf_spm_vocab(const io::GgufHeader& h) {
  const std::string model = gguf_tokenizer_model(h);
  check(model == "llama", k_op, "tokenizer.ggml.model '{}' is not SentencePiece ('llama')", model);
  SpmVocab v;
  v.tokens = h.at("tokenizer.ggml.tokens").as_string_array("tokenizer.ggml.tokens");
  check(!v.tokens.empty(), k_op, "tokenizer.ggml.tokens is empty");
  check(v.tokens.size() < (1u << 30), k_op, "tokenizer.ggml.tokens has {} entries",
        v.tokens.size());
  const io::GgufValue* scores = h.find("tokenizer.ggml.scores");
  check(scores != nullptr, k_op, "tokenizer.ggml.scores is missing: a SentencePiece vocabulary "
        "merges by score, one per token");
  for (double x : scores->as_float_array("tokenizer.ggml.scores")) {
    check(std::isfinite(x), k_op, "tokenizer.ggml.scores holds a non-finite score ({})", x);
    v.scores.push_back(static_cast<float>(x));
  }
  check(v.scores.size() == v.tokens.size(), k_op,
        "tokenizer.ggml.scores has {} entries, expected {} (one per token)", v.scores.size(),
        v.tokens.size());
  for (int64_t t : read_token_types(h, v.tokens.size())) {
    check(t >= 1 && t <= 6, k_op,
          "tokenizer.ggml.token_type holds {}: expected 1..6 (normal, unknown, "
          "control, user-defined, unused, byte)",
          t);
    v.types.push_back(static_cast<SpmTokenType>(t));
  }
  auto id_or = [&](const std::string& key, int32_t fallback) {
    const io::GgufValue* x = h.find(key);
    if (x == nullptr) return fallback;
    const int64_t id = x->as_int(key);
    check(id >= 0 && id < static_cast<int64_t>(v.tokens.size()), k_op,
          "{} = {}: expected an id in [0, {})", key, id, v.tokens.size());
    return static_cast<int32_t>(id);
  };
  // llama.cpp's defaults for SentencePiece files: unk 0, BOS 1, EOS 2, BOS added.
  auto in_vocab = [&](int32_t id) { return id < static_cast<int32_t>(v.tokens.size()) ? id : -1; };
  v.unk = id_or("tokenizer.ggml.unknown_token_id", in_vocab(0));
  v.bos = id_or("tokenizer.ggml.bos_token_id", in_vocab(1));
  v.eos = id_or("tokenizer.ggml.eos_token_id", in_vocab(2));
  if (const io::GgufValue* b = h.find("tokenizer.ggml.add_bos_token"))
    v.add_bos = b->as_bool("tokenizer.ggml.add_bos_token");
  if (const io::GgufValue* b = h.find("tokenizer.ggml.add_space_prefix"))
    v.add_space_prefix = b->as_bool("tokenizer.ggml.add_space_prefix");
  return v;
}

std::unique_ptr<Tokenizer> gguf_tokenizer(const io::GgufHeader& h) {
  if (gguf_tokenizer_model(h) == "llama")
    return std::make_unique<SpmTokenizer>(read_gguf_spm_vocab(h));
  return std::make_unique<HfBpeTokenizer>(read_gguf_tokenizer(h).spec);
}

io::GgufMetadata gguf_tokenizer_metadata(const HfBpeSpec& spec) {
  std::vector<std::string> tokens(spec.vocab.size() + spec.added_tokens.size());
  std::vector<int32_t> types(tokens.size(), 1);
  std::vector<bool> present(tokens.size(), false);
  auto place = [&](int32_t id, const std::string& s, int32_t type) {
    check(id >= 0 && static_cast<size_t>(id) < tokens.size(), "gguf tokenizer write",
          "token id {} outside the dense range [0, {})", id, tokens.size());
    tokens[id] = s;
    types[id] = type;
    present[id] = true;
  };
  for (const auto& [s, id] : spec.vocab) place(id, s, 1);
  for (const auto& a : spec.added_tokens)
    place(a.id, a.content,
          a.special ? static_cast<int32_t>(k_type_control)
                    : static_cast<int32_t>(k_type_user_defined));
  size_t n = tokens.size();
  while (n > 0 && !present[n - 1]) --n;  // added tokens that are also in vocab
  for (size_t i = 0; i < n; ++i)
    check(present[i], "gguf tokenizer write", "token ids are not dense: id {} is missing", i);
  tokens.resize(n);
  types.resize(n);
  std::vector<std::string> merges;
  for (const auto& [a, b] : spec.merges) merges.push_back(a + " " + b);
  static const std::map<SplitPattern, std::string> pre = {{SplitPattern::qwen2, "qwen2"},
                                                          {SplitPattern::llama3, "llama-bpe"},
                                                          {SplitPattern::gpt2, "gpt2"},
                                                          {SplitPattern::smollm, "smollm"}};
  io::GgufMetadata md = {
      {"tokenizer.ggml.model", io::gguf_str("gpt2")},
      {"tokenizer.ggml.pre", io::gguf_str(spec.split ? pre.at(*spec.split) : "gpt2")},
      {"tokenizer.ggml.tokens", io::gguf_str_array(tokens)},
      {"tokenizer.ggml.token_type", io::gguf_i32_array(types)},
      {"tokenizer.ggml.merges", io::gguf_str_array(merges)}};
  auto id_of = [&](const std::string& name) {
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] == name) return static_cast<uint32_t>(i);
    fail("gguf tokenizer write", "special token '{}' is not in the vocabulary", name);
  };
  if (!spec.bos_token.empty())
    md.emplace_back("tokenizer.ggml.bos_token_id", io::gguf_u32(id_of(spec.bos_token)));
  if (!spec.eos_token.empty())
    md.emplace_back("tokenizer.ggml.eos_token_id", io::gguf_u32(id_of(spec.eos_token)));
  md.emplace_back("tokenizer.ggml.add_bos_token",
                  io::gguf_bool(spec.add_bos && !spec.bos_token.empty()));
  return md;
}

void write_gguf_tokenizer(const std::filesystem::path& source_gguf,
                          const std::filesystem::path& out) {
  const io::GgufFile g = io::read_gguf(source_gguf);
  (void)gguf_tokenizer(g.header);  // refuse a file whose tokenizer cannot be used
  io::GgufMetadata md;
  for (const auto& kv : g.header.metadata)
    if (kv.first.rfind("tokenizer.", 0) == 0) md.push_back(kv);
  io::write_gguf(out, md, {});
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& path) {
  return gguf_tokenizer(io::read_gguf(path).header);
}

}  // namespace oal::text
