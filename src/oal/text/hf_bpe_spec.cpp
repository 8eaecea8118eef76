#include "oal/io/json_file.h"
#include "oal/text/hf_bpe_spec.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "oal/core/error.h"

namespace oal::text {

namespace {
using json = nlohmann::json;
constexpr std::string_view k_op = "tokenizer.json";

json read_json(const std::filesystem::path& path) { return io::read_json_file(path, k_op); }

const json& field(const json& obj, const char* name, const std::string& where) {
  check(obj.is_object() && obj.contains(name), k_op, "{}: missing field '{}'", where, name);
  return obj.at(name);
}

std::string type_of(const json& obj, const std::string& where) {
  const json& t = field(obj, "type", where);
  check(t.is_string(), k_op, "{}: field 'type' must be a string", where);
  return t.get<std::string>();
}

bool flag(const json& obj, const char* name) {
  return obj.contains(name) && obj.at(name).is_boolean() && obj.at(name).get<bool>();
}

void parse_model(const json& root, HfBpeSpec& spec) {
  const json& model = field(root, "model", "tokenizer");
  // Old files omit model.type; vocab + merges then means BPE.
  if (model.is_object() && model.contains("type"))
    check(type_of(model, "model") == "BPE", k_op,
          "unsupported model type '{}': only BPE is supported", type_of(model, "model"));
  const json& vocab = field(model, "vocab", "model");
  check(vocab.is_object() && !vocab.empty(), k_op,
        "model.vocab must be a non-empty object of token -> id");
  spec.vocab.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    check(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < INT32_MAX, k_op,
          "model.vocab['{}']: expected a non-negative int32 id", token);
    spec.vocab.emplace_back(token, id.get<int32_t>());
  }
  const json& merges = field(model, "merges", "model");
  check(merges.is_array(), k_op, "model.merges must be an array");
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_string()) {  // "a b"
      const auto s = m.get<std::string>();
      const size_t sp = s.find(' ');
      check(sp != std::string::npos && sp > 0 && sp + 1 < s.size() &&
                s.find(' ', sp + 1) == std::string::npos,
            k_op, "model.merges[{}] = '{}': expected two tokens separated by one space", i, s);
      spec.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else {  // ["a", "b"]
      check(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), k_op,
            "model.merges[{}]: expected \"a b\" or [\"a\", \"b\"]", i);
      spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    }
  }
  spec.ignore_merges = flag(model, "ignore_merges");
  for (const char* name : {"continuing_subword_prefix", "end_of_word_suffix"})
    check(!model.contains(name) || model.at(name).is_null() ||
              (model.at(name).is_string() && model.at(name).get<std::string>().empty()),
          k_op, "model.{} is not supported (byte-level BPE has none)", name);
  check(!model.contains("dropout") || model.at("dropout").is_null() ||
            (model.at("dropout").is_number() && model.at("dropout").get<double>() == 0.0),
        k_op, "model.dropout is not supported (encoding must be deterministic)");
}

void parse_normalizer(const json& root, HfBpeSpec& spec) {
  if (!root.contains("normalizer") || root.at("normalizer").is_null()) return;
  const json& n = root.at("normalizer");
  const std::string type = type_of(n, "normalizer");
  if (type == "NFC") {
    spec.nfc = true;
    return;
  }
  check(type == "Sequence", k_op,
        "unsupported normalizer '{}': supported are none, NFC, Sequence[NFC]", type);
  for (const json& sub : field(n, "normalizers", "normalizer")) {
    const std::string t = type_of(sub, "normalizer.normalizers[]");
    check(t == "NFC", k_op, "unsupported normalizer '{}' in Sequence: supported is NFC", t);
    spec.nfc = true;
  }
}

