#include "launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>

#include "oal/core/error.h"

namespace oal::cli {
namespace {

constexpr std::string_view k_op = "launch";

// A port the kernel reports free on 127.0.0.1 now (rank 0 binds it moments later).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  check(fd >= 0, k_op, "cannot open a socket to find a free port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  check(ok, k_op, "cannot find a free port on 127.0.0.1");
  return ntohs(a.sin_port);
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped";
}

}  // namespace

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] == '\0') {
      args.push_back(all.substr(start, i - start));
      start = i + 1;
    }
  check(!args.empty(), k_op, "cannot read /proc/self/cmdline");
  return args;
}

bool ran_as_launcher(int nproc) {
  if (nproc <= 1 || std::getenv("WORLD_SIZE") != nullptr) return false;
  launch_local_ranks(without_nproc(own_command_line()), nproc);
  return true;
}

void exit_if_fault_injected(int rank) {
  const char* v = std::getenv("OAL_FAULT_EXIT_RANK");
  if (v != nullptr && std::to_string(rank) == v) ::_exit(3);
}

std::vector<std::string> without_nproc(std::vector<std::string> args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc") {
      ++i;
      continue;
    }
    if (args[i].rfind("--nproc=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

void launch_local_ranks(const std::vector<std::string>& args, int nproc) {
  check(nproc >= 1 && nproc <= 256, k_op, "--nproc: expected 1..256, got {}", nproc);
  const int port = free_port();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const bool threads_set = std::getenv("OAL_THREADS") != nullptr;
  std::vector<pid_t> pids;
  for (int r = 0; r < nproc; ++r) {
    const pid_t pid = ::fork();
    check(pid >= 0, k_op, "fork failed for rank {}", r);
    if (pid == 0) {
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      if (!threads_set)
        ::setenv("OAL_THREADS", std::to_string(std::max(1u, cores / unsigned(nproc))).c_str(), 1);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv("/proc/self/exe", argv.data());
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  // Wait for all; the first failure stops the others (they would wait for it until the
  // rendezvous timeout otherwise).
  std::string failure;
  for (size_t left = pids.size(); left > 0; --left) {
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, 0);
    if (done < 0) break;
    const auto it = std::find(pids.begin(), pids.end(), done);
    if (it == pids.end()) continue;
    const int rank = int(it - pids.begin());
    *it = -1;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && failure.empty()) {
      failure =
          "rank " + std::to_string(rank) + " of " + std::to_string(nproc) + " " + describe(status);
      for (pid_t p : pids)
        if (p > 0) ::kill(p, SIGTERM);
    }
  }
  check(failure.empty(), k_op, "{}; the run was stopped and nothing was written", failure);
}

}  // namespace oal::cli
