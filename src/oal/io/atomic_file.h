#pragma once
// Atomic file replacement: the content is written to `<path>.tmp.<pid>` beside the
// target, flushed to disk (fsync), then renamed over `path`. Readers therefore see
// either the old file or the complete new one, never a partial write; on any error
// the temporary file is removed and the target is left untouched.
#include <filesystem>
#include <fstream>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace oal::io {

// Streaming form for large outputs (checkpoints, safetensors):
//   AtomicFileWriter w(path);  w.stream() << ...;  w.commit();
// Destroying the writer without commit() (e.g. during stack unwinding after an
// exception) removes the temporary file.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Binary output stream into the temporary file.
  std::ostream& stream() { return out_; }
  // Flushes, fsyncs, renames onto the target (and fsyncs the directory). Throws
  // oal::Error("[atomic_write] ...") when any step fails; the temp file is removed.
  void commit();

  const std::filesystem::path& target() const { return path_; }
  const std::filesystem::path& temp_path() const { return tmp_; }

 private:
  std::filesystem::path path_;
  std::filesystem::path tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

// Writes `contents` to `path` atomically.
void write_file_atomic(const std::filesystem::path& path, std::string_view contents);

// Calls `write(stream)` on the temporary file, then commits. If `write` throws, the
// temporary file is removed and the exception propagates unchanged.
void write_file_atomic(const std::filesystem::path& path,
                       const std::function<void(std::ostream&)>& write);

// Removes the temporaries `<name>.tmp.<pid>` in `dir` (not its subdirectories) that a
// writer left when it was killed before commit: those whose <pid> is no running
// process. A live process's temporary (another writer sharing the directory) is kept.
// Returns the paths removed; a file that cannot be removed is skipped (best effort).
std::vector<std::filesystem::path> remove_stale_temporaries(const std::filesystem::path& dir);

}  // namespace oal::io
