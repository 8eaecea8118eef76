// Atomic writes: complete replacement on success, untouched target and no temp file
// on failure.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "common/temp_dir.h"
#include "oal/core/error.h"
#include "oal/io/atomic_file.h"

namespace fs = std::filesystem;

namespace {
fs::path temp_dir() { return oal::test::test_dir("atomic"); }
std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
size_t count_files(const fs::path& d) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(d)) ++n;
  return n;
}
}  // namespace

TEST(AtomicFile, WritesAndReplaces) {
  auto p = temp_dir() / "a.json";
  oal::io::write_file_atomic(p, std::string_view("first"));
  EXPECT_EQ(slurp(p), "first");
  oal::io::write_file_atomic(p, [](std::ostream& os) { os << "second" << 2; });
  EXPECT_EQ(slurp(p), "second2");
  EXPECT_EQ(count_files(p.parent_path()), 1u);  // no temp file left behind
}

TEST(AtomicFile, ExceptionKeepsOldContentAndRemovesTemp) {
  auto p = temp_dir() / "b.json";
  oal::io::write_file_atomic(p, std::string_view("old"));
  EXPECT_THROW(oal::io::write_file_atomic(p,
                                          [](std::ostream& os) {
                                            os << "partial";
                                            throw std::runtime_error("boom");
                                          }),
               std::runtime_error);
  EXPECT_EQ(slurp(p), "old");
  EXPECT_EQ(count_files(p.parent_path()), 1u);
}

TEST(AtomicFile, UncommittedWriterLeavesNothing) {
  auto p = temp_dir() / "c.bin";
  {
    oal::io::AtomicFileWriter w(p);
    w.stream() << "never committed";
    EXPECT_TRUE(fs::exists(w.temp_path()));
  }
  EXPECT_FALSE(fs::exists(p));
  EXPECT_EQ(count_files(p.parent_path()), 0u);
}

TEST(AtomicFile, MissingDirectoryIsAClearError) {
  auto p = temp_dir() / "no_such_dir" / "d.json";
  try {
    oal::io::write_file_atomic(p, std::string_view("x"));
    FAIL() << "expected an error";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("[atomic_write]"), std::string::npos) << e.what();
  }
}

// A writer killed before commit leaves `<name>.tmp.<pid>`; the next start removes those
// of processes that no longer run, and keeps a running writer's (this process's) and
// every file that is not such a temporary.
TEST(AtomicFile, StaleTemporariesOfDeadWritersAreRemoved) {
  const fs::path d = temp_dir() / "stale";
  fs::remove_all(d);
  fs::create_directories(d);
  // A pid that ran and has exited: a child reaped here.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const std::string dead = std::to_string(child), live = std::to_string(::getpid());
  const std::vector<std::string> names = {"a.state.tmp." + dead, "b.json.tmp." + live, "c.state",
                                          "d.tmp." + dead + "x",   "e.tmp.", ".tmp." + dead};
  for (const std::string& name : names) std::ofstream(d / name) << "x";
  fs::create_directories(d / ("sub.tmp." + dead));  // a directory: not a written file
  const auto removed = oal::io::remove_stale_temporaries(d);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].filename(), "a.state.tmp." + dead);
  EXPECT_FALSE(fs::exists(d / ("a.state.tmp." + dead)));
  EXPECT_EQ(count_files(d), 6u);  // the other five files and the directory
  EXPECT_TRUE(oal::io::remove_stale_temporaries(d / "missing").empty());
  fs::remove_all(d);
}

