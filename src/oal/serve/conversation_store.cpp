#include "oal/serve/conversation_store.h"

#include <fmt/core.h>

#include <algorithm>
#include <random>
#include <system_error>

#include "oal/core/error.h"
#include "oal/core/fnv1a.h"
#include "oal/formats/fingerprint.h"
#include "oal/io/atomic_file.h"
#include "oal/serve/state_file.h"

namespace oal::serve {
namespace {

namespace fs = std::filesystem;
constexpr std::string_view k_op = "conversation_store";
constexpr const char* k_ext = ".state";

// Whether `prefix` is a strict prefix of `tokens`.
bool continues(const std::vector<int32_t>& prefix, const std::vector<int32_t>& tokens) {
  return !prefix.empty() && prefix.size() < tokens.size() &&
         std::equal(prefix.begin(), prefix.end(), tokens.begin());
}

}  // namespace

std::string state_identity(const model::Transformer& model) {
  uint64_t h = k_fnv1a_offset;
  for (int64_t i = 0; i < model.num_layers(); ++i) fnv1a(h, model.attention(i).fingerprint() + ";");
  return fmt::format("{}/attn-{:016x}",
                     formats::model_fingerprint(model.config(), model.embed_tokens()), h);
}

int64_t Conversation::bytes() const {
  int64_t n = 0;
  for (const auto& s : states) n += s->state_bytes();
  return n;
}

ConversationStore::ConversationStore(const model::Transformer& model, StoreOptions options, Log log)
    : model_(model), options_(std::move(options)), log_(std::move(log)),
      next_id_(std::random_device{}()) {
  check(options_.max_state_memory >= 0, k_op, "max_state_memory must be >= 0, got {}",
        options_.max_state_memory);
  if (!log_) log_ = [](const std::string&) {};
  if (options_.state_dir.empty()) return;
  std::error_code ec;
  fs::create_directories(options_.state_dir, ec);
  check(!ec && fs::is_directory(options_.state_dir), k_op,
        "cannot create the state directory {}: {}", options_.state_dir.string(), ec.message());
  // Half-written states of a server killed mid-save (kill -9): never read, so removed.
  for (const auto& path : io::remove_stale_temporaries(options_.state_dir))
    log_(fmt::format("removed {}, left by a server that stopped while saving it", path.string()));
  for (const auto& entry : fs::directory_iterator(options_.state_dir))
    if (entry.is_regular_file() && entry.path().extension() == k_ext) index_file(entry.path());
  update_counts();
}

bool ConversationStore::index_file(const fs::path& path) {
  try {
    StateFileHeader h = read_state_header(path);
    if (h.identity != options_.identity || path.stem() != h.id) {
      log_(fmt::format("state file {} was written for another model or is misnamed; skipped",
                       path.string()));
      return false;
    }
    disk_[h.id] = OnDisk{std::move(h.tokens), path};
    return true;
  } catch (const std::exception& e) {
    log_(fmt::format("state file skipped: {}", e.what()));
    return false;
  }
}

std::string ConversationStore::new_id() {
  for (;;) {
    std::string id = fmt::format("conv-{:016x}", next_id_);
    next_id_ = next_id_ * 6364136223846793005ull + 1442695040888963407ull;
    const bool used = disk_.count(id) > 0 || std::any_of(memory_.begin(), memory_.end(),
                                                         [&](const auto& c) { return c.id == id; });
    if (!used) return id;
  }
}

std::optional<Conversation> ConversationStore::take(const std::string& id,
                                                    const std::vector<int32_t>& prompt) {
  auto mem = memory_.end();
  std::string disk_id;
  if (!id.empty()) {
    mem = std::find_if(memory_.begin(), memory_.end(), [&](const auto& c) { return c.id == id; });
    // Another server over the same directory (or a copied file) may have written it
    // since this one indexed the directory.
    if (mem == memory_.end() && !disk_.count(id) && !options_.state_dir.empty()) {
      const fs::path path = options_.state_dir / (id + k_ext);
      if (fs::is_regular_file(path)) index_file(path);
    }
    if (mem == memory_.end() && disk_.count(id)) disk_id = id;
    const std::vector<int32_t>* tokens =
        mem != memory_.end() ? &mem->tokens : !disk_id.empty() ? &disk_[id].tokens : nullptr;
    if (tokens && !continues(*tokens, prompt)) {
      // The client changed the conversation's history: its state no longer applies.
      if (mem != memory_.end()) memory_.erase(mem);
      else forget_file(id);
      update_counts();
      return std::nullopt;
    }
  } else {
    size_t best = 0;
    for (auto it = memory_.begin(); it != memory_.end(); ++it)
      if (it->tokens.size() > best && continues(it->tokens, prompt))
        best = it->tokens.size(), mem = it;
    for (const auto& [name, file] : disk_)
      if (file.tokens.size() > best && continues(file.tokens, prompt))
        best = file.tokens.size(), disk_id = name, mem = memory_.end();
  }
  // A conversation named by the request moves into it (its next turn replaces it); one
  // found by its prefix is copied, so that it stays for every other conversation that
  // starts the same way (a shared system prompt is read once, not once per request).
  const bool shared = id.empty();
  std::optional<Conversation> out;
  if (mem == memory_.end() && !disk_id.empty() && shared) {
    // Back into memory (the budget may send it to disk again), then copied like the rest.
    if (auto c = take_from_disk(disk_id, prompt))
      memory_.push_front(std::move(*c)), mem = memory_.begin();
  }
  if (mem != memory_.end()) out = shared ? copy_from_memory(mem) : take_from_memory(mem);
  else if (!disk_id.empty() && !shared) out = take_from_disk(disk_id, prompt);
  if (out) stats_.hits += 1, stats_.reused_tokens += static_cast<int64_t>(out->tokens.size());
  update_counts();
  return out;
}

std::optional<Conversation> ConversationStore::take_from_memory(
    std::list<Conversation>::iterator it) {
  Conversation c = std::move(*it);
  memory_.erase(it);
  return c;
}

std::optional<Conversation> ConversationStore::copy_from_memory(
    std::list<Conversation>::iterator it) {
  memory_.splice(memory_.begin(), memory_, it);  // most recently used
  Conversation c{.id = it->id, .tokens = it->tokens, .states = model_.new_states(1)};
  for (size_t i = 0; i < c.states.size(); ++i) c.states[i]->restore(it->states[i]->snapshot());
  return c;
}

std::optional<Conversation> ConversationStore::take_from_disk(const std::string& id,
                                                              const std::vector<int32_t>& prompt) {
  const fs::path path = disk_.at(id).path;
  if (!fs::exists(path)) {
    // Another server over the same directory continued it first: not a fault.
    disk_.erase(id);
    log_(fmt::format("conversation '{}': its state file is gone (another server took it); it "
                     "restarts from its prompt",
                     id));
    return std::nullopt;
  }
  try {
    SavedConversation saved = read_state_file(path, options_.identity);
    check(saved.id == id && saved.layers.size() == static_cast<size_t>(model_.num_layers()), k_op,
          "{} holds conversation '{}' with {} layers; expected '{}' with {}", path.string(),
          saved.id, saved.layers.size(), id, model_.num_layers());
    if (!continues(saved.tokens, prompt)) {
      // The file changed since it was indexed (another server continued the conversation
      // differently): its states do not fit this prompt, which is read from the start.
      // The file stays, indexed by what it holds now.
      log_(fmt::format("conversation '{}': its saved tokens no longer start this prompt; it "
                       "restarts from its prompt",
                       id));
      disk_[id].tokens = std::move(saved.tokens);
      return std::nullopt;
    }
    Conversation c{.id = id, .tokens = std::move(saved.tokens), .states = model_.new_states(1)};
    for (size_t i = 0; i < c.states.size(); ++i) c.states[i]->restore(saved.layers[i]);
    forget_file(id);  // the conversation lives in memory again
    return c;
  } catch (const std::exception& e) {
    stats_.restore_failures += 1;
    std::error_code ec;
    fs::rename(path, fs::path(path).concat(".corrupt"), ec);
    disk_.erase(id);
    log_(fmt::format("conversation '{}': its state file was refused ({}); it restarts from its "
                     "prompt (file kept as {}.corrupt)",
                     id, e.what(), path.string()));
    return std::nullopt;
  }
}

void ConversationStore::forget_file(const std::string& id) {
  auto it = disk_.find(id);
  if (it == disk_.end()) return;
  std::error_code ec;
  fs::remove(it->second.path, ec);
  disk_.erase(it);
}

void ConversationStore::put(Conversation c) {
  memory_.remove_if([&](const Conversation& o) { return o.id == c.id; });
  forget_file(c.id);
  memory_.push_front(std::move(c));
  update_counts();
}

bool ConversationStore::save(const Conversation& c) {
  const fs::path path = options_.state_dir / (c.id + k_ext);
  try {
    SavedConversation saved{.id = c.id, .tokens = c.tokens};
    for (const auto& s : c.states) saved.layers.push_back(s->snapshot());
    write_state_file(path, saved, options_.identity);
    disk_[c.id] = OnDisk{c.tokens, path};
    return true;
  } catch (const std::exception& e) {
    stats_.write_failures += 1;
    log_(fmt::format("conversation '{}' could not be saved: {}", c.id, e.what()));
    return false;
  }
}

void ConversationStore::enforce_budget(int64_t active_bytes) {
  int64_t idle = 0;
  for (const auto& c : memory_) idle += c.bytes();
  while (!memory_.empty() && idle + active_bytes > options_.max_state_memory) {
    const Conversation& last = memory_.back();
    idle -= last.bytes();
    if (!options_.state_dir.empty()) save(last);
    memory_.pop_back();
    stats_.evictions += 1;
  }
  update_counts();
}

void ConversationStore::flush() {
  if (options_.state_dir.empty()) return;
  for (const auto& c : memory_) save(c);
  memory_.clear();
  update_counts();
}

void ConversationStore::update_counts() {
  stats_.in_memory = static_cast<int64_t>(memory_.size());
  stats_.memory_bytes = 0;
  for (const auto& c : memory_) stats_.memory_bytes += c.bytes();
  stats_.on_disk = static_cast<int64_t>(disk_.size());
}

}  // namespace oal::serve
