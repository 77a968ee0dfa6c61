// Test support: the loopback TCP service of tcp_service.h.
#include "tests/support/tcp_service.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace mlbench::testing {

Wait wait_for(int fd, short events, int stop_fd, std::chrono::microseconds timeout) {
  pollfd fds[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
  timespec ts{};
  if (timeout.count() >= 0) {
    ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
    ts.tv_nsec = static_cast<long>(timeout.count() % 1000000) * 1000;
  }
  for (;;) {
    const int n = ::ppoll(fds, 2, timeout.count() >= 0 ? &ts : nullptr, nullptr);
    if (n < 0 && errno == EINTR) continue;  // ppoll leaves the time left to the caller: a rare early wake is fine
    if (n < 0) return Wait::kStopped;
    if (fds[1].revents != 0) return Wait::kStopped;
    if (n == 0) return Wait::kTimedOut;
    return Wait::kReady;
  }
}

bool send_all(int fd, std::string_view data, int stop_fd) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (wait_for(fd, POLLOUT, stop_fd) != Wait::kReady) return false;
      continue;
    }
    return false;
  }
  return true;
}

long recv_some(int fd, char* buffer, std::size_t size, int stop_fd) {
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, size, 0);
    if (n >= 0) return static_cast<long>(n);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    if (wait_for(fd, POLLIN, stop_fd) != Wait::kReady) return -1;
  }
}

TcpService::TcpService(int port, Handler handler) : handler_(std::move(handler)) {
  const std::string where = "127.0.0.1:" + std::to_string(port);
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("cannot make a socket: " + std::string(std::strerror(errno)));
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, SOMAXCONN) != 0) {
    const std::string cause = std::strerror(errno);
    ::close(listen_fd_);
    throw std::runtime_error("cannot listen on " + where + ": " + cause);
  }
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd_ < 0) {
    const std::string cause = std::strerror(errno);
    ::close(listen_fd_);
    throw std::runtime_error("cannot make an eventfd: " + cause);
  }
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpService::~TcpService() {
  stop();
}

void TcpService::stop() {
  std::call_once(stopped_, [this] {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(stop_fd_, &one, sizeof(one));
    acceptor_.join();
    // The acceptor has ended: nothing adds to the list any more.
    for (Connection& c : connections_) c.thread.join();
    connections_.clear();
    ::close(listen_fd_);
    ::close(stop_fd_);
  });
}

void TcpService::accept_loop() {
  for (;;) {
    if (wait_for(listen_fd_, POLLIN, stop_fd_) != Wait::kReady) return;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) continue;  // EAGAIN, a connection reset before it was accepted, out of descriptors: try again
    join_finished();
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread t([this, fd, done] {
      handler_(fd, stop_fd_);
      ::close(fd);
      done->store(true);
    });
    connections_.push_back({std::move(t), std::move(done)});
  }
}

// Joins the threads of connections that have ended, so that a long-running
// service (mlbench-delay-proxy) does not accumulate them.
void TcpService::join_finished() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

std::string loopback_url(int port, const std::string& path) {
  return "http://127.0.0.1:" + std::to_string(port) + path;
}

}  // namespace mlbench::testing
