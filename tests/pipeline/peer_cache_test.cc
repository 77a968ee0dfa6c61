// The partitioned cache (pipeline/remedies/peer_cache.h) on loopback: the wire protocol
// between a server and a client, its faults (a peer that is down, one that never
// answers, malformed and oversized requests, ids of another partition), the
// back-off on an injected clock, and two Loaders as two nodes that read each
// partition from storage once between them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "core/loopback_port.h"
#include "pipeline/loader.h"
#include "pipeline/remedies/peer_cache.h"
#include "pipeline/remedies/peer_rate.h"
#include "pipeline/trace.h"
#include "tests/support/jpeg_folder.h"
#include "tests/support/temp_dir.h"

namespace mlbench::pipeline {
namespace {

namespace fs = std::filesystem;
using mlbench::testing_support::TempDir;

// A loopback TCP socket bound to an ephemeral port: listening (never accepting) or closed.
struct RawListener {
  int fd = -1;
  std::uint16_t port = 0;
  explicit RawListener(bool listening) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    if (listening) {
      EXPECT_EQ(::listen(fd, 8), 0);
    } else {
      ::close(fd);
      fd = -1;
    }
  }
  ~RawListener() {
    if (fd >= 0) ::close(fd);
  }
};

// A free loopback port (bound, then released: the server binds it again at once).
std::uint16_t free_port() {
  return RawListener(false).port;
}

int raw_connect(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  timeval tv{5, 0};  // a test that would hang fails instead
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// The client's half of the handshake on a raw socket, as rank `rank` of the run `run` dialing
// rank `server`: the session when the server accepted it.
std::optional<PeerSession> raw_authenticate(int fd, const std::string& secret, int rank = 0, int server = 1,
                                            const std::string& run = "") {
  ServerHello hello{};
  if (::recv(fd, hello.data(), hello.size(), MSG_WAITALL) != static_cast<ssize_t>(hello.size())) return {};
  PeerClientHandshake handshake(secret, peer_run_id(run), rank, server);
  ClientHello mine{};
  if (handshake.answer(hello, mine) != PeerRefusal::kNone) return {};
  if (::write(fd, mine.data(), mine.size()) != static_cast<ssize_t>(mine.size())) return {};
  PeerProof theirs{};
  if (::recv(fd, theirs.data(), theirs.size(), MSG_WAITALL) != static_cast<ssize_t>(theirs.size())) return {};
  if (handshake.finish(theirs) != PeerRefusal::kNone) return {};
  return handshake.session();
}

// Reads until the peer closes (or the 5 s receive timeout): what came.
std::vector<std::uint8_t> read_to_end(int fd) {
  std::vector<std::uint8_t> got;
  std::uint8_t buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.insert(got.end(), buf, buf + n);
  return got;
}

PartitionConfig two_nodes(std::uint16_t port0, std::uint16_t port1, int rank) {
  PartitionConfig c;
  c.rank = rank;
  c.peers = {{"127.0.0.1", port0}, {"127.0.0.1", port1}};
  c.timeout_s = 2;
  c.server_threads = 2;
  c.linger_s = 0;  // the tests read both nodes' counts after both finished
  c.secret = "the run's secret";
  return c;
}

// A server for rank 1 of 2 over 10 items, whose odd items are "cached" as bytes {i, i, i}
// except item 9, which its lookup cannot read. `config` is rank 0's, the client's.
struct OddServer {
  PartitionConfig config;
  std::unique_ptr<PeerCacheServer> server;
  explicit OddServer(const std::string& run = "") {
    config = two_nodes(1, 0, 1);  // peer 1 listens on an ephemeral port; its address is set below
    config.run = run;
    server = std::make_unique<PeerCacheServer>(PeerAddress{"127.0.0.1", 0}, 10, config,
                                               [](std::size_t i, std::shared_ptr<const Bytes>& out) {
                                                 if (i == 9) return PeerStatus::kMiss;
                                                 out = std::make_shared<Bytes>(3, static_cast<std::uint8_t>(i));
                                                 return i == 7 ? PeerStatus::kStorage : PeerStatus::kCacheHit;
                                               });
    config.peers[1].port = server->port();
    config.rank = 0;
  }
};

// mlbench-stall's network inputs for the partitioned what-if: a rate and the CPU of a fetch.
TEST(PeerCache, LoopbackRateMeasuresItemsAndTheirCpu) {
  for (int per_request : {1, kLoopbackIdsPerRequest}) {
    const auto r = loopback_peer_rate(4096, 2, 0.1, per_request);
    EXPECT_GT(r.items_per_s, 0.0) << per_request;
    EXPECT_GT(r.cpu_s_per_item, 0.0) << per_request;
  }
}

TEST(PeerCache, ParsePeersReadsHostPortListsAndNamesABadEntry) {
  const auto p = parse_peers("127.0.0.1:7000,node-b:7001,[::1]:9");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].host, "127.0.0.1");
  EXPECT_EQ(p[0].port, 7000);
  EXPECT_EQ(p[1].host, "node-b");
  EXPECT_EQ(p[2].host, "::1");
  EXPECT_EQ(p[2].port, 9);
  for (const char* bad : {"", "a", "a:", ":1", "a:0", "a:70000", "a:1x", "a:1,,b:2"}) {
    try {
      parse_peers(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--peers"), std::string::npos) << e.what();
    }
  }
}

// A duplicate address was accepted, and the node asked itself for the other partition.
TEST(PeerCache, ParsePeersRefusesAnAddressGivenTwice) {
  try {
    parse_peers("127.0.0.1:7000,127.0.0.1:7000");
    ADD_FAILURE() << "accepted a duplicate";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'127.0.0.1:7000' is given twice (ranks 0 and 1)"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(parse_peers("127.0.0.1:7000,127.0.0.1:7001").size(), 2u);  // one host, two ports: two nodes
}

// This node's own rank given by host name was refused as "not an address of this node".
TEST(PeerCache, AHostNameOfThisNodeIsListenedOn) {
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof name - 1), 0);
  addrinfo* found = nullptr;
  if (::getaddrinfo(name, nullptr, nullptr, &found) != 0) {
    GTEST_SKIP() << "this machine's host name '" << name << "' does not resolve here";
  }
  ::freeaddrinfo(found);
  PartitionConfig c = two_nodes(0, 1, 0);
  PeerCacheServer server(PeerAddress{name, 0}, 4, c,
                         [](std::size_t, std::shared_ptr<const Bytes>&) { return PeerStatus::kMiss; });
  EXPECT_GT(server.port(), 0);
}

