// A TCP port of 127.0.0.1 held for a server that a child process (or a later object) binds.
// A port picked by binding port 0 and letting it go is free for anyone until the server binds
// it: the next pick can be the same port (6 in 100,000 pairs of picks on Linux 6.x), and two
// nodes given one port, the second cannot listen ("Address already in use"). A held port stays
// bound, with SO_REUSEADDR and never listening: the server, which sets SO_REUSEADDR too (asio's
// acceptor does by default, the peer cache's server does), binds and listens on it, while a
// socket without SO_REUSEADDR cannot bind it and binding port 0 never returns it, so ports held
// together are distinct. Hold it until the server listens (or for the server's whole life).
#pragma once

#include <cstdint>

namespace mlbench::core {

class HeldLoopbackPort {
 public:
  // Binds a free port of 127.0.0.1; throws std::runtime_error naming the cause when none.
  HeldLoopbackPort();
  ~HeldLoopbackPort();
  HeldLoopbackPort(HeldLoopbackPort&& other) noexcept;
  HeldLoopbackPort& operator=(HeldLoopbackPort&& other) noexcept;
  HeldLoopbackPort(const HeldLoopbackPort&) = delete;
  HeldLoopbackPort& operator=(const HeldLoopbackPort&) = delete;

  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace mlbench::core
