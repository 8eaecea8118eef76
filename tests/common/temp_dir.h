#pragma once
// Temporary directories for tests: make_temp_dir gives a fresh one per test (emptied when
// made); test_dir gives the current test's directory under one per-process root that is
// removed when the process exits (calling it twice in a test returns the same directory).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace oal::test {

inline std::filesystem::path make_temp_dir(const std::string& tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto dir = std::filesystem::temp_directory_path() /
             (std::string("oal_") + tag + "_" + info->test_suite_name() + "_" + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The per-process root of test_dir, "<tmp>/oal_test_<tag>_<pid>", removed at exit.
inline const std::filesystem::path& test_root(const std::string& tag) {
  static const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("oal_test_" + tag + "_" + std::to_string(::getpid()));
  static const struct Remover {
    ~Remover() {
      std::error_code ec;
      std::filesystem::remove_all(root, ec);
    }
  } remover;
  return root;
}

// "<root>/<test name>/<sub>", created if missing, never emptied.
inline std::filesystem::path test_dir(const std::string& tag, const std::string& sub = "") {
  auto dir = test_root(tag) / ::testing::UnitTest::GetInstance()->current_test_info()->name() / sub;
  std::filesystem::create_directories(dir);
  return dir;
}

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

}  // namespace oal::test
