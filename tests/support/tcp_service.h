// Test support: a TCP service on 127.0.0.1 that runs a handler per connection in
// its own thread and stops cleanly, the common part of the delaying proxy and the
// misbehaving HTTP server (http_fixtures.h). Every socket is non-blocking and
// every wait polls the service's stop descriptor too, so the destructor wakes
// each connection wherever it waits, then joins its thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>  // std::once_flag
#include <string>
#include <string_view>
#include <thread>

namespace mlbench::testing {

// Why a wait ended.
enum class Wait { kReady, kStopped, kTimedOut };

// Waits until `fd` has one of `events` (POLLIN, POLLOUT), the service stops
// (`stop_fd` readable) or `timeout` passes (negative: no timeout). POLLHUP and
// POLLERR count as ready: the next read or write says what happened.
Wait wait_for(int fd, short events, int stop_fd, std::chrono::microseconds timeout = std::chrono::microseconds(-1));

// Writes all of `data` to the non-blocking socket `fd`, waiting for room;
// false when the peer is gone or the service stops.
bool send_all(int fd, std::string_view data, int stop_fd);

// Reads what is there (waiting for something): the bytes read, 0 at the peer's
// end of stream, -1 on an error or when the service stops.
long recv_some(int fd, char* buffer, std::size_t size, int stop_fd);

// A listening socket on 127.0.0.1 and a thread per accepted connection.
class TcpService {
 public:
  // Called in the connection's own thread with the connected, non-blocking socket
  // (closed when the handler returns) and the stop descriptor to poll with it.
  using Handler = std::function<void(int fd, int stop_fd)>;

  // Listens on 127.0.0.1:`port` (0: a free port). Throws std::runtime_error
  // naming the address and the cause when it cannot.
  TcpService(int port, Handler handler);
  ~TcpService();  // stop()
  TcpService(const TcpService&) = delete;
  TcpService& operator=(const TcpService&) = delete;

  int port() const { return port_; }
  // Stops accepting, wakes every connection's waits, joins every thread. Idempotent.
  void stop();

 private:
  struct Connection {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  void accept_loop();
  void join_finished();

  Handler handler_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd, readable once stop() was called
  int port_ = 0;
  std::thread acceptor_;
  std::list<Connection> connections_;  // the acceptor's alone until stop() has joined it
  std::once_flag stopped_;
};

// "http://127.0.0.1:PORT" + path.
std::string loopback_url(int port, const std::string& path);

}  // namespace mlbench::testing
