// Atomic writes: complete replacement on success, untouched target and no temp file
// on failure.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

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
