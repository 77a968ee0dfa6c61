#include "core/loopback_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

namespace mlbench::core {
namespace {

// A loopback TCP socket; SO_REUSEADDR set when `reuse`, as a server sets it.
int loopback_socket(bool reuse) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (reuse) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  return fd;
}

int bind_to(int fd, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
}

// A second pick (a bind of port 0) or any socket without SO_REUSEADDR cannot have a held port.
// A port picked by binding port 0 and closing, as mlbench-stall's peer runs and the peer tests
// did, could be picked again: two nodes then had one port.
TEST(HeldLoopbackPort, NoOtherSocketCanBindAHeldPort) {
  const HeldLoopbackPort held;
  ASSERT_NE(held.port(), 0);
  const int other = loopback_socket(false);
  EXPECT_NE(bind_to(other, held.port()), 0) << "port " << held.port() << " was taken";
  EXPECT_EQ(errno, EADDRINUSE) << std::strerror(errno);
  ::close(other);
}

// ...except the server it is held for: with SO_REUSEADDR it binds, listens and accepts there.
TEST(HeldLoopbackPort, AServerSettingReuseAddressListensOnItWhileItIsHeld) {
  const HeldLoopbackPort held;
  const int server = loopback_socket(true);
  ASSERT_EQ(bind_to(server, held.port()), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(server, 4), 0) << std::strerror(errno);
  const int client = loopback_socket(false);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(held.port());
  EXPECT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  const int accepted = ::accept(server, nullptr, nullptr);
  EXPECT_GE(accepted, 0) << std::strerror(errno);
  for (int fd : {accepted, client, server}) ::close(fd);
}

TEST(HeldLoopbackPort, PortsHeldTogetherAreDistinctAndFreedWhenLetGo) {
  std::set<std::uint16_t> ports;
  {
    std::vector<HeldLoopbackPort> held(32);
    for (const auto& h : held) ports.insert(h.port());
    HeldLoopbackPort moved = std::move(held.front());
    EXPECT_EQ(held.front().port(), 0);
    EXPECT_TRUE(ports.count(moved.port()));
  }
  EXPECT_EQ(ports.size(), 32u);
  // Let go, a port is anyone's again.
  const int other = loopback_socket(false);
  EXPECT_EQ(bind_to(other, *ports.begin()), 0) << std::strerror(errno);
  ::close(other);
}

}  // namespace
}  // namespace mlbench::core