void parse_pre_tokenizer_step(const json& p, HfBpeSpec& spec, bool& byte_level) {
  const std::string type = type_of(p, "pre_tokenizer");
  if (type == "ByteLevel") {
    check(!flag(p, "use_regex"), k_op,
          "pre_tokenizer ByteLevel with use_regex true (the GPT-2 pattern) is not supported; "
          "supported is a Split with the Qwen2 or Llama-3 pattern followed by ByteLevel(use_regex "
          "false)");
    check(!flag(p, "add_prefix_space"), k_op,
          "pre_tokenizer ByteLevel with add_prefix_space true is not supported");
    byte_level = true;
    return;
  }
  check(type == "Split", k_op, "unsupported pre_tokenizer '{}': supported are Split and ByteLevel",
        type);
  check(!spec.split, k_op, "only one Split pre_tokenizer is supported");
  const json& pattern = field(p, "pattern", "pre_tokenizer Split");
  check(pattern.is_object() && pattern.contains("Regex") && pattern.at("Regex").is_string(), k_op,
        "pre_tokenizer Split: expected pattern {{\"Regex\": ...}}");
  const json& behavior = field(p, "behavior", "pre_tokenizer Split");
  check(behavior == "Isolated", k_op,
        "pre_tokenizer Split: behavior '{}' is not supported (only Isolated)", behavior.dump());
  check(!flag(p, "invert"), k_op, "pre_tokenizer Split: invert true is not supported");
  spec.split = split_pattern_from_regex(pattern.at("Regex").get<std::string>());
}

void parse_pre_tokenizer(const json& root, HfBpeSpec& spec) {
  bool byte_level = false;
  if (root.contains("pre_tokenizer") && !root.at("pre_tokenizer").is_null()) {
    const json& p = root.at("pre_tokenizer");
    if (type_of(p, "pre_tokenizer") == "Sequence") {
      for (const json& sub : field(p, "pretokenizers", "pre_tokenizer"))
        parse_pre_tokenizer_step(sub, spec, byte_level);
    } else {
      parse_pre_tokenizer_step(p, spec, byte_level);
    }
  }
  check(byte_level, k_op,
        "pre_tokenizer has no ByteLevel step: only byte-level BPE tokenizers are supported");
  if (root.contains("decoder") && !root.at("decoder").is_null())
    check(type_of(root.at("decoder"), "decoder") == "ByteLevel", k_op,
          "unsupported decoder '{}': only ByteLevel is supported",
          type_of(root.at("decoder"), "decoder"));
}

void parse_added_tokens(const json& root, HfBpeSpec& spec) {
  if (!root.contains("added_tokens") || root.at("added_tokens").is_null()) return;
  const json& list = root.at("added_tokens");
  check(list.is_array(), k_op, "added_tokens must be an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const json& a = list[i];
    const std::string where = fmt::format("added_tokens[{}]", i);
    AddedToken t;
    const json& id = field(a, "id", where);
    const json& content = field(a, "content", where);
    check(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < INT32_MAX, k_op,
          "{}: id must be a non-negative int32", where);
    check(content.is_string() && !content.get<std::string>().empty(), k_op,
          "{}: content must be a non-empty string", where);
    t.id = id.get<int32_t>();
    t.content = content.get<std::string>();
    t.special = flag(a, "special");
    t.lstrip = flag(a, "lstrip");
    t.rstrip = flag(a, "rstrip");
    spec.added_tokens.push_back(std::move(t));
  }
}

// tokenizer_config.json names bos_token / eos_token as a string or {"content": ...}.
std::string config_token(const json& config, const char* name) {
  if (!config.contains(name)) return {};
  const json& v = config.at(name);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v.at("content").is_string())
    return v.at("content").get<std::string>();
  return {};
}

void parse_config(const std::filesystem::path& tokenizer_json, HfBpeSpec& spec) {
  const auto config_path = tokenizer_json.parent_path() / "tokenizer_config.json";
  if (!std::filesystem::exists(config_path)) return;
  const json config = read_json(config_path);
  spec.bos_token = config_token(config, "bos_token");
  spec.eos_token = config_token(config, "eos_token");
}
}  // namespace

HfBpeSpec parse_tokenizer_document(const json& root, const std::string& where) {
  check(root.is_object(), k_op, "'{}': expected a JSON object at the top level", where);
  HfBpeSpec spec;
  try {
    parse_model(root, spec);
    parse_normalizer(root, spec);
    parse_pre_tokenizer(root, spec);
    parse_added_tokens(root, spec);
  } catch (const json::exception& e) {
    fail(k_op, "'{}': unexpected structure: {}", where, e.what());
  } catch (const Error& e) {
    // Name the file too: "[tokenizer.json] 'path': model.merges[3] ...".
    const std::string what = e.what();
    const std::string prefix = fmt::format("[{}] ", k_op);
    fail(k_op, "'{}': {}", where, what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what);
  }
  return spec;
}

HfBpeSpec parse_tokenizer_json(const std::filesystem::path& path) {
  HfBpeSpec spec = parse_tokenizer_document(read_json(path), path.string());
  parse_config(path, spec);
  return spec;
}

}  // namespace oal::text
