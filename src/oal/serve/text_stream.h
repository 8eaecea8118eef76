#pragma once
// The text of a generation as it may be sent to a client: pieces of decoded tokens go
// in, text safe to send comes out. Two things are held back until they resolve:
//   * an incomplete UTF-8 character at the end (a token may carry part of one; JSON
//     strings must be valid UTF-8);
//   * an ending that could be the start of a stop string (OpenAI semantics: the stop
//     string and everything after it are never sent).
#include <cstddef>
#include <string>
#include <vector>

namespace oal::serve {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop = {});
  // Adds a piece; returns the text that became safe to send (may be empty).
  std::string push(const std::string& piece);
  // True once a stop string appeared (push returns the text before it, then nothing).
  bool stopped() const { return stopped_; }
  // The end of the generation: the held-back rest (invalid UTF-8 replaced by U+FFFD);
  // empty after a stop.
  std::string finish();
  // Everything sent so far.
  const std::string& sent() const { return sent_; }

 private:
  std::string release(size_t end);
  std::vector<std::string> stop_;
  std::string text_;  // all text so far (up to the stop string, once stopped)
  std::string sent_;
  bool stopped_ = false;
};

// Length of the longest prefix of `s` that does not end inside a UTF-8 character
// (a trailing lead byte with too few continuation bytes).
size_t utf8_complete_prefix(const std::string& s);

// `s` with every byte sequence that is not valid UTF-8 replaced by U+FFFD.
std::string utf8_sanitize(const std::string& s);

}  // namespace oal::serve
