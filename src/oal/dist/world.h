#pragma once
// The processes of one run and what they share, over LibTorch's own c10d: rendezvous
// through c10d::TCPStore (rank 0 hosts it), collectives through ProcessGroupGloo — the
// layer PyTorch's DDP uses. Launched like torchrun: every process gets MASTER_ADDR,
// MASTER_PORT, RANK and WORLD_SIZE (`oal ... --nproc N` sets them for local ranks).
// No c10d type appears in this header (its headers are heavy and need Gloo's).
#include <ATen/ATen.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace oal::dist {

class World {
 public:
  virtual ~World() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank's bytes in rank order; every rank calls it. Throws oal::Error("dist")
  // naming the operation when a rank is lost (its connection closes or the timeout
  // passes).
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
  // Element-wise sum over ranks, in place, of a contiguous CPU fp32/fp64 tensor.
  virtual void all_reduce_sum(at::Tensor& t) = 0;
  virtual void barrier() = 0;
};

// One process: rank 0 of 1; collectives return their input.
std::shared_ptr<World> single_process();

// From the environment: single_process() when WORLD_SIZE is unset or 1; otherwise joins
// the rendezvous at MASTER_ADDR:MASTER_PORT as RANK. Throws oal::Error("dist") for a
// missing or malformed variable, or when the other ranks do not arrive within `timeout`.
std::shared_ptr<World> world_from_env(std::chrono::seconds timeout = std::chrono::seconds(300));

}  // namespace oal::dist
