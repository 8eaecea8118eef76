#pragma once
// Running the built `oal` binary from the CLI tests: exit status, stdout, stderr.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace oal::test {

struct CliResult {
  int status = -1;
  std::string out, err;
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// `oal <args>` (args already shell-quoted where needed), with `env` prepended
// ("NAME=value ..."); stdout and stderr captured through files in `dir`.
inline CliResult run_oal(const std::string& args, const std::filesystem::path& dir,
                         const std::string& env = "") {
  const std::string cmd = env + " '" + OAL_CLI_PATH + "' " + args + " >'" +
                          (dir / "stdout").string() + "' 2>'" + (dir / "stderr").string() + "'";
  const int raw = std::system(cmd.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_file(dir / "stdout"),
          read_file(dir / "stderr")};
}

// A fresh directory under the system temp dir, unique per process.
inline std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("oal_cli_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace oal::test
