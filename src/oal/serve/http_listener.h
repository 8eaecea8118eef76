#pragma once
// The accept loop of `oal serve`. Open connections with no request pending are parked:
// one poll() watches them all (at most `max_idle`; beyond, the longest idle is closed),
// so an idle or keep-alive connection costs a file descriptor, not a thread. A parked
// connection whose request starts arriving goes to one of `workers` threads, or waits for
// one if they are all busy (at most `max_waiting`); one more is answered at once with a
// fixed response (the server's 503) and closed. After its request(s), the worker hands
// the connection back to be parked again.
// Ours rather than cpp-httplib's listen(): Debian's cpp-httplib 0.11.4 gives each
// accepted connection a thread from an unbounded queue, where an idle connection holds a
// thread until its keep-alive ends and nothing can be refused.
// Knows nothing of HTTP: a connection's requests are served by a callback
// (http_connection.h).
#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace oal::serve {

struct ListenerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port (see port())
  int workers = 64;     // connections whose requests are served at once
  int max_waiting = 64; // connections with a request, waiting for a worker; beyond: refused
  int max_idle = 512;   // parked connections; beyond, the longest idle is closed
  // A parked connection with no request for this long is closed (also a new one).
  std::chrono::milliseconds keep_alive{2000};
  // A refused connection is kept this long after its response (reading and dropping what
  // the client still sends) so that closing it does not reset the response away.
  std::chrono::milliseconds linger{1000};
};

struct ListenerStats {
  int64_t idle = 0;      // parked: open, no request pending
  int64_t serving = 0;   // a worker is serving its request
  int64_t waiting = 0;   // a request is pending, waiting for a worker
  int64_t accepted = 0;  // connections accepted since the start
  int64_t refused = 0;   // requests answered with the refusal (the connection closed)
  int64_t evicted = 0;   // idle connections closed to make room for a new one
};

// What becomes of a connection after its request(s) were served.
enum class AfterServe {
  keep,    // parked again for its next request
  close,   // closed now
  linger,  // answered before its request was read whole (a body refused): kept for
           // ListenerOptions::linger reading and dropping what the client still sends,
           // then closed, so that the close does not reset the answer away
};

class HttpListener {
 public:
  // serve(fd, requests): serves the request(s) that have arrived on fd (a blocking
  // socket), adding to `requests` (this connection's count so far).
  using ServeConnection = std::function<AfterServe(int fd, int& requests)>;

  // refusal: the bytes written to a refused connection.
  HttpListener(ListenerOptions options, ServeConnection serve, std::string refusal);
  ~HttpListener();  // stop(), then waits for the workers
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Binds and listens. Throws oal::Error("[serve] ...") naming host:port when it cannot.
  void bind();
  int port() const { return port_; }
  // Accepts and parks until stop(); then closes the idle and waiting connections and
  // returns when the workers have finished the requests they were serving.
  void run();
  // From any thread (not from a signal handler). Idempotent.
  void stop();
  // Set by stop(): a connection being served should end after its current request.
  const std::atomic<bool>& stopping() const { return stopping_; }
  ListenerStats stats() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Conn {
    int fd = -1;
    int requests = 0;          // served on this connection so far
    Clock::time_point until;   // idle: closed then; lingering: closed then
  };

  // Idle connections that poll() found readable (fds[2 + i] for idle_[i]) dispatched,
  // or closed when the client has gone.
  void dispatch_ready(const std::vector<pollfd>& fds);
  bool accept_ready();  // accepts every pending connection; false: out of descriptors
  void park(Conn c);    // accept loop only
  void dispatch(Conn c);  // a request arrived: to a worker's queue, or refused
  void refuse(int fd);    // writes the refusal and starts lingering
  void linger(int fd);    // accept loop only: fd's answer is written; closed after the linger
  void expire_idle();
  void drain_lingering();
  void worker();
  void wake();  // the accept loop's poll returns

  ListenerOptions options_;
  ServeConnection serve_;
  std::string refusal_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stop() and returned connections wake the accept loop
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> workers_;
  std::deque<Conn> idle_;        // accept loop only; oldest first
  std::vector<Conn> lingering_;  // accept loop only

  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Conn> waiting_;   // a request pending; guarded by mutex_
  std::vector<Conn> returned_; // served, to be parked again; guarded by mutex_
  std::vector<int> to_linger_; // served, to linger then close; guarded by mutex_
  int64_t idle_count_ = 0, serving_ = 0, accepted_ = 0, refused_ = 0, evicted_ = 0;  // mutex_
};

}  // namespace oal::serve
