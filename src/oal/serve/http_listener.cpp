#include "oal/serve/http_listener.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "oal/core/error.h"

namespace oal::serve {
namespace {

// Refused connections kept lingering at once; beyond, the oldest is closed (its client may
// then see a reset instead of the 503). Each holds a file descriptor for at most `linger`.
constexpr size_t k_max_lingering = 128;
// After accept() ran out of file descriptors, the listening socket rests this long (the
// connection stays in the kernel's backlog) instead of spinning on it.
constexpr auto k_fd_pause = std::chrono::milliseconds(100);

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The first address of host:port that binds and listens, or -1.
int listen_on(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found) != 0)
    return -1;
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) close_fd(fd);
  }
  ::freeaddrinfo(found);
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

// The client has closed (or reset) its end and sent nothing more.
bool client_gone(int fd) {
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace

HttpListener::HttpListener(ListenerOptions options, ServeConnection serve, std::string refusal)
    : options_(std::move(options)), serve_(std::move(serve)), refusal_(std::move(refusal)) {
  check(options_.workers >= 1 && options_.max_waiting >= 0 && options_.max_idle >= 1, "serve",
        "the listener needs at least 1 worker, 0 or more waiting and 1 or more idle "
        "connections, got {}, {} and {}",
        options_.workers, options_.max_waiting, options_.max_idle);
}

HttpListener::~HttpListener() {
  stop();
  for (std::thread& t : workers_)
    if (t.joinable()) t.join();
  close_fd(listen_fd_);
  close_fd(wake_fd_);
}

void HttpListener::bind() {
  check(listen_fd_ < 0, "serve", "the listener is bound already (port {})", port_);
  listen_fd_ = listen_on(options_.host, options_.port);
  check(listen_fd_ >= 0, "serve",
        "could not listen on {}:{} (in use, or not an address of this machine); pick another "
        "--port or --host",
        options_.host, options_.port);
  port_ = bound_port(listen_fd_);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  check(wake_fd_ >= 0, "serve", "eventfd failed: {}", std::strerror(errno));
}

void HttpListener::wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void HttpListener::stop() {
  stopping_ = true;
  wake();
  std::lock_guard<std::mutex> lock(mutex_);
  ready_.notify_all();
}

ListenerStats HttpListener::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {idle_count_, serving_, static_cast<int64_t>(waiting_.size()), accepted_, refused_,
          evicted_};
}

void HttpListener::run() {
  check(listen_fd_ >= 0, "serve", "run() before bind()");
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { worker(); });
  Clock::time_point accept_paused_until{};
  std::vector<pollfd> fds;
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    const bool accepting = now >= accept_paused_until;
    fds.assign({{wake_fd_, POLLIN, 0}, {accepting ? listen_fd_ : -1, POLLIN, 0}});
    Clock::time_point wake_at = accepting ? Clock::time_point::max() : accept_paused_until;
    for (const Conn& c : idle_) fds.push_back({c.fd, POLLIN, 0});
    for (const Conn& c : lingering_) fds.push_back({c.fd, POLLIN, 0});
    if (!idle_.empty()) wake_at = std::min(wake_at, idle_.front().until);
    for (const Conn& c : lingering_) wake_at = std::min(wake_at, c.until);
    const int timeout_ms =
        wake_at == Clock::time_point::max()
            ? -1
            : static_cast<int>(std::max<int64_t>(
                  0, std::chrono::ceil<std::chrono::milliseconds>(wake_at - now).count()));
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
    if (fds[0].revents) {
      uint64_t n;
      [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &n, sizeof n);
      if (stopping_) break;
    }
    dispatch_ready(fds);
    std::vector<Conn> back;
    std::vector<int> answered;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      back.swap(returned_);
      answered.swap(to_linger_);
    }
    for (Conn& c : back) park(c);
    for (int fd : answered) linger(fd);
    if ((fds[1].revents & POLLIN) && !accept_ready())
      accept_paused_until = Clock::now() + k_fd_pause;
    expire_idle();
    drain_lingering();
    std::lock_guard<std::mutex> lock(mutex_);
    idle_count_ = static_cast<int64_t>(idle_.size());
  }
  stopping_ = true;
  close_fd(listen_fd_);  // new connections are refused by the kernel from here on
  for (Conn& c : idle_) close_fd(c.fd);
  for (Conn& c : lingering_) close_fd(c.fd);
  idle_.clear();
  lingering_.clear();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Conn& c : waiting_) close_fd(c.fd);
    waiting_.clear();
    idle_count_ = 0;
    ready_.notify_all();
  }
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  for (Conn& c : returned_) close_fd(c.fd);  // workers are gone: no lock needed
  for (int fd : to_linger_) close_fd(fd);
  returned_.clear();
  to_linger_.clear();
}