// A ten-line client read the JPEG bytes of items by id from a node's port: the port now
// serves nothing to a connection that does not prove the run's secret.
TEST(PeerCache, AClientWithoutTheSecretGetsNothing) {
  OddServer s;
  // The first protocol: a request at once (length 12: magic and one id), no proof.
  int fd = raw_connect(s.server->port());
  std::uint8_t msg[12];
  put_be32(msg, 12);
  put_be32(msg + 4, kPeerMagic);
  std::uint8_t id[8] = {0, 0, 0, 0, 0, 0, 0, 5};
  std::vector<std::uint8_t> request(msg, msg + 8);
  request.insert(request.end(), id, id + 8);
  request.resize(kClientHelloBytes, 0);  // as long as a client's hello: a wrong one
  ASSERT_EQ(::write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  EXPECT_EQ(read_to_end(fd).size(), kServerHelloBytes) << "more than the greeting came back";
  ::close(fd);
  // A client with another secret: refused, its item read from storage by the caller.
  PartitionConfig other = s.config;
  other.secret = "another run's secret";
  PeerCacheClient client(other);
  Bytes out;
  const auto r = client.get(1, 5, out);
  EXPECT_EQ(r.result, PeerCacheClient::Result::kFailed);
  EXPECT_NE(r.error.find("secret"), std::string::npos) << r.error;
  // A silent connection is closed after the timeout, with nothing served.
  fd = raw_connect(s.server->port());
  read_to_end(fd);
  ::close(fd);
  EXPECT_EQ(s.server->counters().requests, 0u);
  EXPECT_GE(s.server->counters().unauthenticated, 3u);
  // The run's own client still gets its item.
  PeerCacheClient mine(s.config);
  EXPECT_EQ(mine.get(1, 5, out).result, PeerCacheClient::Result::kHit);
}

// Idle connections to a node's port killed it (abort, no report) past its file-descriptor
// limit: 200 at `ulimit -n 64`. A node under that limit now refuses the excess, closes the
// idle ones after the timeout, and still serves the run's peers.
TEST(PeerCache, AFloodOfIdleConnectionsDoesNotKillTheNode) {
  int ports[2];
  ASSERT_EQ(::pipe(ports), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ports[0]);
    rlimit lim{64, 64};
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::_exit(3);
    OddServer s;
    const std::uint16_t port = s.server->port();
    (void)!::write(ports[1], &port, sizeof port);
    ::sleep(30);  // killed by the parent
    ::_exit(0);
  }
  ::close(ports[1]);
  std::uint16_t port = 0;
  ASSERT_EQ(::read(ports[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  ::close(ports[0]);
  std::vector<int> flood;
  for (int i = 0; i < 200; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    flood.push_back(fd);
  }
  // Past the handshake's timeout (OddServer: 2 s), the idle connections are closed.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, WNOHANG), 0) << "the node died of the flood";
  PartitionConfig c = two_nodes(0, port, 0);
  PeerCacheClient client(c);
  Bytes out;
  const auto r = client.get(1, 5, out);
  EXPECT_EQ(r.result, PeerCacheClient::Result::kHit) << r.error;
  for (int fd : flood) ::close(fd);
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
}

// An environment variable, put back as it was when the test ends.
class SavedEnv {
 public:
  explicit SavedEnv(const char* name) : name_(name) {
    const char* v = std::getenv(name);
    if (v) value_ = v;
  }
  ~SavedEnv() {
    if (value_)
      ::setenv(name_, value_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> value_;
};

TEST(PeerCache, TheUsersSecretFileIsMadePrivateOnceAndRefusedWhenOthersCanReadIt) {
  TempDir tmp("secret");
  const SavedEnv secret("MLBENCH_PEER_SECRET"), xdg("XDG_CONFIG_HOME");
  ::unsetenv("MLBENCH_PEER_SECRET");
  ::setenv("XDG_CONFIG_HOME", tmp.path().c_str(), 1);
  const std::string first = load_peer_secret();
  const auto file = tmp.path() / "mlbench" / "peer-secret";
  EXPECT_EQ(first.size(), 64u);
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(load_peer_secret(), first);  // the same for every node of the user
  fs::permissions(file, fs::perms::group_read | fs::perms::others_read, fs::perm_options::add);
  EXPECT_THROW(load_peer_secret(), std::invalid_argument);
  ::setenv("MLBENCH_PEER_SECRET", "given", 1);
  EXPECT_EQ(load_peer_secret(), "given");  // the variable wins
}

// An attacker on the network (docs/reliability.md, "Trust boundaries"): listens on a loopback
// port and relays each connection it accepts to `target`, one connection at a time, passing the
// bytes of each direction through a hook that sees their offset in that direction's stream of
// the connection and may change them. It knows no secret.
class Relay {
 public:
  using Hook = std::function<void(std::size_t offset, std::uint8_t* bytes, std::size_t n)>;
  Relay(std::uint16_t target, Hook to_client, Hook to_server = {})
      : target_(target), to_client_(std::move(to_client)), to_server_(std::move(to_server)) {
    thread_ = std::thread([this] { run(); });
  }
  ~Relay() {
    stop_ = true;
    thread_.join();
  }
  std::uint16_t port() const { return listener_.port; }
  int connections() const { return connections_.load(); }

 private:
  void run() {
    while (!stop_) {
      pollfd p{listener_.fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int client = ::accept(listener_.fd, nullptr, nullptr);
      if (client < 0) continue;
      ++connections_;
      const int server = raw_connect(target_);
      std::size_t offsets[2] = {0, 0};  // to the client, to the server
      for (bool open = true; open && !stop_;) {
        pollfd fds[2] = {{server, POLLIN, 0}, {client, POLLIN, 0}};
        if (::poll(fds, 2, 50) <= 0) continue;
        for (int d = 0; d < 2 && open; ++d) {
          if (!(fds[d].revents & (POLLIN | POLLHUP | POLLERR))) continue;
          std::uint8_t buf[65536];
          const ssize_t n = ::read(fds[d].fd, buf, sizeof buf);
          if (n <= 0) {
            open = false;
            break;
          }
          const Hook& hook = d == 0 ? to_client_ : to_server_;
          if (hook) hook(offsets[d], buf, static_cast<std::size_t>(n));
          offsets[d] += static_cast<std::size_t>(n);
          if (::write(d == 0 ? client : server, buf, static_cast<std::size_t>(n)) != n) open = false;
        }
      }
      ::close(client);
      ::close(server);
    }
  }

  RawListener listener_{true};
  std::uint16_t target_;
  Hook to_client_, to_server_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

// Sets byte `at` of a relayed stream to `value` when it passes.
Relay::Hook set_byte(std::size_t at, std::uint8_t value) {
  return [at, value](std::size_t offset, std::uint8_t* bytes, std::size_t n) {
    if (at >= offset && at < offset + n) bytes[at - offset] = value;
  };
}
// Flips the lowest bit of byte `at` of a relayed stream.
Relay::Hook flip_byte(std::size_t at) {
  return [at](std::size_t offset, std::uint8_t* bytes, std::size_t n) {
    if (at >= offset && at < offset + n) bytes[at - offset] ^= 1;
  };
}
// Offsets in the server's stream to the client: the first reply frame's first item byte.
constexpr std::size_t kFirstReplyBody = kServerHelloBytes + kPeerProofBytes + kPeerFrameHeaderBytes;

// A server for rank 0 of 2 over 10 items (its even ones), each item i as {i, i, i}.
struct EvenServer {
  PartitionConfig config;
  std::unique_ptr<PeerCacheServer> server;
  EvenServer() {
    config = two_nodes(0, 0, 0);
    server = std::make_unique<PeerCacheServer>(PeerAddress{"127.0.0.1", 0}, 10, config,
                                               [](std::size_t i, std::shared_ptr<const Bytes>& out) {
                                                 out = std::make_shared<Bytes>(3, static_cast<std::uint8_t>(i));
                                                 return PeerStatus::kCacheHit;
                                               });
    config.peers[0].port = server->port();
  }
};

// The relay of the issue that made this protocol: a process without the secret listens on rank
// 1's port while rank 1 is not up, and relays rank 0's client to rank 0's own server. Before,
// the client's proof named neither side: it was authenticated there, read items, and rank 0's
// client took 19 made-up images as peer hits. Now the client sees that the server is rank 0,
// not the rank 1 it dialed; a relay that rewrites the ranks it passes breaks the proofs instead,
// and rank 0's server refuses a client of its own rank.
TEST(PeerCache, ARelayToANodesOwnServerIsRefused) {
  EvenServer rank0;
  const struct {
    const char* name;
    Relay::Hook to_client, to_server;
  } relays[] = {
      {"as is", {}, {}},
      {"server rank rewritten to 1", set_byte(7, 1), {}},
      {"both ranks rewritten to 1", set_byte(7, 1), set_byte(3, 1)},
  };
  for (const auto& r : relays) {
    SCOPED_TRACE(r.name);
    Relay attacker(rank0.server->port(), r.to_client, r.to_server);
    PartitionConfig c = rank0.config;  // rank 0's own client; rank 1's address is the attacker's
    c.peers[1].port = attacker.port();
    PeerCacheClient client(c);
    Bytes out;
    const auto reply = client.get(1, 3, out);
    EXPECT_EQ(reply.result, PeerCacheClient::Result::kFailed);
    EXPECT_TRUE(reply.auth_failed) << reply.error;
    EXPECT_TRUE(out.empty());
  }
  const auto n = rank0.server->counters();
  EXPECT_EQ(n.requests, 0u) << "rank 0's server answered the relay";
  EXPECT_EQ(n.messages, 0u);
  EXPECT_GE(n.unauthenticated, 2u);  // the two rewriting relays: a client of its own rank, a bad proof
}

// A node refuses a connection that claims its own rank (or one outside the run), though its
// proof is right: only a reflection or a relay of its own client would.
TEST(PeerCache, ANodeRefusesAConnectionClaimingItsOwnRank) {
  OddServer s;  // rank 1 of 2
  for (int claimed : {1, 2}) {
    const int fd = raw_connect(s.server->port());
    EXPECT_FALSE(raw_authenticate(fd, s.config.secret, claimed, 1)) << claimed;
    ::close(fd);
  }
  EXPECT_EQ(s.server->counters().unauthenticated, 2u);
  EXPECT_EQ(s.server->counters().requests, 0u);
  const int fd = raw_connect(s.server->port());
  EXPECT_TRUE(raw_authenticate(fd, s.config.secret, 0, 1));  // rank 0's is served
  ::close(fd);
}

// Reflection: each proof is bound to its direction. A fake server that sends a client its own
// proof back as the server's is refused; so is a client that hands a server its own greeting
// back as its hello.
TEST(PeerCache, AProofReflectedToWhereItCameFromIsRefused) {
  RawListener fake(true);
  std::thread server([&] {
    const int fd = ::accept(fake.fd, nullptr, nullptr);
    PeerServerHandshake looks_right("not the secret", peer_run_id(""), 1, 2);
    (void)!::write(fd, looks_right.hello().data(), kServerHelloBytes);
    ClientHello theirs{};
    if (::recv(fd, theirs.data(), theirs.size(), MSG_WAITALL) == static_cast<ssize_t>(theirs.size())) {
      (void)!::write(fd, theirs.data() + 4 + kPeerNonceBytes, kPeerProofBytes);  // the client's own proof
    }
    read_to_end(fd);
    ::close(fd);
  });
  PeerCacheClient client(two_nodes(free_port(), fake.port, 0));
  Bytes out;
  const auto reply = client.get(1, 3, out);
  server.join();
  EXPECT_EQ(reply.result, PeerCacheClient::Result::kFailed);
  EXPECT_TRUE(reply.auth_failed);
  EXPECT_NE(reply.error.find("does not hold this run's secret"), std::string::npos) << reply.error;

  OddServer s;
  const int fd = raw_connect(s.server->port());
  ServerHello hello{};
  ASSERT_EQ(::recv(fd, hello.data(), hello.size(), MSG_WAITALL), static_cast<ssize_t>(hello.size()));
  ClientHello back{};
  std::memcpy(back.data(), hello.data() + 4, back.size());  // its rank, its run id and nonce
  ASSERT_EQ(::write(fd, back.data(), back.size()), static_cast<ssize_t>(back.size()));
  EXPECT_TRUE(read_to_end(fd).empty());
  ::close(fd);
  EXPECT_EQ(s.server->counters().unauthenticated, 1u);
}

// Replay: a recorded handshake replayed on a new connection proves nothing (the server's nonce
// is new); a request replayed on its own connection, and a reply replayed in place of the next,
// fail their tags (the sequence number).
TEST(PeerCache, ARecordedHandshakeOrFrameReplayedIsRefused) {
  OddServer s;
  // Record a genuine client's bytes to the server, through a relay that only listens.
  std::vector<std::uint8_t> recorded;
  std::mutex mu;
  {
    Relay tap(s.server->port(), {}, [&](std::size_t, std::uint8_t* bytes, std::size_t n) {
      std::lock_guard lock(mu);
      recorded.insert(recorded.end(), bytes, bytes + n);
    });
    PartitionConfig c = s.config;
    c.peers[1].port = tap.port();
    PeerCacheClient client(c);
    Bytes out;
    ASSERT_EQ(client.get(1, 3, out).result, PeerCacheClient::Result::kHit);
  }
  ASSERT_GT(recorded.size(), kClientHelloBytes);
  EXPECT_EQ(s.server->counters().requests, 1u);
  int fd = raw_connect(s.server->port());
  ServerHello hello{};
  ASSERT_EQ(::recv(fd, hello.data(), hello.size(), MSG_WAITALL), static_cast<ssize_t>(hello.size()));
  ASSERT_EQ(::write(fd, recorded.data(), recorded.size()), static_cast<ssize_t>(recorded.size()));
  EXPECT_TRUE(read_to_end(fd).empty()) << "the replayed handshake got an answer";
  ::close(fd);
  EXPECT_EQ(s.server->counters().requests, 1u);
  EXPECT_EQ(s.server->counters().unauthenticated, 1u);

  // A request frame sent twice on one connection: the second is refused and the connection closed.
  fd = raw_connect(s.server->port());
  auto session = raw_authenticate(fd, s.config.secret);
  ASSERT_TRUE(session);
  const auto request = peer_request_frame({5}, session->send);
  ASSERT_EQ(::write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::vector<std::uint8_t> reply(kPeerFrameHeaderBytes + 3 + kPeerTagBytes);
  ASSERT_EQ(::recv(fd, reply.data(), reply.size(), MSG_WAITALL), static_cast<ssize_t>(reply.size()));
  ASSERT_EQ(::write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  EXPECT_TRUE(read_to_end(fd).empty()) << "the replayed request got an answer";
  ::close(fd);
  EXPECT_EQ(s.server->counters().mac_failures, 1u);
  EXPECT_EQ(s.server->counters().requests, 2u);

  // A man in the middle answers the second request with the first reply again (item 3's bytes
  // for item 5): the client refuses it.
  const std::size_t frame = kPeerFrameHeaderBytes + 3 + kPeerTagBytes;
  std::vector<std::uint8_t> first;
  Relay replayer(s.server->port(), [&](std::size_t offset, std::uint8_t* bytes, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t at = offset + i;
      const std::size_t start = kServerHelloBytes + kPeerProofBytes;
      if (at >= start && at < start + frame) first.push_back(bytes[i]);
      if (at >= start + frame && at < start + 2 * frame) bytes[i] = first[at - start - frame];
    }
  });
  PartitionConfig c = s.config;
  c.peers[1].port = replayer.port();
  PeerCacheClient client(c);
  Bytes out;
  ASSERT_EQ(client.get(1, 3, out).result, PeerCacheClient::Result::kHit);
  EXPECT_EQ(out, Bytes(3, 3));
  const auto r = client.get(1, 5, out);
  EXPECT_EQ(r.result, PeerCacheClient::Result::kFailed);
  EXPECT_TRUE(r.auth_failed);
  EXPECT_NE(r.error.find("item 5's reply failed its MAC check"), std::string::npos) << r.error;
}

// A node of another run under the same secret (the user's secret file serves every run of the
// user) is refused: the client sees the server's run; a client that ignores it fails its proof.
TEST(PeerCache, ANodeOfAnotherRunIsRefusedUnderTheSameSecret) {
  OddServer s("127.0.0.1:7000,127.0.0.1:7001");
  PartitionConfig other = s.config;
  other.run = "127.0.0.1:7002,127.0.0.1:7001";
  PeerCacheClient client(other);
  Bytes out;
  const auto r = client.get(1, 3, out);
  EXPECT_EQ(r.result, PeerCacheClient::Result::kFailed);
  EXPECT_TRUE(r.auth_failed);
  EXPECT_NE(r.error.find("another run"), std::string::npos) << r.error;
  // A client that takes the server's run id as its own proves for its own run: refused.
  const int fd = raw_connect(s.server->port());
  ServerHello hello{};
  ASSERT_EQ(::recv(fd, hello.data(), hello.size(), MSG_WAITALL), static_cast<ssize_t>(hello.size()));
  const PeerRunId mine = peer_run_id(other.run);
  std::memcpy(hello.data() + 8, mine.data(), mine.size());  // as if the server were of this run
  PeerClientHandshake handshake(other.secret, mine, 0, 1);
  ClientHello answer{};
  ASSERT_EQ(handshake.answer(hello, answer), PeerRefusal::kNone);
  ASSERT_EQ(::write(fd, answer.data(), answer.size()), static_cast<ssize_t>(answer.size()));
  EXPECT_TRUE(read_to_end(fd).empty());
  ::close(fd);
  EXPECT_EQ(s.server->counters().requests, 0u);
  EXPECT_EQ(s.server->counters().unauthenticated, 1u);
  PeerCacheClient same_run(s.config);
  EXPECT_EQ(same_run.get(1, 3, out).result, PeerCacheClient::Result::kHit);
}

// A secret path that is a directory was told to `chmod 600 it`, which would not have helped.
TEST(PeerCache, ASecretPathThatIsADirectoryIsSaidToBeOne) {
  TempDir tmp("secret_dir");
  const SavedEnv secret("MLBENCH_PEER_SECRET"), file("MLBENCH_PEER_SECRET_FILE"), xdg("XDG_CONFIG_HOME");
  ::unsetenv("MLBENCH_PEER_SECRET");
  auto expect_directory = [](const fs::path& dir) {
    try {
      load_peer_secret();
      ADD_FAILURE() << "a directory was taken for the secret";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(dir.string() + " is a directory, not a file"), std::string::npos) << what;
      EXPECT_EQ(what.find("chmod"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  };
  // $MLBENCH_PEER_SECRET_FILE naming a directory.
  fs::create_directories(tmp.path() / "given");
  ::setenv("MLBENCH_PEER_SECRET_FILE", (tmp.path() / "given").c_str(), 1);
  expect_directory(tmp.path() / "given");
  // The user's secret file's place taken by a directory.
  ::unsetenv("MLBENCH_PEER_SECRET_FILE");
  ::setenv("XDG_CONFIG_HOME", tmp.path().c_str(), 1);
  fs::create_directories(tmp.path() / "mlbench" / "peer-secret");
  expect_directory(tmp.path() / "mlbench" / "peer-secret");
}

TEST(PeerCache, ServesItsPartitionByIdAndKeepsTheConnection) {
  OddServer s;
  PeerCacheClient client(s.config);
  Bytes out;
  auto r = client.get(1, 3, out);
  EXPECT_EQ(r.result, PeerCacheClient::Result::kHit) << r.error;
  EXPECT_EQ(r.status, PeerStatus::kCacheHit);
  EXPECT_EQ(out, Bytes(3, 3));
  r = client.get(1, 7, out);
  EXPECT_EQ(r.result, PeerCacheClient::Result::kHit);
  EXPECT_EQ(r.status, PeerStatus::kStorage);
  EXPECT_EQ(out, Bytes(3, 7));
  // The owner's miss: the asker reads it itself.
  r = client.get(1, 9, out);
  EXPECT_EQ(r.result, PeerCacheClient::Result::kMiss);
  EXPECT_EQ(r.status, PeerStatus::kMiss);
  // Another partition's item, and one past the dataset: refused, the connection kept.
  r = client.get(1, 4, out);
  EXPECT_EQ(r.result, PeerCacheClient::Result::kMiss);
  EXPECT_EQ(r.status, PeerStatus::kRejected);
  r = client.get(1, 11, out);
  EXPECT_EQ(r.status, PeerStatus::kRejected);
  EXPECT_EQ(client.idle_connections(1), 1u);  // one connection carried all five
  const auto c = s.server->counters();
  EXPECT_EQ(c.requests, 5u);
  EXPECT_EQ(c.from_cache, 1u);
  EXPECT_EQ(c.from_storage, 1u);
  EXPECT_EQ(c.misses, 1u);
  EXPECT_EQ(c.rejected, 2u);
  EXPECT_EQ(c.bytes, 6u);
  EXPECT_EQ(c.storage_bytes, 3u);
}

TEST(PeerCache, ARequestForManyItemsIsAnsweredItemByItemInOrder) {
  OddServer s;
  PeerCacheClient client(s.config);
  const std::vector<std::size_t> ids{1, 3, 4, 7, 9, 11, 5};
  std::vector<PeerCacheClient::Reply> replies;
  std::vector<Bytes> got;
  client.get_many(1, ids, [&](std::size_t k, const PeerCacheClient::Reply& r, Bytes& bytes) {
    EXPECT_EQ(k, replies.size());  // in order, each once
    replies.push_back(r);
    got.emplace_back();
    got.back().swap(bytes);
  });
  ASSERT_EQ(replies.size(), ids.size());
  using R = PeerCacheClient::Result;
  EXPECT_EQ(replies[0].result, R::kHit);
  EXPECT_EQ(got[0], Bytes(3, 1));
  EXPECT_EQ(got[1], Bytes(3, 3));
  EXPECT_EQ(replies[2].status, PeerStatus::kRejected);  // another partition's
  EXPECT_TRUE(got[2].empty());
  EXPECT_EQ(replies[3].status, PeerStatus::kStorage);
  EXPECT_EQ(got[3], Bytes(3, 7));
  EXPECT_EQ(replies[4].result, R::kMiss);               // the owner could not read it
  EXPECT_EQ(replies[5].status, PeerStatus::kRejected);  // past the dataset
  EXPECT_EQ(replies[6].result, R::kHit);                // after a miss and two refusals, the framing holds
  EXPECT_EQ(got[6], Bytes(3, 5));
  const auto c = s.server->counters();
  EXPECT_EQ(c.messages, 1u);
  EXPECT_EQ(c.requests, ids.size());
  EXPECT_EQ(client.idle_connections(1), 1u);
  // More ids than a request may carry: refused before anything is sent.
  EXPECT_THROW(client.get_many(1, std::vector<std::size_t>(kPeerMaxIds + 1, 1), {}), std::invalid_argument);
  EXPECT_EQ(s.server->counters().messages, 1u);
}

TEST(PeerCache, AManyItemRequestToAPeerThatIsDownFailsEveryItem) {
  const RawListener closed(false);
  PeerCacheClient client(two_nodes(free_port(), closed.port, 0));
  std::vector<std::size_t> failed;
  client.get_many(1, {1, 3, 5}, [&](std::size_t k, const PeerCacheClient::Reply& r, Bytes&) {
    EXPECT_EQ(r.result, PeerCacheClient::Result::kFailed);
    EXPECT_NE(r.error.find(std::to_string(closed.port)), std::string::npos) << r.error;
    failed.push_back(k);
  });
  EXPECT_EQ(failed, (std::vector<std::size_t>{0, 1, 2}));
}

TEST(PeerCache, MalformedAndOversizedRequestsAreRejectedAndTheConnectionClosed) {
  OddServer s;
  // A frame header with the request kind and `length`, or another kind.
  auto send_header = [](int fd, std::uint32_t kind, std::uint64_t length) {
    const PeerFrameHeader h = peer_frame_header(kind, length);
    return ::write(fd, h.data(), h.size()) == static_cast<ssize_t>(h.size());
  };
  // A length that is no request's (an oversized one): closed without a reply.
  int fd = raw_connect(s.server->port());
  ASSERT_TRUE(raw_authenticate(fd, s.config.secret));
  ASSERT_TRUE(send_header(fd, kPeerMagic, std::uint64_t{1} << 30));
  EXPECT_TRUE(read_to_end(fd).empty());
  ::close(fd);
  // The right length with a wrong kind (a path name, say): the same.
  fd = raw_connect(s.server->port());
  ASSERT_TRUE(raw_authenticate(fd, s.config.secret));
  std::uint32_t kind = 0;
  std::memcpy(&kind, "/etc", 4);
  ASSERT_TRUE(send_header(fd, kind, 8));
  EXPECT_TRUE(read_to_end(fd).empty());
  ::close(fd);
  // More ids than a request may carry, a length that is no whole number of ids, none: the same.
  for (std::uint64_t length : {std::uint64_t{8} * (kPeerMaxIds + 1), std::uint64_t{12}, std::uint64_t{0}}) {
    fd = raw_connect(s.server->port());
    ASSERT_TRUE(raw_authenticate(fd, s.config.secret));
    ASSERT_TRUE(send_header(fd, kPeerMagic, length));
    EXPECT_TRUE(read_to_end(fd).empty()) << length;
    ::close(fd);
  }
  EXPECT_EQ(s.server->counters().rejected, 5u);
  // A well-formed request whose tag is wrong: closed, counted as a MAC failure.
  fd = raw_connect(s.server->port());
  ASSERT_TRUE(raw_authenticate(fd, s.config.secret));
  PeerFrameMac wrong_key;
  const auto forged = peer_request_frame({5}, wrong_key);
  ASSERT_EQ(::write(fd, forged.data(), forged.size()), static_cast<ssize_t>(forged.size()));
  EXPECT_TRUE(read_to_end(fd).empty());
  ::close(fd);
  EXPECT_EQ(s.server->counters().mac_failures, 1u);
  EXPECT_EQ(s.server->counters().requests, 0u);
  // The server still answers a well-formed request.
  PeerCacheClient client(s.config);
  Bytes out;
  EXPECT_EQ(client.get(1, 5, out).result, PeerCacheClient::Result::kHit);
}

TEST(PeerCache, APeerThatIsDownFailsAtOnceAndIsSkippedUntilRetryAfter) {
  const RawListener closed(false);
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  PartitionConfig c = two_nodes(free_port(), closed.port, 0);
  c.retry_after_s = 5;
  PeerCacheClient client(c, [&] { return now; });
  Bytes out;
  auto r = client.get(1, 1, out);
  EXPECT_EQ(r.result, PeerCacheClient::Result::kFailed);
  EXPECT_NE(r.error.find("connect"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find(std::to_string(closed.port)), std::string::npos) << r.error;
  now += std::chrono::seconds(4);
  r = client.get(1, 3, out);
  EXPECT_EQ(r.result, PeerCacheClient::Result::kFailed);
  EXPECT_NE(r.error.find("skipped after"), std::string::npos) << r.error;  // not asked again
  now += std::chrono::seconds(2);
  r = client.get(1, 3, out);
  EXPECT_EQ(r.result, PeerCacheClient::Result::kFailed);
  EXPECT_EQ(r.error.find("skipped after"), std::string::npos) << r.error;  // asked again, and down again
}

TEST(PeerCache, APeerThatNeverAnswersTimesOut) {
  const RawListener silent(true);  // the kernel accepts the connection; nobody reads or writes
  PartitionConfig c = two_nodes(free_port(), silent.port, 0);
  c.timeout_s = 0.2;
  PeerCacheClient client(c);
  Bytes out;
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = client.get(1, 1, out);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.result, PeerCacheClient::Result::kFailed);
  EXPECT_NE(r.error.find("timed out after 0.2 s"), std::string::npos) << r.error;
  EXPECT_GE(waited, 0.19);
  EXPECT_EQ(client.idle_connections(1), 0u);  // the stuck connection is not reused
}

TEST(PeerCache, AReplyAnnouncingMoreThanAnItemMayHaveIsAFailure) {
  OddServer s;
  PartitionConfig c = s.config;
  c.max_item_bytes = 2;  // the server's items have 3 bytes
  PeerCacheClient client(c);
  Bytes out;
  const auto r = client.get(1, 3, out);
  EXPECT_EQ(r.result, PeerCacheClient::Result::kFailed);
  EXPECT_NE(r.error.find("more than the 2"), std::string::npos) << r.error;
}

// A node's storage in memory: item i is 2 bytes of 100 + i; its reads are counted.
struct MemorySource : ItemSource {
  std::size_t n;
  mutable std::atomic<int> reads{0};
  explicit MemorySource(std::size_t items) : n(items) {}
  std::size_t size() const override { return n; }
  std::int64_t label(std::size_t) const override { return 0; }
  void fetch(std::size_t i, Bytes& out) const override {
    ++reads;
    out.assign(2, static_cast<std::uint8_t>(100 + i));
  }
  Encoding encoding() const override { return Encoding::Jpeg; }
  std::string describe(std::size_t i) const override { return "item " + std::to_string(i); }
};

Bytes from_storage(std::size_t i) {  // MemorySource's item i
  return Bytes(2, static_cast<std::uint8_t>(100 + i));
}
Bytes expected_item(std::size_t i) {  // OddServer's odd items but 9; the rest from storage
  return i % 2 == 1 && i != 9 ? Bytes(3, static_cast<std::uint8_t>(i)) : from_storage(i);
}

// A man in the middle that flips one byte of an item: the item is refused, read from storage
// instead and counted, with one warning naming the peer, however many items it spoils.
TEST(PeerCache, AnItemChangedOnTheWayIsRefusedReadFromStorageAndCounted) {
  OddServer s;
  Relay mitm(s.server->port(), flip_byte(kFirstReplyBody));
  PartitionConfig c = s.config;
  c.peers[1].port = mitm.port();
  c.max_ids_per_request = 1;  // one item a request: the flip spoils the first
  auto storage = std::make_shared<MemorySource>(10);
  PartitionedSource source(storage, c);
  std::ostringstream warnings;
  source.set_warnings(&warnings);
  Bytes out;
  source.fetch(3, out);
  EXPECT_EQ(out, from_storage(3)) << "the changed item was delivered";
  source.fetch(5, out);  // the peer is skipped for a while now: from storage, counted alike
  EXPECT_EQ(out, from_storage(5));
  const auto n = source.counters();
  EXPECT_EQ(n.peer_auth_failures, 2u);
  EXPECT_EQ(n.peer_failures, 2u);
  EXPECT_EQ(n.peer_cache_items, 0u);
  EXPECT_EQ(storage->reads.load(), 2);
  const std::string text = warnings.str();
  const std::string peer = "rank 1 (127.0.0.1:" + std::to_string(mitm.port()) + ") failed authentication";
  EXPECT_NE(text.find(peer), std::string::npos) << text;
  EXPECT_EQ(text.find('\n'), text.size() - 1) << "not one warning:\n" << text;
  EXPECT_NE(text.find("MAC"), std::string::npos) << text;
  const auto j = partitioned_cache_report(source, nullptr);
  EXPECT_EQ(j["peer"]["auth_failures"], 2) << j.dump();
}

// A batch of the 10 items told to `source`, then each fetched in order and checked.
void fetch_the_ten(const PartitionedSource& source, Bytes (*expected)(std::size_t)) {
  source.will_fetch({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  Bytes out;
  for (std::size_t i = 0; i < 10; ++i) {
    source.fetch(i, out);
    EXPECT_EQ(out, expected(i)) << i;
  }
}

TEST(PeerCache, ABatchsItemsOfAPeerGoInOneRequestAndAreTakenAsTheyArrive) {
  OddServer s;
  PartitionConfig c = s.config;
  c.rank = 0;  // this node; OddServer is rank 1
  auto storage = std::make_shared<MemorySource>(10);
  PartitionedSource source(storage, c);
  fetch_the_ten(source, expected_item);
  Bytes out;
  auto n = source.counters();
  EXPECT_EQ(n.peer_requests, 1u);  // 1, 3, 5, 7 and 9 in one request
  EXPECT_EQ(n.peer_cache_items, 3u);
  EXPECT_EQ(n.peer_storage_items, 1u);  // 7: the owner read it
  EXPECT_EQ(n.peer_misses, 1u);         // 9: the owner could not; read here
  EXPECT_EQ(n.storage_items, 6u);
  EXPECT_EQ(storage->reads.load(), 6);
  EXPECT_EQ(s.server->counters().messages, 1u);
  EXPECT_EQ(s.server->counters().requests, 5u);
  // An item that arrived is there without waiting; one not asked for is not.
  source.will_fetch({3, 1});
  source.fetch(1, out);  // 1 came after 3: once it is here, 3 is too
  EXPECT_EQ(out, Bytes(3, 1));
  EXPECT_FALSE(source.fetch_if_cached(5, out));
  ASSERT_TRUE(source.fetch_if_cached(3, out));
  EXPECT_EQ(out, Bytes(3, 3));
  EXPECT_FALSE(source.fetch_if_cached(3, out));  // taken
  n = source.counters();
  EXPECT_EQ(n.peer_requests, 2u);
  EXPECT_EQ(n.peer_cache_items, 5u);
}

TEST(PeerCache, PeerBatchBoundsTheItemsOfARequestAndOneMeansOneRequestPerItem) {
  for (int per_request : {2, 1}) {
    SCOPED_TRACE(per_request);
    OddServer s;
    PartitionConfig c = s.config;
    c.rank = 0;
    c.max_ids_per_request = per_request;
    PartitionedSource source(std::make_shared<MemorySource>(10), c);
    fetch_the_ten(source, expected_item);
    EXPECT_EQ(source.counters().peer_requests, per_request == 2 ? 3u : 5u);  // {1,3} {5,7} {9}, or each
    EXPECT_EQ(s.server->counters().messages, per_request == 2 ? 3u : 5u);
  }
}

TEST(PeerCache, ABatchedRequestToAPeerThatIsDownFallsBackToStorageItemByItem) {
  const RawListener closed(false);
  PartitionConfig c = two_nodes(free_port(), closed.port, 0);
  auto storage = std::make_shared<MemorySource>(10);
  PartitionedSource source(storage, c);
  fetch_the_ten(source, from_storage);
  const auto n = source.counters();
  EXPECT_EQ(n.peer_failures, 5u);  // each of the peer's items counted
  EXPECT_EQ(n.storage_items, 10u);
  EXPECT_NE(source.last_peer_error().find(std::to_string(closed.port)), std::string::npos) << source.last_peer_error();
}

// Two Loaders as two nodes, each caching half the dataset (its partition), over 2 epochs.
struct TwoNodes {
  TempDir tmp{"peer_cache_nodes"};
  std::shared_ptr<ImageFolderReader> source;
  LoaderConfig config[2];
  std::ostringstream lines[2];
  core::HeldLoopbackPort ports[2];  // held while the nodes live: their servers bind them when built
  explicit TwoNodes(int io_depth) {
    source = std::make_shared<ImageFolderReader>(mlbench::testing_support::make_jpeg_folder(tmp.path(), 2, 8));
    const std::uint16_t p0 = ports[0].port(), p1 = ports[1].port();
    for (int r = 0; r < 2; ++r) {
      LoaderConfig& c = config[r];
      c.batch_size = 4;
      c.workers = 1;
      c.io_depth = io_depth;
      c.transform.image_size = 16;
      c.max_epochs = 2;
      c.seed = 11 + static_cast<std::uint64_t>(r);  // different orders, as two jobs would have
      c.cache = parse_cache_size("50%");
      c.partition = two_nodes(p0, p1, r);
    }
    // Built one after the other in one thread: node 0 cannot wait for node 1, which then finds it up.
    config[0].partition.join_timeout_s = 0;
    config[1].partition.join_timeout_s = 10;
    config[0].warnings = &lines[0];
    config[1].warnings = &lines[1];
  }
};

long drain(Loader& loader) {
  long batches = 0;
  while (loader.next()) ++batches;
  return batches;
}

void expect_each_partition_read_once(int io_depth) {
  TwoNodes nodes(io_depth);
  Loader a(nodes.source, nodes.config[0]), b(nodes.source, nodes.config[1]);
  long na = 0, nb = 0;
  std::thread tb([&] { nb = drain(b); });
  na = drain(a);
  tb.join();
  EXPECT_NE(nodes.lines[1].str().find("partitioned cache: rank 1 of 2: all peers up"), std::string::npos)
      << nodes.lines[1].str();
  EXPECT_EQ(na, 8);  // 16 items, batch 4, 2 epochs
  EXPECT_EQ(nb, 8);
  for (const Loader* l : {&a, &b}) {
    const auto j = l->to_json()["partitioned_cache"];
    ASSERT_TRUE(j.is_object());
    SCOPED_TRACE(j.dump());
    EXPECT_EQ(j["owned_items"], 8);
    // This node read its own 8 items from storage once, in epoch 1 (or the other node's request
    // had its owner read them first: then fewer); the other 8 came from the owner, twice.
    EXPECT_LE(j["storage"]["items"].get<int>(), 8);
    EXPECT_EQ(j["peer"]["cache_items"].get<int>() + j["peer"]["storage_items"].get<int>(), 16);
    EXPECT_EQ(j["peer"]["failures"], 0);
    EXPECT_EQ(j["peer"]["misses"], 0);
    // Read ahead, each batch's items of the peer went in one request (batches of 4 items: 2 of
    // the peer's on average), else one request per item.
    if (io_depth > 0) {
      EXPECT_LT(j["peer"]["requests"].get<int>(), 16);
    } else {
      EXPECT_EQ(j["peer"]["requests"], 16);
    }
    EXPECT_EQ(l->cache()->items(), 8u);  // its partition, and only it
    // Epoch 2's own items all hit; in epoch 1 an own item the other node asked for first hits too.
    EXPECT_GE(l->cache()->hits(), 8u);
    EXPECT_LE(l->cache()->hits(), 16u);
  }
  // Between the two nodes, each item left storage once: 16 reads, where two nodes caching half
  // each on their own read 2 x (16 + 8) = 48. (An owner's worker and its server can both miss
  // the same item at the same moment: then it is read twice; a few such races are allowed.)
  const auto ja = a.to_json()["partitioned_cache"], jb = b.to_json()["partitioned_cache"];
  const int reads = ja["storage"]["items"].get<int>() + jb["storage"]["items"].get<int>() +
                    ja["served"]["from_storage"].get<int>() + jb["served"]["from_storage"].get<int>();
  EXPECT_GE(reads, 16);
  EXPECT_LE(reads, 20);
}

// The ports picked for two nodes are two, and stay theirs until their servers listen: another
// socket (a later pick of a free port) cannot take one meanwhile. Picked by binding port 0 and
// letting go, both nodes had one port about once in 14,000 runs, and node 1 could not listen.
TEST(PeerCache, TheTwoNodesPortsCannotBeTakenBeforeTheirServersListen) {
  TwoNodes nodes(0);
  EXPECT_NE(nodes.ports[0].port(), nodes.ports[1].port());
  for (const core::HeldLoopbackPort& held : nodes.ports) {
    const int other = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(held.port());
    EXPECT_NE(::bind(other, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << "port " << held.port() << " was taken";
    EXPECT_EQ(errno, EADDRINUSE);
    ::close(other);
  }
  Loader a(nodes.source, nodes.config[0]), b(nodes.source, nodes.config[1]);
  std::thread tb([&] { drain(b); });
  EXPECT_EQ(drain(a), 8);
  tb.join();
}

TEST(PeerCache, TwoNodesReadEachItemFromStorageOnceSerialWorkers) {
  expect_each_partition_read_once(0);
}
TEST(PeerCache, TwoNodesReadEachItemFromStorageOnceWithReadAhead) {
  expect_each_partition_read_once(4);
}

// The trace tells a peer's item from a storage read: "read peer" on the I/O threads'
// tracks with read-ahead, "fetch peer" on the worker's without.
void expect_trace_names_peer_fetches(int io_depth, const char* peer_span, const char* storage_span) {
  TwoNodes nodes(io_depth);
  TraceRecorder trace;
  nodes.config[0].trace = &trace;
  Loader a(nodes.source, nodes.config[0]), b(nodes.source, nodes.config[1]);
  std::thread tb([&] { drain(b); });
  drain(a);
  tb.join();
  std::map<std::string, std::set<std::int64_t>> items;  // span name -> dataset indices
  const nlohmann::json events = trace.to_json()["traceEvents"];
  for (const auto& e : events) {
    if (e.contains("args") && e["args"].contains("item")) {
      items[e["name"].get<std::string>()].insert(e["args"]["item"].get<std::int64_t>());
    }
  }
  ASSERT_TRUE(items.count(peer_span)) << events.dump().substr(0, 2000);
  for (std::int64_t i : items[peer_span]) EXPECT_EQ(i % 2, 1) << "node 0 asked a peer for its own item " << i;
  for (std::int64_t i : items[storage_span]) EXPECT_EQ(i % 2, 0) << "node 0 read node 1's item " << i;
  EXPECT_EQ(items[peer_span].size(), 8u);  // node 1's 8 items
}

TEST(PeerCache, TheTraceNamesPeerFetchesWithReadAhead) {
  expect_trace_names_peer_fetches(4, "read peer", "read");
}
TEST(PeerCache, TheTraceNamesPeerFetchesSerialWorkers) {
  expect_trace_names_peer_fetches(0, "fetch peer", "fetch");
}

TEST(PeerCache, WhenTheOtherNodeIsGoneItsItemsComeFromStorageAndTrainingGoesOn) {
  TwoNodes nodes(0);
  // Node 1 never started (or died): its port refuses connections.
  nodes.config[0].partition.join_timeout_s = 0.2;
  Loader a(nodes.source, nodes.config[0]);
  EXPECT_NE(nodes.lines[0].str().find("rank(s) 1 not up after"), std::string::npos) << nodes.lines[0].str();
  EXPECT_EQ(drain(a), 8);
  const auto j = a.to_json()["partitioned_cache"];
  SCOPED_TRACE(j.dump());
  // Node 1's 8 items, in each of 2 epochs, from this node's storage; each counted.
  EXPECT_EQ(j["peer_failures"], 16);
  EXPECT_EQ(j["peer"]["cache_items"], 0);
  EXPECT_EQ(j["storage"]["items"], 8 + 16);
  EXPECT_NE(j["peer"]["last_error"].get<std::string>().find("127.0.0.1:"), std::string::npos);
  EXPECT_EQ(a.cache()->items(), 8u);  // node 1's items were not admitted
}

TEST(PeerCache, LoaderRefusesPeersWithoutACache) {
  TwoNodes nodes(0);
  nodes.config[0].cache = CacheCapacity{};
  try {
    Loader a(nodes.source, nodes.config[0]);
    ADD_FAILURE() << "accepted --peers without --cache-size";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--cache-size"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mlbench::pipeline
