#include "oal/dist/world.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <cstring>

#include "oal/core/error.h"

namespace oal::dist {
namespace {

constexpr std::string_view k_op = "dist";

class SingleProcess : public World {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<std::string> all_gather(const std::string& mine) override { return {mine}; }
  void all_reduce_sum(at::Tensor&) override {}
  void barrier() override {}
};

class GlooWorld : public World {
 public:
  GlooWorld(const std::string& addr, int port, int rank, int size, std::chrono::seconds timeout)
      : rank_(rank), size_(size) {
    try {
      c10d::TCPStoreOptions so;
      so.port = static_cast<uint16_t>(port);
      so.isServer = rank == 0;
      so.numWorkers = size;
      so.waitWorkers = true;
      so.timeout = timeout;
      auto store = c10::make_intrusive<c10d::TCPStore>(addr, so);
      auto o = c10d::ProcessGroupGloo::Options::create();
      o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(addr));
      o->timeout = timeout;
      pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, o);
    } catch (const std::exception& e) {
      fail(k_op, "rank {} of {} could not join the rendezvous at {}:{} within {} s: {}", rank,
           size, addr, port, timeout.count(), first_line(e.what()));
    }
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::vector<std::string> all_gather(const std::string& mine) override {
    // Sizes first, then the bytes padded to the longest (Gloo gathers equal shapes).
    at::Tensor n = at::tensor({static_cast<int64_t>(mine.size())}, at::kLong);
    std::vector<at::Tensor> sizes = gather(n, "all_gather (sizes)");
    int64_t longest = 0;
    for (const auto& s : sizes) longest = std::max(longest, s.item<int64_t>());
    at::Tensor buf = at::zeros({std::max<int64_t>(longest, 1)}, at::kByte);
    std::memcpy(buf.data_ptr<uint8_t>(), mine.data(), mine.size());
    std::vector<at::Tensor> bytes = gather(buf, "all_gather");
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r)
      out.emplace_back(reinterpret_cast<const char*>(bytes[r].data_ptr<uint8_t>()),
                       static_cast<size_t>(sizes[r].item<int64_t>()));
    return out;
  }

  void all_reduce_sum(at::Tensor& t) override {
    check(t.is_contiguous() && t.device().is_cpu(), k_op,
          "all_reduce: expected a contiguous CPU tensor");
    std::vector<at::Tensor> ts{t};
    wait([&] { return pg_->allreduce(ts); }, "all_reduce");
  }

  void barrier() override {
    wait([&] { return pg_->barrier(); }, "barrier");
  }

 private:
  static std::string first_line(const char* what) {
    std::string s(what);
    return s.substr(0, s.find('\n'));
  }

  template <typename Start>
  void wait(Start start, const char* what) {
    try {
      start()->wait();
    } catch (const std::exception& e) {
      fail(k_op, "{} failed on rank {} of {}: another rank was lost or timed out ({})", what,
           rank_, size_, first_line(e.what()));
    }
  }

  std::vector<at::Tensor> gather(const at::Tensor& t, const char* what) {
    std::vector<std::vector<at::Tensor>> out(1);
    for (int r = 0; r < size_; ++r) out[0].push_back(at::empty_like(t));
    std::vector<at::Tensor> in{t};
    wait([&] { return pg_->allgather(out, in); }, what);
    return out[0];
  }

  int rank_, size_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

int env_int(const char* name, int lo, int hi) {
  const char* v = std::getenv(name);
  check(v != nullptr && *v != '\0', k_op, "{} is not set (expected the torchrun-style "
        "MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)", name);
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  check(*end == '\0' && x >= lo && x <= hi, k_op, "{}='{}': expected an integer in [{}, {}]",
        name, v, lo, hi);
  return static_cast<int>(x);
}

}  // namespace

std::shared_ptr<World> single_process() { return std::make_shared<SingleProcess>(); }

std::shared_ptr<World> world_from_env(std::chrono::seconds timeout) {
  const char* ws = std::getenv("WORLD_SIZE");
  if (ws == nullptr || std::string(ws).empty() || std::string(ws) == "1") return single_process();
  const int size = env_int("WORLD_SIZE", 1, 65536);
  const int rank = env_int("RANK", 0, size - 1);
  const int port = env_int("MASTER_PORT", 1, 65535);
  const char* addr = std::getenv("MASTER_ADDR");
  check(addr != nullptr && *addr != '\0', k_op, "MASTER_ADDR is not set");
  return std::make_shared<GlooWorld>(addr, port, rank, size, timeout);
}

}  // namespace oal::dist
