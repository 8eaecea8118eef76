#pragma once
// Locating ../shared/data from tests. A test that needs a shared file starts with
//   auto path = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
// which skips when the file is absent, except when OAL_REQUIRE_SHARED=1 (set by
// .ci/run), where absence is a failure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace oal::test {

inline std::filesystem::path shared_data_dir() {
  if (const char* env = std::getenv("OAL_SHARED_DATA")) return env;
  return std::filesystem::path(OAL_SOURCE_DIR) / ".." / "shared" / "data";
}

inline bool shared_required() {
  const char* env = std::getenv("OAL_REQUIRE_SHARED");
  return env && std::string(env) == "1";
}

inline std::filesystem::path shared_file(const std::string& name) {
  return shared_data_dir() / name;
}

}  // namespace oal::test

#define OAL_REQUIRE_SHARED_FILE(name)                                                   \
  ::oal::test::shared_file(name);                                                       \
  do {                                                                                  \
    if (!std::filesystem::exists(::oal::test::shared_file(name))) {                     \
      if (::oal::test::shared_required())                                               \
        FAIL() << "shared data file missing (OAL_REQUIRE_SHARED=1): "                   \
               << ::oal::test::shared_file(name);                                       \
      else                                                                              \
        GTEST_SKIP() << "shared data file missing: " << ::oal::test::shared_file(name); \
    }                                                                                   \
  } while (0)
