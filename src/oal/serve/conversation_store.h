#pragma once
// The saved conversations of one server. A finished generation leaves its sequence's
// layer states here (a KV cache for softmax layers, the constant-size state for OAL
// layers) together with the tokens they absorbed; a later request whose prompt starts
// with those tokens continues from them instead of reading the prompt again.
//
// States stay in memory under a budget (idle conversations plus the active sequences);
// beyond it the least recently used conversation goes to the state directory (one
// checksummed file each, state_file.h) or, without a directory, is dropped. The directory
// is indexed at start, so conversations survive a restart, and a named conversation not
// in the index is looked up in it again (another server over the same directory may have
// written it); flush() at shutdown writes the rest. A file that cannot be read back is refused (logged, renamed *.corrupt) and that
// conversation starts again from its prompt.
//
// Used by the engine's scheduler thread only: not thread-safe.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "oal/model/transformer.h"

namespace oal::serve {

using Log = std::function<void(const std::string&)>;

// What a saved state is valid for: the model's fingerprint and a hash of every layer's
// attention fingerprint ("oal-<16 hex>/attn-<16 hex>"). A state file written under another
// identity is refused.
std::string state_identity(const model::Transformer& model);

struct StoreOptions {
  // Bytes for saved conversations in memory plus the active sequences' states; active
  // sequences are never evicted, so with 0 (or active states above it) no saved
  // conversation stays in memory.
  int64_t max_state_memory = int64_t{1} << 30;
  std::filesystem::path state_dir{};  // empty: evicted conversations are dropped
  std::string identity{};             // written into state files and required when reading them
};

// A conversation's states and the tokens they absorbed (batch 1, one state per layer).
struct Conversation {
  std::string id{};
  std::vector<int32_t> tokens{};
  model::Transformer::LayerStates states{};
  int64_t bytes() const;  // the layer states' state_bytes()
};

struct StoreStats {
  int64_t in_memory = 0, memory_bytes = 0, on_disk = 0;
  int64_t hits = 0, reused_tokens = 0;  // requests that continued a saved conversation
  int64_t evictions = 0, restore_failures = 0, write_failures = 0;
};

class ConversationStore {
 public:
  // Creates the state directory when missing and indexes its files (headers only; a file
  // whose header cannot be read is logged and skipped). `model` must outlive the store.
  ConversationStore(const model::Transformer& model, StoreOptions options, Log log = {});

  // The conversation to continue `prompt` from: the one called `id` when id is
  // non-empty, removed from the store (the request's next turn replaces it); else a copy
  // of the saved one with the longest token prefix of the prompt, which stays for other
  // requests that start the same way (shared prefixes: a system prompt read once). Its
  // tokens are always a strict prefix of `prompt` (the last prompt token must still be
  // read to give the next token's logits). A named conversation that does not continue
  // the prompt is discarded (it restarts). nullopt when nothing fits.
  std::optional<Conversation> take(const std::string& id, const std::vector<int32_t>& prompt);
  // Keeps a finished sequence's conversation (replacing one of the same id).
  void put(Conversation c);
  // Evicts least recently used conversations until they and `active_bytes` fit the budget.
  void enforce_budget(int64_t active_bytes);
  // Writes every conversation in memory to the state directory (no-op without one).
  void flush();
  // A fresh id for a request that named none.
  std::string new_id();
  StoreStats stats() const { return stats_; }

 private:
  struct OnDisk {
    std::vector<int32_t> tokens;
    std::filesystem::path path;
  };
  std::optional<Conversation> take_from_memory(std::list<Conversation>::iterator it);
  // A copy of the conversation at `it` (its states restored from snapshots), which
  // becomes the most recently used.
  std::optional<Conversation> copy_from_memory(std::list<Conversation>::iterator it);
  // Adds the state file at `path` to the index when it is this model's (logged and
  // false otherwise).
  bool index_file(const std::filesystem::path& path);
  // Reads conversation `id` from its file, which is removed (it lives in memory again);
  // nullopt (logged) when the file is gone, refused, or no longer starts `prompt`.
  std::optional<Conversation> take_from_disk(const std::string& id,
                                             const std::vector<int32_t>& prompt);
  void forget_file(const std::string& id);
  // Writes `c` to the state directory; false (logged) when that fails.
  bool save(const Conversation& c);
  void update_counts();

  const model::Transformer& model_;
  StoreOptions options_;
  Log log_;
  std::list<Conversation> memory_;  // most recently used first
  std::map<std::string, OnDisk> disk_;
  StoreStats stats_;
  uint64_t next_id_;
};

}  // namespace oal::serve
