// Test support: a TCP proxy on 127.0.0.1 that adds a fixed latency to every
// request, used by the HTTP tests (http_fixtures.h) and by mlbench-delay-proxy
// (the studies' latency runs). See NOTE [Latency without netem].
//
// NOTE [Latency without netem]
// The usual way to add latency on loopback, `tc qdisc add dev lo root netem delay
// 20ms`, fails on this kernel ("Specified qdisc kind is unknown": no sch_netem).
// The proxy stands in: each chunk the client sends is held `delay` after it
// arrived, then forwarded upstream; what upstream answers is forwarded at once.
// An HTTP/1.1 client that sends a request and waits for its answer (keep-alive,
// no pipelining) thus pays `delay` more per request, as with a distant server;
// chunks are held each from its own arrival, so requests in flight on many
// connections, or one request's chunks, overlap their waits (a latency, not a
// throughput limit). Bandwidth is not limited here: nginx's limit_rate does that.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "tests/support/tcp_service.h"

namespace mlbench::testing {

class DelayProxy {
 public:
  // Listens on 127.0.0.1:`listen_port` (0: a free one) and forwards every
  // connection to upstream_host:upstream_port (a name or an address, resolved
  // now). Throws std::runtime_error with one line naming what failed (an
  // unknown host, a port in use).
  DelayProxy(std::string upstream_host, int upstream_port, std::chrono::microseconds delay, int listen_port = 0);
  ~DelayProxy();  // closes every connection it holds, joins its threads
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  int port() const;
  std::string url(const std::string& path = "/") const;  // "http://127.0.0.1:PORT" + path
  // Connections accepted so far, and those of them upstream refused (closed at once).
  int connections() const { return connections_.load(); }
  int upstream_failures() const { return upstream_failures_.load(); }

 private:
  void relay(int client_fd, int stop_fd);

  std::string upstream_host_;
  int upstream_port_;
  std::chrono::microseconds delay_;
  sockaddr_storage upstream_addr_{};  // resolved once, by the constructor
  socklen_t upstream_addr_len_ = 0;
  std::atomic<int> connections_{0};
  std::atomic<int> upstream_failures_{0};
  std::unique_ptr<TcpService> service_;  // last: stopped first, while the members above still exist
};

}  // namespace mlbench::testing
