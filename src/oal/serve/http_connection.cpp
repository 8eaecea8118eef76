#include "oal/serve/http_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace oal::serve {
namespace {

using Clock = std::chrono::steady_clock;
int64_t ms_until(Clock::time_point t) {
  return std::max<int64_t>(
      0, std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count());
}

bool poll_one(int fd, short events, int64_t timeout_ms) {
  pollfd p{fd, events, 0};
  int r;
  do r = ::poll(&p, 1, static_cast<int>(timeout_ms));
  while (r < 0 && errno == EINTR);
  return r > 0;
}

// The address `name` (getpeername or getsockname) gives for fd, as text and port.
void ip_and_port(int fd, int (*name)(int, sockaddr*, socklen_t*), std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (name(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    port = ntohs(a->sin6_port);
  }
  ip = text;
}

// A socket as httplib's Stream: reads buffered (httplib reads request lines a byte at a
// time), each read waiting at most read_timeout and never past the request's deadline.
class SocketStream final : public httplib::Stream {
 public:
  SocketStream(int fd, const ConnectionLimits& limits) : fd_(fd), limits_(limits) {
    timeval tv{};
    tv.tv_sec = limits.write_timeout.count() / 1000;
    tv.tv_usec = (limits.write_timeout.count() % 1000) * 1000;
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // bounds each send()
  }

  // A new request starts: it must be read whole by now + request_deadline.
  void start_request() {
    deadline_ = Clock::now() + limits_.request_deadline;
    missed_deadline_ = false;
    written_ = 0;
  }
  bool missed_deadline() const { return missed_deadline_; }
  size_t written() const { return written_; }
  bool has_buffered() const { return begin_ < end_; }

  bool is_readable() const override { return has_buffered() || wait_readable(); }
  bool is_writable() const override {
    return poll_one(fd_, POLLOUT, limits_.write_timeout.count()) && !peer_closed();
  }
  ssize_t read(char* ptr, size_t size) override {
    if (!has_buffered()) {
      if (!wait_readable()) return -1;
      ssize_t n;
      do n = ::recv(fd_, buffer_, sizeof buffer_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;  // 0: the client closed; < 0: an error
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    ssize_t n;
    do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n > 0) written_ += static_cast<size_t>(n);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip_and_port(fd_, ::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip_and_port(fd_, ::getsockname, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  // Data arrived within read_timeout and before the deadline.
  bool wait_readable() const {
    const int64_t left = ms_until(deadline_);
    const int64_t wait = std::min<int64_t>(limits_.read_timeout.count(), left);
    if (wait > 0 && poll_one(fd_, POLLIN, wait)) return true;
    if (Clock::now() >= deadline_) missed_deadline_ = true;
    return false;
  }
  // The client has closed its end (a streamed answer's reader went away).
  bool peer_closed() const {
    if (!poll_one(fd_, POLLIN, 0)) return false;
    char byte;
    return ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }

  int fd_;
  const ConnectionLimits& limits_;
  Clock::time_point deadline_ = Clock::time_point::max();
  mutable bool missed_deadline_ = false;
  size_t written_ = 0;
  char buffer_[4096];
  size_t begin_ = 0, end_ = 0;
};

// Set by limit_bodies's handlers when they answer a request whose body is left unread;
// read and cleared by serve_connection. Thread-local: httplib runs a request's handlers
// on the thread that called process_request.
thread_local bool body_refused = false;

// The status a request gets before its body is read: 413 when its Content-Length exceeds
// max_bytes, 411 when it may carry a body of unannounced size, 0 when it may go on (a
// malformed Content-Length is left to httplib, which answers 400).
int body_refusal(const httplib::Request& req, size_t max_bytes) {
  if (req.has_header("Content-Length")) {
    const std::string len = req.get_header_value("Content-Length");
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(len.data(), len.data() + len.size(), n);
    const bool parsed = ec == std::errc() && end == len.data() + len.size() && !len.empty();
    return parsed && n > max_bytes ? 413 : 0;
  }
  // The methods whose body httplib reads even without a length (its expect_content).
  const bool may_have_body = req.method == "POST" || req.method == "PUT" ||
                             req.method == "PATCH" || req.method == "DELETE" ||
                             req.method == "PRI";
  return may_have_body || req.has_header("Transfer-Encoding") ? 411 : 0;
}

}  // namespace

void RoutedHttp::limit_bodies(size_t max_bytes, Handler answer) {
  set_payload_max_length(max_bytes);  // httplib's own check, behind ours
  auto refuse = [max_bytes, answer](const httplib::Request& req, httplib::Response& res) {
    const int status = body_refusal(req, max_bytes);
    if (status == 0) return 0;
    res.status = status;
    answer(req, res);
    res.set_header("Connection", "close");
    body_refused = true;
    return status;
  };
  set_pre_routing_handler([refuse](const httplib::Request& req, httplib::Response& res) {
    return refuse(req, res) ? HandlerResponse::Handled : HandlerResponse::Unhandled;
  });
  set_expect_100_continue_handler(
      [refuse](const httplib::Request& req, httplib::Response& res) {
        const int status = refuse(req, res);
        return status ? status : 100;
      });
}

AfterServe RoutedHttp::serve_connection(int fd, int& requests, const ConnectionLimits& limits,
                                        const std::atomic<bool>& stopping,
                                        const std::string& timeout_response) {
  SocketStream stream(fd, limits);
  do {
    stream.start_request();
    const bool last = stopping || requests + 1 >= limits.max_requests;
    bool closed = false;
    body_refused = false;
    const bool answered = process_request(stream, last, closed, nullptr);
    ++requests;
    if (body_refused) return AfterServe::linger;
    if (stream.missed_deadline() && stream.written() == 0)
      stream.write(timeout_response.data(), timeout_response.size());
    if (!answered || closed || last || stream.missed_deadline()) return AfterServe::close;
  } while (stream.has_buffered());  // pipelined: the next request is read already
  return AfterServe::keep;
}

}  // namespace oal::serve
