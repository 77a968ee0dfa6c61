// Test support: the delaying TCP proxy of delay_proxy.h (NOTE [Latency without netem]).
#include "tests/support/delay_proxy.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <vector>

namespace mlbench::testing {

namespace {

using Clock = std::chrono::steady_clock;

// What one connection holds back or has not yet written: a few MiB in each
// direction, then it stops reading that side (the sender waits, as on a slow link).
constexpr std::size_t kBufferCap = 4u << 20;
constexpr std::size_t kReadSize = 64u << 10;
constexpr auto kConnectTimeout = std::chrono::seconds(10);

// A chunk the client sent, forwarded upstream at `due`.
struct Chunk {
  Clock::time_point due;
  std::string bytes;
  std::size_t sent = 0;
};

void no_delay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

enum class Io { kProgress, kWouldBlock, kFailed };

// One non-blocking send of what is left of `data` from `*sent`.
Io send_some(int fd, const std::string& data, std::size_t* sent) {
  for (;;) {
    const ssize_t n = ::send(fd, data.data() + *sent, data.size() - *sent, MSG_NOSIGNAL);
    if (n >= 0) {
      *sent += static_cast<std::size_t>(n);
      return Io::kProgress;
    }
    if (errno == EINTR) continue;
    return (errno == EAGAIN || errno == EWOULDBLOCK) ? Io::kWouldBlock : Io::kFailed;
  }
}

// One non-blocking read appended to `out`; sets *eof at the peer's end of stream.
Io recv_into(int fd, std::string& out, std::vector<char>& buffer, bool* eof) {
  for (;;) {
    const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
    if (n > 0) {
      out.append(buffer.data(), static_cast<std::size_t>(n));
      return Io::kProgress;
    }
    if (n == 0) {
      *eof = true;
      return Io::kProgress;
    }
    if (errno == EINTR) continue;
    return (errno == EAGAIN || errno == EWOULDBLOCK) ? Io::kWouldBlock : Io::kFailed;
  }
}

}  // namespace

DelayProxy::DelayProxy(std::string upstream_host, int upstream_port, std::chrono::microseconds delay, int listen_port)
    : upstream_host_(std::move(upstream_host)), upstream_port_(upstream_port), delay_(delay) {
  if (delay_.count() < 0) throw std::runtime_error("the delay must be >= 0");
  if (upstream_port_ <= 0 || upstream_port_ > 65535) {
    throw std::runtime_error("upstream port " + std::to_string(upstream_port_) + " is not a port (1..65535)");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(upstream_host_.c_str(), std::to_string(upstream_port_).c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    throw std::runtime_error("cannot resolve upstream host '" + upstream_host_ + "': " + ::gai_strerror(rc));
  }
  std::memcpy(&upstream_addr_, found->ai_addr, found->ai_addrlen);
  upstream_addr_len_ = found->ai_addrlen;
  ::freeaddrinfo(found);
  service_ = std::make_unique<TcpService>(listen_port, [this](int fd, int stop_fd) { relay(fd, stop_fd); });
}

DelayProxy::~DelayProxy() {
  service_->stop();
}

int DelayProxy::port() const {
  return service_->port();
}

std::string DelayProxy::url(const std::string& path) const {
  return loopback_url(port(), path);
}

void DelayProxy::relay(int client, int stop_fd) {
  ++connections_;
  const int up = ::socket(upstream_addr_.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (up < 0) {
    ++upstream_failures_;
    return;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{up};
  if (::connect(up, reinterpret_cast<const sockaddr*>(&upstream_addr_), upstream_addr_len_) != 0) {
    int err = errno;
    if (err == EINPROGRESS) {
      if (wait_for(up, POLLOUT, stop_fd, kConnectTimeout) != Wait::kReady) return;
      socklen_t len = sizeof(err);
      ::getsockopt(up, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err != 0) {
      // The client sees its connection closed without an answer, as from a server that is down.
      ++upstream_failures_;
      return;
    }
  }
  // Small requests go out at once: Nagle's wait for an ACK would add its own delay.
  no_delay(client);
  no_delay(up);

  std::deque<Chunk> to_up;  // the client's chunks, each held until its due time
  std::size_t to_up_bytes = 0;
  std::string to_client;  // upstream's answer, not held
  std::size_t to_client_sent = 0;
  bool client_eof = false, up_eof = false, up_shut = false, client_shut = false;
  std::vector<char> buffer(kReadSize);
  for (;;) {
    // Forward what is due upstream, then what upstream sent to the client.
    bool up_blocked = false;
    const Clock::time_point now = Clock::now();
    while (!to_up.empty() && to_up.front().due <= now) {
      Chunk& c = to_up.front();
      const Io io = send_some(up, c.bytes, &c.sent);
      if (io == Io::kFailed) return;
      if (io == Io::kWouldBlock) {
        up_blocked = true;
        break;
      }
      if (c.sent == c.bytes.size()) {
        to_up_bytes -= c.bytes.size();
        to_up.pop_front();
      }
    }
    if (client_eof && to_up.empty() && !up_shut) {
      ::shutdown(up, SHUT_WR);
      up_shut = true;
    }
    bool client_blocked = false;
    while (to_client_sent < to_client.size()) {
      const Io io = send_some(client, to_client, &to_client_sent);
      if (io == Io::kFailed) return;
      if (io == Io::kWouldBlock) {
        client_blocked = true;
        break;
      }
    }
    if (to_client_sent == to_client.size()) {
      to_client.clear();
      to_client_sent = 0;
    }
    if (up_eof && to_client.empty() && !client_shut) {
      ::shutdown(client, SHUT_WR);
      client_shut = true;
    }
    if (up_shut && client_shut) return;

    // Wait for input, room to write, the next chunk's due time, or stop(). A descriptor
    // with nothing to wait for is left out (-1): a hung-up socket would wake poll at once.
    const short client_events =
        static_cast<short>((!client_eof && to_up_bytes < kBufferCap ? POLLIN : 0) | (client_blocked ? POLLOUT : 0));
    const short up_events =
        static_cast<short>((!up_eof && to_client.size() < kBufferCap ? POLLIN : 0) | (up_blocked ? POLLOUT : 0));
    pollfd fds[3] = {{client_events != 0 ? client : -1, client_events, 0},
                     {up_events != 0 ? up : -1, up_events, 0},
                     {stop_fd, POLLIN, 0}};
    timespec ts{};
    const timespec* timeout = nullptr;
    if (!to_up.empty() && !up_blocked) {
      const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(to_up.front().due - Clock::now());
      const long long ns = std::max<long long>(wait.count(), 0);
      ts.tv_sec = static_cast<time_t>(ns / 1000000000);
      ts.tv_nsec = static_cast<long>(ns % 1000000000);
      timeout = &ts;
    }
    const int n = ::ppoll(fds, 3, timeout, nullptr);
    if (n < 0 && errno != EINTR) return;
    if (n <= 0) continue;
    if (fds[2].revents != 0) return;  // stopping
    if (fds[0].revents != 0 && (client_events & POLLIN) != 0) {
      std::string bytes;
      if (recv_into(client, bytes, buffer, &client_eof) == Io::kFailed) return;
      if (!bytes.empty()) {
        to_up_bytes += bytes.size();
        to_up.push_back({Clock::now() + delay_, std::move(bytes)});
      }
    } else if ((fds[0].revents & (POLLERR | POLLHUP)) != 0) {
      return;  // the client reset the connection while we only waited to write to it
    }
    if (fds[1].revents != 0 && (up_events & POLLIN) != 0) {
      if (recv_into(up, to_client, buffer, &up_eof) == Io::kFailed) return;
    } else if ((fds[1].revents & (POLLERR | POLLHUP)) != 0) {
      return;
    }
  }
}

}  // namespace mlbench::testing
