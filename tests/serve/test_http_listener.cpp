// The accept loop of `oal serve` (serve/http_listener.h) over real loopback sockets:
// idle connections parked without a worker (many more than the workers), closed after
// keep_alive or evicted oldest first beyond max_idle; at most `workers` requests served
// and `max_waiting` waiting, one more refused at once with the fixed response, a refused
// client still sending not reset; a kept connection parked and served again; waiting
// connections closed unserved on stop; a port in use named in the error. Timings are
// generous upper bounds (the suite shares two cores); none of them is what a test
// measures.
#include <gtest/gtest.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "oal/core/error.h"
#include "oal/serve/http_listener.h"
#include "raw_socket.h"

using namespace oal;
using namespace std::chrono_literals;
using test::RawSocket;

namespace {

const std::string k_refusal = "BUSY";

// Each served request waits until open() before it is answered "served".
class Gate {
 public:
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return open_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(m_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool open_ = false;
};

// A listener on a free port, running on its own thread, serving through a gate.
struct Running {
  Gate gate;
  serve::HttpListener listener;
  std::thread thread;

  // keep_alive: long by default, so that no connection of a test expires while it runs
  // on a loaded machine; short where the expiry is what is tested.
  explicit Running(int workers, int max_waiting, int max_idle = 512, bool keep = false,
                   std::chrono::milliseconds keep_alive = 10000ms)
      : listener(options(workers, max_waiting, max_idle, keep_alive),
                 [this, keep](int fd, int& requests) { return serve_one(fd, requests, keep); },
                 k_refusal) {
    listener.bind();
    thread = std::thread([this] { listener.run(); });
  }
  ~Running() {
    gate.open();
    listener.stop();
    thread.join();
  }
  static serve::ListenerOptions options(int workers, int max_waiting, int max_idle,
                                        std::chrono::milliseconds keep_alive) {
    serve::ListenerOptions o;
    o.port = 0;
    o.workers = workers;
    o.max_waiting = max_waiting;
    o.max_idle = max_idle;
    o.keep_alive = keep_alive;
    return o;
  }
  // Reads the one-line request, waits for the gate, answers "served N" (N: requests
  // on this connection so far) and keeps the connection when `keep`.
  serve::AfterServe serve_one(int fd, int& requests, bool keep) {
    char request[64];
    if (::recv(fd, request, sizeof request, 0) <= 0) return serve::AfterServe::close;
    gate.wait();
    const std::string reply = "served " + std::to_string(++requests) + "\n";
    ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
    return keep ? serve::AfterServe::keep : serve::AfterServe::close;
  }
  // Waits (at most 5 s) until `serving` requests are served, `waiting` wait and `idle`
  // connections are parked.
  bool holds(int64_t serving, int64_t waiting, int64_t idle = 0) {
    for (auto until = std::chrono::steady_clock::now() + 5s;
         std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(5ms)) {
      const serve::ListenerStats s = listener.stats();
      if (s.serving == serving && s.waiting == waiting && s.idle == idle) return true;
    }
    return false;
  }
};

}  // namespace

TEST(HttpListener, IdleConnectionsHoldNoWorker) {
  Running r(/*workers=*/1, /*max_waiting=*/0, /*max_idle=*/512, /*keep=*/false, 1000ms);
  r.gate.open();
  std::vector<std::unique_ptr<RawSocket>> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(std::make_unique<RawSocket>(r.listener.port()));
  ASSERT_TRUE(r.holds(0, 0, 20));
  RawSocket c(r.listener.port());  // 20 idle connections and one worker: still served
  ASSERT_TRUE(c.send("hello\n"));
  EXPECT_EQ(c.read(5000ms), "served 1\n");
  bool closed = false;  // keep_alive 1 s: the idle ones are closed
  EXPECT_EQ(idle.front()->read(5000ms, {}, &closed), "");
  EXPECT_TRUE(closed);
  EXPECT_TRUE(r.holds(0, 0, 0));
  EXPECT_EQ(r.listener.stats().refused, 0);
}

TEST(HttpListener, BeyondMaxIdleTheLongestIdleIsClosed) {
  Running r(/*workers=*/1, /*max_waiting=*/0, /*max_idle=*/2);
  RawSocket a(r.listener.port());
  ASSERT_TRUE(r.holds(0, 0, 1));
  RawSocket b(r.listener.port()), c(r.listener.port());
  ASSERT_TRUE(r.holds(0, 0, 2));
  bool closed = false;
  EXPECT_EQ(a.read(2000ms, {}, &closed), "");
  EXPECT_TRUE(closed);
  EXPECT_EQ(r.listener.stats().evicted, 1);
}

TEST(HttpListener, RefusesOneRequestBeyondWorkersAndQueueAtOnce) {
  Running r(/*workers=*/1, /*max_waiting=*/1);
  RawSocket a(r.listener.port()), b(r.listener.port()), c(r.listener.port());
  ASSERT_TRUE(a.send("a\n"));
  ASSERT_TRUE(r.holds(1, 0, 2));
  ASSERT_TRUE(b.send("b\n"));
  ASSERT_TRUE(r.holds(1, 1, 1));
  ASSERT_TRUE(c.send("c\n"));
  bool closed = false;
  // At once: the refusal comes before any worker is free (the gate is still shut).
  EXPECT_EQ(c.read(5000ms, {}, &closed), k_refusal);
  EXPECT_TRUE(closed);
  serve::ListenerStats s = r.listener.stats();
  EXPECT_EQ(s.accepted, 3);
  EXPECT_EQ(s.refused, 1);
  r.gate.open();
  EXPECT_EQ(a.read(5000ms, {}, &closed), "served 1\n");
  EXPECT_TRUE(closed);  // the callback did not keep it
  EXPECT_EQ(b.read(5000ms, {}, &closed), "served 1\n");
  // Freed: the next request is served, not refused.
  RawSocket d(r.listener.port());
  ASSERT_TRUE(d.send("d\n"));
  EXPECT_EQ(d.read(5000ms), "served 1\n");
  EXPECT_EQ(r.listener.stats().refused, 1);
}

TEST(HttpListener, KeptConnectionIsParkedAndServedAgain) {
  Running r(/*workers=*/1, /*max_waiting=*/0, /*max_idle=*/512, /*keep=*/true);
  r.gate.open();
  RawSocket c(r.listener.port());
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(c.send("again\n"));
    EXPECT_EQ(c.read(5000ms, "\n"), "served " + std::to_string(i) + "\n");
    EXPECT_TRUE(r.holds(0, 0, 1));  // back among the idle, not holding the worker
  }
}

