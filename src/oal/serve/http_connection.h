#pragma once
// The requests that have arrived on a connection, served through cpp-httplib's request
// parser, routes and response writer (httplib::Server::process_request), with our own
// timeouts: http_listener.h accepts and parks connections between requests, this reads
// and answers. A whole request (line, headers, body) must arrive within
// `request_deadline`, so a client that sends one byte a second cannot hold a worker for
// ever.
#include <atomic>
#include <chrono>
#include <string>

#include <httplib.h>

#include "oal/serve/http_listener.h"

namespace oal::serve {

struct ConnectionLimits {
  std::chrono::milliseconds read_timeout{5000};   // one read waits at most this
  std::chrono::milliseconds write_timeout{5000};  // one write waits at most this
  std::chrono::milliseconds request_deadline{30000};  // to read one whole request
  int max_requests = 100;  // per connection, then closed
};

// httplib's Server with its routes, serving connections accepted elsewhere.
class RoutedHttp : public httplib::Server {
 public:
  // httplib streams a chunked answer only while its listening socket is valid, which is
  // its sign of a running server; the listening socket here is the listener's, so a
  // stand-in (never used as a descriptor: httplib only closes it from listen()) says
  // "running" until shut_down().
  RoutedHttp() { svr_sock_ = 0; }
  // Streamed answers stop at their next chunk (the server is stopping).
  void shut_down() { svr_sock_ = INVALID_SOCKET; }
  // Bodies are read only when their size is announced and at most max_bytes: a request
  // whose Content-Length exceeds it gets 413, and one that may carry a body without a
  // Content-Length (POST, PUT, PATCH, DELETE, PRI: chunked, or read until the client closes,
  // which cpp-httplib 0.11.4 buffers whole, whatever its size) gets 411. Either is
  // answered as soon as the headers are read, the body unread (also in place of
  // "100 Continue" for a client that asked), with the status set and the rest of the
  // answer from `answer` (the server's error body); the connection then lingers and
  // closes. Also httplib's payload_max_length (what a malformed Content-Length meets).
  // Call before serving.
  void limit_bodies(size_t max_bytes, Handler answer);
  // Serves the requests on fd (a connected, blocking socket whose next request has begun
  // to arrive) while their bytes keep coming without a wait, adding each to `requests`.
  // keep: the connection may stay open for another request; close: the client closed,
  // asked to close, max_requests were answered, a request missed its deadline or stopping
  // is set; linger: a body was refused unread. A request whose first line did not arrive
  // in time is answered with timeout_response (the server's 408); one cut in its headers
  // or body, with httplib's 400 through the error handler. Does not close fd.
  AfterServe serve_connection(int fd, int& requests, const ConnectionLimits& limits,
                              const std::atomic<bool>& stopping,
                              const std::string& timeout_response);
};

}  // namespace oal::serve
