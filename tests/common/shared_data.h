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

// A path from an environment variable, or `fallback`; relative ones are taken from the
// source root, as the scripts that create them (scripts/fetch-models.sh,
// scripts/python-venv.sh) do.
inline std::filesystem::path source_relative_env(const char* var, const char* fallback) {
  const char* env = std::getenv(var);
  std::filesystem::path p = env && *env ? env : fallback;
  return p.is_absolute() ? p : std::filesystem::path(OAL_SOURCE_DIR) / p;
}

// The model cache of scripts/fetch-models.sh: $OAL_MODEL_CACHE, else .cache/models.
inline std::filesystem::path model_cache_file(const std::string& name) {
  return source_relative_env("OAL_MODEL_CACHE", ".cache/models") / name;
}

// The project venv's python (scripts/python-venv.sh): $OAL_VENV, else .cache/venv.
inline std::filesystem::path venv_python() {
  return source_relative_env("OAL_VENV", ".cache/venv") / "bin" / "python";
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

// Skips the test when `path` (a model cache file, the venv's python, ...) is absent,
// except when OAL_REQUIRE_SHARED=1, where absence is a failure. `what` names it.
#define OAL_REQUIRE_PATH(path, what)                                                 \
  do {                                                                               \
    if (!std::filesystem::exists(path)) {                                            \
      if (::oal::test::shared_required())                                            \
        FAIL() << (what) << " missing (OAL_REQUIRE_SHARED=1): " << (path);           \
      else                                                                           \
        GTEST_SKIP() << (what) << " missing: " << (path);                            \
    }                                                                                \
  } while (0)