TEST(HttpListener, RefusedClientStillSendingIsNotReset) {
  // Closing a socket with unread input resets the connection, and a reset can drop the
  // response before the client reads it (Linux keeps what already arrived; other systems
  // and in-flight data do not). So a refused connection lingers, reading and dropping what
  // the client still sends: its sends keep succeeding. Closed at once instead, the
  // second send below fails with a reset.
  Running r(/*workers=*/1, /*max_waiting=*/0);
  RawSocket a(r.listener.port());
  ASSERT_TRUE(a.send("a\n"));
  ASSERT_TRUE(r.holds(1, 0));
  RawSocket c(r.listener.port());
  ASSERT_TRUE(c.send("c\n"));
  bool closed = false;
  EXPECT_EQ(c.read(5000ms, {}, &closed), k_refusal);
  EXPECT_TRUE(closed);  // the server's end is shut for writing
  const std::string body(65536, 'x');
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(c.send(body)) << "send " << i << " after the refusal: " << std::strerror(errno);
    std::this_thread::sleep_for(50ms);
  }
}

TEST(HttpListener, StopClosesWaitingConnectionsUnserved) {
  auto r = std::make_unique<Running>(/*workers=*/1, /*max_waiting=*/2);
  RawSocket a(r->listener.port()), b(r->listener.port()), idle(r->listener.port());
  ASSERT_TRUE(a.send("a\n"));
  ASSERT_TRUE(r->holds(1, 0, 2));
  ASSERT_TRUE(b.send("b\n"));
  ASSERT_TRUE(r->holds(1, 1, 1));
  r->listener.stop();
  for (RawSocket* s : {&b, &idle}) {
    bool closed = false;
    EXPECT_EQ(s->read(5000ms, {}, &closed), "");  // closed without an answer
    EXPECT_TRUE(closed);
  }
  r.reset();  // opens the gate: the request being served is finished, run() returns
  EXPECT_EQ(a.read(5000ms), "served 1\n");
}

TEST(HttpListener, APortInUseIsNamedInTheError) {
  Running r(1, 0);
  serve::ListenerOptions o;
  o.port = r.listener.port();
  serve::HttpListener second(o, [](int, int&) { return serve::AfterServe::close; }, k_refusal);
  try {
    second.bind();
    FAIL() << "bound a port that is in use";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(o.port)),
              std::string::npos)
        << e.what();
  }
}

TEST(HttpListener, RejectsImpossibleOptions) {
  serve::ListenerOptions o;
  o.workers = 0;
  EXPECT_THROW(serve::HttpListener(o, [](int, int&) { return serve::AfterServe::close; }, k_refusal), Error);
  o.workers = 1;
  o.max_idle = 0;
  EXPECT_THROW(serve::HttpListener(o, [](int, int&) { return serve::AfterServe::close; }, k_refusal), Error);
}
