#pragma once
// `--nproc N` for commands that run as several processes (dist/world.h): this process
// becomes a launcher that starts N copies of the same command line as local ranks, the
// way torchrun does (MASTER_ADDR=127.0.0.1, a free MASTER_PORT, RANK, WORLD_SIZE; each
// rank gets OAL_THREADS = cores / N unless OAL_THREADS is set), waits for them, and
// fails naming the first rank that did not exit cleanly (the others are stopped).
#include <string>
#include <vector>

namespace oal::cli {

// The process's own command line (from /proc/self/cmdline).
std::vector<std::string> own_command_line();

// Runs `args` (argv[0] first, without --nproc) as `nproc` local ranks. Returns when every
// rank exited with status 0; throws oal::Error("launch") otherwise.
void launch_local_ranks(const std::vector<std::string>& args, int nproc);

// The prelude of every command with --nproc: when `nproc` > 1 and this process is not a
// rank yet (no WORLD_SIZE), runs the command line as `nproc` local ranks and returns
// true (the caller is done); otherwise false (the caller runs as itself / its rank).
bool ran_as_launcher(int nproc);

// Test hook: exits with status 3 when OAL_FAULT_EXIT_RANK names `rank` (a rank lost
// after the rendezvous, for the tests of what the others and the launcher do).
void exit_if_fault_injected(int rank);

// Removes "--nproc N" / "--nproc=N" from a command line.
std::vector<std::string> without_nproc(std::vector<std::string> args);

}  // namespace oal::cli
