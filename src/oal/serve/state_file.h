#pragma once
// A conversation's decode states on disk (oal serve --state-dir): one file per
// conversation, written atomically (temp file + fsync + rename) and checksummed.
//
// Layout (little-endian):
//   "OALSTATE"  8 bytes magic
//   u32         version (1)
//   u64         header length H
//   H bytes     header JSON: {"identity": model+attention identity, "id": conversation id,
//               "tokens": [absorbed token ids], "layers": [{"tokens": n, "tensors":
//               [{"name", "dtype": "f32"|"f64"|"bf16"|"f16", "shape": [...], "offset",
//               "bytes"}]}]}; offsets count from the start of the payload
//   payload     every tensor's bytes, in header order, back to back
//   u64         FNV-1a 64 of every byte before it
// A reader checks every size and offset against the file and the checksum before it
// trusts anything, and refuses a file written for another model (identity).
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "oal/attention/state_snapshot.h"

namespace oal::serve {

// What a conversation's states absorbed and hold.
struct SavedConversation {
  std::string id{};                          // a valid conversation id (see valid_conversation_id)
  std::vector<int32_t> tokens{};             // absorbed by every layer's state, in order
  std::vector<attn::StateSnapshot> layers{}; // one per model layer
};

// The header alone (for indexing a state directory without reading every payload).
struct StateFileHeader {
  std::string identity, id;
  std::vector<int32_t> tokens;
};

// Ids name files: 1 to 64 characters of [A-Za-z0-9_-].
bool valid_conversation_id(std::string_view id);

// The file's bytes. Throws oal::Error "[state_file] ..." for an invalid id or a tensor of
// another dtype.
std::string encode_state_file(const SavedConversation& c, const std::string& identity);
// Parses a whole file's bytes; throws oal::Error "[state_file] ..." (naming `source`) for
// anything malformed, truncated, failing its checksum or written under another identity.
SavedConversation decode_state_file(std::string_view bytes, const std::string& identity,
                                    std::string_view source = "state file");
// The header of a file's first bytes (checksum not verified: that needs the whole file).
StateFileHeader decode_state_header(std::string_view bytes, std::string_view source = "state file");

// File forms: write atomically; read the whole file or only its header.
void write_state_file(const std::filesystem::path& path, const SavedConversation& c,
                      const std::string& identity);
SavedConversation read_state_file(const std::filesystem::path& path, const std::string& identity);
StateFileHeader read_state_header(const std::filesystem::path& path);

}  // namespace oal::serve
