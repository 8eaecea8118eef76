// The bytes a client sends on one connection to `oal serve`, read by our socket stream
// and deadlines and parsed by cpp-httplib (serve/http_connection.h): pipelined requests,
// bodies announced over the limit or of unannounced size, "Expect: 100-continue", cut
// headers. The input is written whole to one end of a socket pair and that end shut, so
// every read ends; whatever the server writes back must be empty or begin with a status
// line, and serving must end (never a crash, a hang or an escaped exception).
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "oal/serve/http_connection.h"

namespace {

// The routes of tests/serve/test_http_connection.cpp, with a 64-byte body limit.
oal::serve::RoutedHttp& routed() {
  static oal::serve::RoutedHttp* http = [] {
    auto* h = new oal::serve::RoutedHttp;
    h->limit_bodies(64, [](const httplib::Request&, httplib::Response& res) {
      res.set_content("refused", "text/plain");
    });
    h->Get("/hello", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("hi", "text/plain");
    });
    h->Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.body, "text/plain");
    });
    return h;
  }();
  return *http;
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A socket pair's buffer holds this much whole, so writing it never blocks.
  if (size > 16384) return 0;
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 0;
  const int client = fds[0], server = fds[1];
  if (size > 0 && ::send(client, data, size, MSG_NOSIGNAL) != static_cast<ssize_t>(size)) std::abort();
  ::shutdown(client, SHUT_WR);

  oal::serve::ConnectionLimits limits;  // short: a request cut short ends at once anyway
  limits.read_timeout = std::chrono::milliseconds(20);
  limits.write_timeout = std::chrono::milliseconds(20);
  limits.request_deadline = std::chrono::milliseconds(50);
  limits.max_requests = 4;
  const std::atomic<bool> stopping{false};
  int requests = 0;
  const std::string timeout = "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n";
  (void)routed().serve_connection(server, requests, limits, stopping, timeout);
  if (requests < 1 || requests > limits.max_requests) std::abort();

  const std::string answer = read_all(client);
  if (!answer.empty() && answer.rfind("HTTP/1.1 ", 0) != 0) std::abort();
  ::close(client);
  ::close(server);
  return 0;
}
