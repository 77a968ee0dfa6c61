#include "core/loopback_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace mlbench::core {

HeldLoopbackPort::HeldLoopbackPort() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("no TCP socket for a port of 127.0.0.1: ") + std::strerror(errno));
  const int one = 1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int err = errno;
    ::close(fd_);
    throw std::runtime_error(std::string("no free TCP port on 127.0.0.1: ") + std::strerror(err));
  }
  port_ = ntohs(a.sin_port);
}

HeldLoopbackPort::~HeldLoopbackPort() {
  if (fd_ >= 0) ::close(fd_);
}

HeldLoopbackPort::HeldLoopbackPort(HeldLoopbackPort&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), port_(std::exchange(other.port_, 0)) {}

HeldLoopbackPort& HeldLoopbackPort::operator=(HeldLoopbackPort&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    port_ = std::exchange(other.port_, 0);
  }
  return *this;
}

}  // namespace mlbench::core