void HttpListener::dispatch_ready(const std::vector<pollfd>& fds) {
  // fds[2 + i] polled idle_[i]: idle_ has not changed since.
  std::deque<Conn> still_idle;
  for (size_t i = 0; i < idle_.size(); ++i) {
    Conn& c = idle_[i];
    if (!fds[2 + i].revents)
      still_idle.push_back(c);
    else if (client_gone(c.fd))
      close_fd(c.fd);
    else
      dispatch(c);
  }
  idle_.swap(still_idle);
}

bool HttpListener::accept_ready() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      const int on = 1;
      // Streamed tokens are small writes: send each at once rather than after the last ACK.
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++accepted_;
      }
      park({fd, 0, {}});
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if ((errno == EMFILE || errno == ENFILE) && !(lingering_.empty() && idle_.empty())) {
      // Out of descriptors: give up a refused connection's linger, or the longest idle one.
      std::vector<Conn>::iterator l = lingering_.begin();
      if (l != lingering_.end()) {
        close_fd(l->fd);
        lingering_.erase(l);
      } else {
        close_fd(idle_.front().fd);
        idle_.pop_front();
        std::lock_guard<std::mutex> lock(mutex_);
        ++evicted_;
      }
      continue;
    }
    return errno != EMFILE && errno != ENFILE;  // EAGAIN: nothing more pending
  }
}

void HttpListener::park(Conn c) {
  if (idle_.size() >= static_cast<size_t>(options_.max_idle)) {
    close_fd(idle_.front().fd);  // the longest idle makes room
    idle_.pop_front();
    std::lock_guard<std::mutex> lock(mutex_);
    ++evicted_;
  }
  c.until = Clock::now() + options_.keep_alive;
  idle_.push_back(c);
}

void HttpListener::dispatch(Conn c) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t held = serving_ + static_cast<int64_t>(waiting_.size());
    if (held < options_.workers + options_.max_waiting) {
      waiting_.push_back(c);
      ready_.notify_one();
      return;
    }
    ++refused_;
  }
  refuse(c.fd);
}

void HttpListener::refuse(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  // A socket's send buffer holds a short response whole; if not, the client gets less.
  [[maybe_unused]] const ssize_t n = ::send(fd, refusal_.data(), refusal_.size(), MSG_NOSIGNAL);
  linger(fd);
}

void HttpListener::linger(int fd) {
  ::shutdown(fd, SHUT_WR);  // drain_lingering reads with MSG_DONTWAIT
  if (lingering_.size() >= k_max_lingering) {
    close_fd(lingering_.front().fd);
    lingering_.erase(lingering_.begin());
  }
  lingering_.push_back({fd, 0, Clock::now() + options_.linger});
}

void HttpListener::expire_idle() {
  const Clock::time_point now = Clock::now();
  while (!idle_.empty() && idle_.front().until <= now) {  // idle_ is ordered by `until`
    close_fd(idle_.front().fd);
    idle_.pop_front();
  }
}

void HttpListener::drain_lingering() {
  const Clock::time_point now = Clock::now();
  char scratch[4096];
  auto done = [&](Conn& l) {
    if (now >= l.until) return true;
    for (;;) {  // drop what the client sent; its end (0) or an error ends the linger
      const ssize_t n = ::recv(l.fd, scratch, sizeof scratch, MSG_DONTWAIT);
      if (n > 0) continue;
      return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
  };
  auto end = std::remove_if(lingering_.begin(), lingering_.end(), [&](Conn& l) {
    if (!done(l)) return false;
    close_fd(l.fd);
    return true;
  });
  lingering_.erase(end, lingering_.end());
}

void HttpListener::worker() {
  for (;;) {
    Conn c;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
      if (waiting_.empty()) return;  // stopping
      c = waiting_.front();
      waiting_.pop_front();
      ++serving_;
    }
    AfterServe after = AfterServe::close;
    try {
      after = serve_(c.fd, c.requests);
    } catch (...) {
      // The callback answers its own errors; one escaping ends this connection only.
    }
    std::lock_guard<std::mutex> lock(mutex_);
    --serving_;
    if (after == AfterServe::keep && !stopping_) {
      returned_.push_back(c);
      wake();
    } else if (after == AfterServe::linger && !stopping_) {
      to_linger_.push_back(c.fd);
      wake();
    } else {
      close_fd(c.fd);
    }
  }
}

}  // namespace oal::serve
