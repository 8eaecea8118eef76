#include "oal/io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <system_error>

#include "oal/core/error.h"

namespace oal::io {
namespace {

constexpr std::string_view k_op = "atomic_write";

// fsync through a fresh descriptor: std::ofstream does not expose its own.
void fsync_path(const std::filesystem::path& p, bool directory) {
  int fd = ::open(p.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) {
    // Some filesystems refuse opening directories; the data file sync is what matters.
    if (directory) return;
    fail(k_op, "{}: cannot reopen for fsync: {}", p.string(), std::strerror(errno));
  }
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // EINVAL: the file system does not support syncing this kind of descriptor.
  if (rc != 0 && err != EINVAL && !directory)
    fail(k_op, "{}: fsync failed: {}", p.string(), std::strerror(err));
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::filesystem::path path) : path_(std::move(path)) {
  check(!path_.empty(), k_op, "expected a non-empty output path");
  tmp_ = path_;
  tmp_ += ".tmp." + std::to_string(::getpid());
  out_.open(tmp_, std::ios::binary | std::ios::trunc);
  check(out_.is_open(), k_op, "{}: cannot create temporary file {}: {}", path_.string(),
        tmp_.string(), std::strerror(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (committed_) return;
  if (out_.is_open()) out_.close();
  std::error_code ec;
  std::filesystem::remove(tmp_, ec);  // best effort: never throw from a destructor
}

void AtomicFileWriter::commit() {
  check(!committed_, k_op, "{}: commit() called twice", path_.string());
  out_.flush();
  bool ok = out_.good();
  out_.close();
  std::error_code ec;
  if (!ok || out_.fail()) {
    std::filesystem::remove(tmp_, ec);
    fail(k_op, "{}: writing {} failed (disk full or I/O error)", path_.string(), tmp_.string());
  }
  try {
    fsync_path(tmp_, false);
  } catch (...) {
    std::filesystem::remove(tmp_, ec);
    throw;
  }
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) {
    std::filesystem::remove(tmp_, ec);
    fail(k_op, "{}: cannot rename temporary file into place: {}", path_.string(), ec.message());
  }
  committed_ = true;
  auto dir = path_.parent_path();
  fsync_path(dir.empty() ? std::filesystem::path(".") : dir, true);
}

void write_file_atomic(const std::filesystem::path& path, std::string_view contents) {
  AtomicFileWriter w(path);
  w.stream().write(contents.data(), static_cast<std::streamsize>(contents.size()));
  w.commit();
}

void write_file_atomic(const std::filesystem::path& path,
                       const std::function<void(std::ostream&)>& write) {
  AtomicFileWriter w(path);
  write(w.stream());
  w.commit();
}

namespace {

// The writer's pid of a temporary's name `<name>.tmp.<pid>`, or 0 when it is not one.
pid_t temporary_writer(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || at == 0) return 0;
  const char* first = name.data() + at + 5;
  const char* last = name.data() + name.size();
  long pid = 0;
  const auto [end, ec] = std::from_chars(first, last, pid);
  if (ec != std::errc() || end != last || pid <= 0) return 0;
  return static_cast<pid_t>(pid);
}

}  // namespace

std::vector<std::filesystem::path> remove_stale_temporaries(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    const pid_t pid = temporary_writer(entry.path().filename().string());
    // kill(pid, 0) probes without signalling: ESRCH = no such process (EPERM: one exists).
    if (pid == 0 || !(::kill(pid, 0) == -1 && errno == ESRCH)) continue;
    if (std::filesystem::remove(entry.path(), ec)) removed.push_back(entry.path());
  }
  return removed;
}

}  // namespace oal::io
