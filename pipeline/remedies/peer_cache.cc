#include "pipeline/remedies/peer_cache.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "core/cli.h"
#include "core/process.h"
#include "pipeline/fetch_origin.h"
#include "pipeline/remedies/peer_rate.h"

namespace mlbench::pipeline {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

void put_u32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<std::uint8_t>(v & 0xff);
}
void put_u64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<std::uint8_t>(v & 0xff);
}
std::uint32_t get_u32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
  return v;
}
std::uint64_t get_u64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

std::uint64_t elapsed_ns(std::chrono::steady_clock::time_point since) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since).count());
}

std::array<std::uint8_t, kPeerNonceBytes> random_nonce() {
  std::array<std::uint8_t, kPeerNonceBytes> n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) throw std::runtime_error("peer cache: RAND_bytes failed");
  return n;
}

constexpr const char* kClientLabel = "mlbench-peer client";
constexpr const char* kServerLabel = "mlbench-peer server";

}  // namespace

std::array<std::uint8_t, 32> peer_proof(const std::string& secret, const std::string& label, const std::uint8_t* data,
                                        std::size_t size) {
  std::vector<std::uint8_t> message(label.begin(), label.end());
  message.insert(message.end(), data, data + size);
  std::array<std::uint8_t, 32> out{};
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), message.data(), message.size(), out.data(),
            &len) ||
      len != out.size()) {
    throw std::runtime_error("peer cache: HMAC-SHA256 failed");
  }
  return out;
}

std::string load_peer_secret() {
  if (const char* v = std::getenv("MLBENCH_PEER_SECRET"); v && *v) return v;
  namespace fs = std::filesystem;
  fs::path file;
  if (const char* f = std::getenv("MLBENCH_PEER_SECRET_FILE"); f && *f) {
    file = f;
  } else {
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    const char* home = std::getenv("HOME");
    if ((!xdg || !*xdg) && (!home || !*home)) {
      throw std::invalid_argument(
          "--peers: no shared secret: set MLBENCH_PEER_SECRET (the same on every node) or MLBENCH_PEER_SECRET_FILE");
    }
    file = (xdg && *xdg ? fs::path(xdg) : fs::path(home) / ".config") / "mlbench" / "peer-secret";
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    // Made once, 0600, never overwritten: written whole to a temporary file, then linked to its
    // name (link fails when another process made it first; both then read the same whole file).
    if (!fs::exists(file, ec)) {
      std::string tmp = file.string() + ".XXXXXX";
      const int fd = ::mkstemp(tmp.data());  // mode 0600
      if (fd < 0) {
        throw std::invalid_argument(fmt::format("--peers: cannot make the shared secret {}: {}", file.string(),
                                                std::strerror(errno)));
      }
      const std::string hex = core::random_hex(32) + "\n";
      const bool ok = ::write(fd, hex.data(), hex.size()) == static_cast<ssize_t>(hex.size()) && ::fsync(fd) == 0;
      ::close(fd);
      if (ok) (void)::link(tmp.c_str(), file.c_str());  // EEXIST: another process's is the one
      ::unlink(tmp.c_str());
      if (!ok) throw std::invalid_argument("--peers: cannot write the shared secret " + file.string());
    }
  }
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw std::invalid_argument(fmt::format("--peers: cannot read the shared secret {}: {}", file.string(),
                                            std::strerror(errno)));
  }
  struct stat st {};
  ::fstat(fd, &st);
  if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    ::close(fd);
    throw std::invalid_argument(fmt::format(
        "--peers: the shared secret {} must belong to this user and be readable by no one else (chmod 600 it)",
        file.string()));
  }
  std::string text(4096, '\0');
  const ssize_t n = ::read(fd, text.data(), text.size());
  ::close(fd);
  text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (text.empty()) throw std::invalid_argument("--peers: the shared secret " + file.string() + " is empty");
  return text;
}

std::vector<PeerAddress> parse_peers(const std::string& text) {
  std::vector<PeerAddress> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string entry = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::size_t colon = entry.rfind(':');
    if (entry.empty() || colon == std::string::npos || colon == 0 || colon + 1 == entry.size()) {
      throw std::invalid_argument(fmt::format("--peers: '{}' is not host:port", entry));
    }
    std::string host = entry.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    const std::string port_text = entry.substr(colon + 1);
    long port = -1;
    const char* end = port_text.data() + port_text.size();
    const auto [stop, err] = std::from_chars(port_text.data(), end, port);
    if (err != std::errc() || stop != end || port < 1 || port > 65535) {
      throw std::invalid_argument(fmt::format("--peers: '{}' has no port in 1..65535", entry));
    }
    for (std::size_t r = 0; r < out.size(); ++r) {
      if (out[r].host == host && out[r].port == port) {
        throw std::invalid_argument(fmt::format(
            "--peers: '{}' is given twice (ranks {} and {}): every node needs an address of its own", entry, r,
            out.size()));
      }
    }
    out.push_back({host, static_cast<std::uint16_t>(port)});
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// --- server ----------------------------------------------------------------------------------

struct PeerCacheServer::Impl {
  asio::io_context ctx;
  tcp::acceptor acceptor{ctx};
  std::size_t items = 0;
  PartitionConfig partition;
  Lookup lookup;
  std::vector<std::thread> threads;
  std::atomic<std::uint64_t> requests{0}, from_cache{0}, from_storage{0}, misses{0}, rejected{0}, bytes{0},
      storage_bytes{0}, messages{0}, unauthenticated{0}, connections_refused{0}, accept_errors{0};
  std::atomic<std::int64_t> last_request_ns{0};  // steady clock
  std::atomic<int> sessions{0};
  int max_sessions = 64;
  asio::steady_timer accept_retry{ctx};

  void accept();
};

namespace {

// One peer's connection: read a request, answer it, read the next; one operation
// outstanding at a time, so its handlers never run concurrently.
// A connection proves the run's secret first (the handshake, peer_cache.h) within the
// timeout; its handlers run on a strand (the handshake's timer and its reads never race).
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(PeerCacheServer::Impl* server, tcp::socket socket)
      : server_(server),
        strand_(asio::make_strand(server->ctx)),
        socket_(std::move(socket)),
        auth_timer_(strand_) {
    ++server_->sessions;
  }
  ~Session() { --server_->sessions; }
  void start() {
    auto self = shared_from_this();
    asio::dispatch(strand_, [this, self] { hello(); });
  }

 private:
  void hello() {
    auto self = shared_from_this();
    auth_timer_.expires_after(seconds(std::max(0.2, server_->partition.timeout_s)));
    auth_timer_.async_wait(asio::bind_executor(strand_, [this, self](error_code ec) {
      if (ec || authenticated_) return;
      ++server_->unauthenticated;  // silent: closed with nothing served
      close();
    }));
    put_u32(hello_.data(), kPeerHelloMagic);
    const auto nonce = random_nonce();
    std::memcpy(hello_.data() + 4, nonce.data(), nonce.size());
    asio::async_write(socket_, asio::buffer(hello_), asio::bind_executor(strand_, [this, self](error_code ec, std::size_t) {
      if (ec) return;
      asio::async_read(socket_, asio::buffer(proof_), asio::bind_executor(strand_, [this, self](error_code ec2, std::size_t) {
        if (ec2) return;
        const auto want = peer_proof(server_->partition.secret, kClientLabel, hello_.data() + 4, kPeerNonceBytes);
        if (CRYPTO_memcmp(want.data(), proof_.data(), want.size()) != 0) {
          ++server_->unauthenticated;
          return close();
        }
        authenticated_ = true;
        auth_timer_.cancel();
        // The server's proof over the client's nonce and its own.
        std::array<std::uint8_t, 2 * kPeerNonceBytes> both{};
        std::memcpy(both.data(), proof_.data() + 32, kPeerNonceBytes);
        std::memcpy(both.data() + kPeerNonceBytes, hello_.data() + 4, kPeerNonceBytes);
        server_proof_ = peer_proof(server_->partition.secret, kServerLabel, both.data(), both.size());
        asio::async_write(socket_, asio::buffer(server_proof_), asio::bind_executor(strand_, [this, self](error_code ec3, std::size_t) {
          if (!ec3) read_request();
        }));
      }));
    }));
  }

  void close() {
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  void read_request() {
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(length_.data(), 4), asio::bind_executor(strand_, [this, self](error_code ec, std::size_t) {
      if (ec) return;  // the peer closed, or the server stops
      // 4 + 8 n bytes for 1..kPeerMaxIds ids; else oversized or short: the framing is lost.
      const std::uint32_t length = get_u32(length_.data());
      if (length < kPeerRequestBytes || length > 4 + 8 * kPeerMaxIds || (length - 4) % 8 != 0) return reject();
      request_.resize(length);
      asio::async_read(socket_, asio::buffer(request_), asio::bind_executor(strand_, [this, self](error_code ec2, std::size_t) {
        if (ec2) return;
        if (get_u32(request_.data()) != kPeerMagic) return reject();
        answer();
      }));
    }));
  }

  void reject() {
    ++server_->rejected;
    close();
  }

  // One id's reply: its header at `header`, its body into `body` (null for none).
  void answer_one(std::uint64_t id, std::uint8_t* header, std::shared_ptr<const Bytes>& body) {
    ++server_->requests;
    PeerStatus status = PeerStatus::kRejected;
    if (id < server_->items && server_->partition.owns(static_cast<std::size_t>(id))) {
      try {
        status = server_->lookup(static_cast<std::size_t>(id), body);
      } catch (const std::exception&) {
        status = PeerStatus::kMiss;
      }
      if ((status == PeerStatus::kCacheHit || status == PeerStatus::kStorage) && !body) status = PeerStatus::kMiss;
    }
    switch (status) {
      case PeerStatus::kCacheHit:
        ++server_->from_cache;
        break;
      case PeerStatus::kStorage:
        ++server_->from_storage;
        break;
      case PeerStatus::kMiss:
        ++server_->misses;
        break;
      case PeerStatus::kRejected:
        ++server_->rejected;
        break;
    }
    const bool has_body = status == PeerStatus::kCacheHit || status == PeerStatus::kStorage;
    if (!has_body) body.reset();
    const std::uint64_t length = has_body ? body->size() : 0;
    put_u32(header, static_cast<std::uint32_t>(status));
    put_u64(header + 4, length);
    if (has_body) server_->bytes += length;
    if (status == PeerStatus::kStorage) server_->storage_bytes += length;
  }

  void answer() {
    ++server_->messages;
    server_->last_request_ns = std::chrono::steady_clock::now().time_since_epoch().count();
    const std::size_t n = (request_.size() - 4) / 8;
    headers_.assign(n * kPeerReplyHeaderBytes, 0);
    bodies_.assign(n, nullptr);
    buffers_.clear();
    for (std::size_t k = 0; k < n; ++k) {
      std::uint8_t* header = headers_.data() + k * kPeerReplyHeaderBytes;
      answer_one(get_u64(request_.data() + 4 + 8 * k), header, bodies_[k]);
      buffers_.push_back(asio::buffer(header, kPeerReplyHeaderBytes));
      if (bodies_[k] && !bodies_[k]->empty()) buffers_.push_back(asio::buffer(*bodies_[k]));
    }
    auto self = shared_from_this();
    asio::async_write(socket_, buffers_, asio::bind_executor(strand_, [this, self](error_code ec, std::size_t) {
      bodies_.clear();
      if (!ec) read_request();
    }));
  }

  PeerCacheServer::Impl* server_;
  asio::strand<asio::io_context::executor_type> strand_;
  tcp::socket socket_;
  asio::steady_timer auth_timer_;
  bool authenticated_ = false;
  std::array<std::uint8_t, 4 + kPeerNonceBytes> hello_{};
  std::array<std::uint8_t, 32 + kPeerNonceBytes> proof_{};  // the client's proof, then its nonce
  std::array<std::uint8_t, 32> server_proof_{};
  std::array<std::uint8_t, 4> length_{};
  std::vector<std::uint8_t> request_;  // magic and ids
  std::vector<std::uint8_t> headers_;  // one reply header per id
  std::vector<std::shared_ptr<const Bytes>> bodies_;
  std::vector<asio::const_buffer> buffers_;
};

}  // namespace

void PeerCacheServer::Impl::accept() {
  acceptor.async_accept([this](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // Out of file descriptors (EMFILE, ENFILE) or another failure of the accept: not this
      // process's end; try again a little later (at once would spin on the same error).
      ++accept_errors;
      accept_retry.expires_after(std::chrono::milliseconds(100));
      accept_retry.async_wait([this](error_code e) {
        if (!e) accept();
      });
      return;
    }
    if (sessions.load() >= max_sessions) {
      ++connections_refused;  // a flood: the run's own peers need far fewer
      error_code ignored;
      socket.close(ignored);
    } else {
      socket.set_option(tcp::no_delay(true), ec);
      std::make_shared<Session>(this, std::move(socket))->start();
    }
    accept();
  });
}

PeerCacheServer::PeerCacheServer(const PeerAddress& listen, std::size_t items, const PartitionConfig& partition,
                                 Lookup lookup)
    : impl_(std::make_unique<Impl>()) {
  impl_->items = items;
  impl_->partition = partition;
  impl_->last_request_ns = std::chrono::steady_clock::now().time_since_epoch().count();
  impl_->lookup = std::move(lookup);
  if (partition.secret.empty()) throw std::runtime_error("peer cache: no shared secret (PartitionConfig::secret)");
  {
    rlimit lim{};
    const long fds = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY
                         ? static_cast<long>(lim.rlim_cur)
                         : 1024;
    impl_->max_sessions =
        static_cast<int>(std::max<long>(4, std::min<long>(16L * partition.world() + 16, fds / 4)));
  }
  error_code ec;
  auto address = asio::ip::make_address(listen.host == "localhost" ? "127.0.0.1" : listen.host, ec);
  if (ec) {
    // A host name (this node's, as the others reach it): listen on the address it resolves to.
    tcp::resolver resolver(impl_->ctx);
    error_code rec;
    const auto found = resolver.resolve(listen.host, std::to_string(listen.port), rec);
    if (rec || found.empty()) {
      throw std::runtime_error(fmt::format("peer cache: cannot listen on {}: {} ({})", listen.to_string(),
                                           rec ? "its name does not resolve" : "no address",
                                           rec ? rec.message() : "empty answer"));
    }
    address = found.begin()->endpoint().address();
    ec.clear();
  }
  const tcp::endpoint endpoint(address, listen.port);
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw std::runtime_error(fmt::format("peer cache: cannot listen on {}: {}", listen.to_string(), ec.message()));
  impl_->accept();
  const int n = std::max(1, partition.server_threads);
  for (int i = 0; i < n; ++i) {
    impl_->threads.emplace_back([this] {
      // A handler's exception must not end the training run: count it and serve on.
      for (;;) {
        try {
          impl_->ctx.run();
          return;
        } catch (const std::exception&) {
          ++impl_->accept_errors;
        }
      }
    });
  }
}

PeerCacheServer::~PeerCacheServer() {
  impl_->ctx.stop();
  for (auto& t : impl_->threads) t.join();
  error_code ignored;
  impl_->acceptor.close(ignored);  // the sessions go with the io_context
}

std::uint16_t PeerCacheServer::port() const {
  return impl_->acceptor.local_endpoint().port();
}

double PeerCacheServer::seconds_since_last_request() const {
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return std::chrono::duration<double>(std::chrono::steady_clock::duration(now - impl_->last_request_ns.load()))
      .count();
}

PeerCacheServer::Counters PeerCacheServer::counters() const {
  Counters c;
  c.requests = impl_->requests.load();
  c.from_cache = impl_->from_cache.load();
  c.from_storage = impl_->from_storage.load();
  c.misses = impl_->misses.load();
  c.rejected = impl_->rejected.load();
  c.bytes = impl_->bytes.load();
  c.storage_bytes = impl_->storage_bytes.load();
  c.messages = impl_->messages.load();
  c.unauthenticated = impl_->unauthenticated.load();
  c.connections_refused = impl_->connections_refused.load();
  c.accept_errors = impl_->accept_errors.load();
  return c;
}

int PeerCacheServer::max_sessions() const { return impl_->max_sessions; }

// --- client ----------------------------------------------------------------------------------

namespace {

// One connection with its own io_context, so that any thread can drive it (one at a time).
struct Connection {
  asio::io_context ctx;
  tcp::socket socket{ctx};

  // Runs the operations started on this connection until they finish or `deadline`
  // passes; then cancels them (closing the socket) and returns false.
  bool run_until(std::chrono::steady_clock::time_point deadline) {
    ctx.restart();
    ctx.run_until(deadline);
    if (ctx.stopped()) return true;
    error_code ignored;
    socket.close(ignored);
    ctx.restart();
    ctx.run();  // the cancelled handlers
    return false;
  }
};

// Connects `conn` to `address` (an address as given, else the name resolved) by `deadline`.
// Returns "" when connected, else why not: "resolve: ...", "connect " + `timed_out`, "connect: ...".
std::string connect(Connection& conn, const PeerAddress& address, std::chrono::steady_clock::time_point deadline,
                    const std::string& timed_out, const std::string& secret) {
  error_code ec;
  std::vector<tcp::endpoint> endpoints;
  const auto ip = asio::ip::make_address(address.host, ec);
  if (!ec) {
    endpoints.emplace_back(ip, address.port);
  } else {
    tcp::resolver resolver(conn.ctx);
    const auto found = resolver.resolve(address.host, std::to_string(address.port), ec);
    if (ec) return "resolve: " + ec.message();
    for (const auto& e : found) endpoints.push_back(e.endpoint());
  }
  ec = asio::error::would_block;
  asio::async_connect(conn.socket, endpoints, [&](error_code e, const tcp::endpoint&) { ec = e; });
  if (!conn.run_until(deadline)) return "connect " + timed_out;
  if (ec) return "connect: " + ec.message();
  conn.socket.set_option(tcp::no_delay(true), ec);
  // The handshake (peer_cache.h): the server's nonce, this end's proof and nonce, the server's proof.
  std::array<std::uint8_t, 4 + kPeerNonceBytes> hello{};
  ec = asio::error::would_block;
  asio::async_read(conn.socket, asio::buffer(hello), [&](error_code e, std::size_t) { ec = e; });
  if (!conn.run_until(deadline)) return "handshake " + timed_out;
  if (ec) return "handshake: " + (ec == asio::error::eof ? std::string("closed the connection") : ec.message());
  if (get_u32(hello.data()) != kPeerHelloMagic) return "handshake: not an mlbench peer (no MLPA greeting)";
  const auto nonce = random_nonce();
  std::array<std::uint8_t, 32 + kPeerNonceBytes> mine{};
  const auto proof = peer_proof(secret, kClientLabel, hello.data() + 4, kPeerNonceBytes);
  std::memcpy(mine.data(), proof.data(), proof.size());
  std::memcpy(mine.data() + 32, nonce.data(), nonce.size());
  std::array<std::uint8_t, 32> theirs{};
  ec = asio::error::would_block;
  asio::async_write(conn.socket, asio::buffer(mine), [&](error_code e, std::size_t) {
    ec = e;
    if (!e) asio::async_read(conn.socket, asio::buffer(theirs), [&](error_code e2, std::size_t) { ec = e2; });
  });
  if (!conn.run_until(deadline)) return "handshake " + timed_out;
  if (ec) {
    return ec == asio::error::eof ? "handshake: the peer closed the connection (it does not hold this run's secret)"
                                  : "handshake: " + ec.message();
  }
  std::array<std::uint8_t, 2 * kPeerNonceBytes> both{};
  std::memcpy(both.data(), nonce.data(), kPeerNonceBytes);
  std::memcpy(both.data() + kPeerNonceBytes, hello.data() + 4, kPeerNonceBytes);
  const auto want = peer_proof(secret, kServerLabel, both.data(), both.size());
  if (CRYPTO_memcmp(want.data(), theirs.data(), want.size()) != 0) {
    return "handshake: the peer does not hold this run's secret";
  }
  return {};
}

}  // namespace

struct PeerCacheClient::Impl {
  PartitionConfig config;
  Clock clock;
  struct Peer {
    mutable std::mutex mu;
    std::vector<std::unique_ptr<Connection>> idle;
    std::chrono::steady_clock::time_point down_until{};
    std::string down_reason;
  };
  std::vector<std::unique_ptr<Peer>> peers;

  std::chrono::steady_clock::time_point now() const { return clock ? clock() : std::chrono::steady_clock::now(); }
};

PeerCacheClient::PeerCacheClient(PartitionConfig config, Clock clock) : impl_(std::make_unique<Impl>()) {
  if (config.secret.empty()) throw std::runtime_error("peer cache: no shared secret (PartitionConfig::secret)");
  impl_->config = std::move(config);
  impl_->clock = std::move(clock);
  for (std::size_t i = 0; i < impl_->config.peers.size(); ++i) impl_->peers.push_back(std::make_unique<Impl::Peer>());
}

PeerCacheClient::~PeerCacheClient() = default;

std::size_t PeerCacheClient::idle_connections(int peer) const {
  const auto& p = *impl_->peers.at(static_cast<std::size_t>(peer));
  std::lock_guard lock(p.mu);
  return p.idle.size();
}

bool PeerCacheClient::wait_until_up(int peer, double timeout_s) {
  if (peer < 0 || peer >= static_cast<int>(impl_->peers.size())) return false;
  const PeerAddress& address = impl_->config.peers[static_cast<std::size_t>(peer)];
  const auto deadline = std::chrono::steady_clock::now() + seconds(timeout_s);
  for (;;) {
    auto conn = std::make_unique<Connection>();
    const auto attempt = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1));
    if (connect(*conn, address, attempt, "timed out", impl_->config.secret).empty()) {
      auto& p = *impl_->peers[static_cast<std::size_t>(peer)];
      std::lock_guard lock(p.mu);
      p.down_until = {};
      p.idle.push_back(std::move(conn));
      return true;
    }
    if (std::chrono::steady_clock::now() + std::chrono::milliseconds(50) >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

PeerCacheClient::Reply PeerCacheClient::get(int peer, std::size_t index, Bytes& out) {
  Reply result;
  get_many(peer, {index}, [&](std::size_t, const Reply& reply, Bytes& bytes) {
    result = reply;
    if (reply.result == Result::kHit) out.swap(bytes);
  });
  return result;
}

void PeerCacheClient::get_many(int peer, const std::vector<std::size_t>& indices, const EachReply& each) {
  if (indices.empty()) return;
  if (indices.size() > kPeerMaxIds) {
    throw std::invalid_argument(
        fmt::format("peer cache: {} ids in one request, more than {}", indices.size(), kPeerMaxIds));
  }
  Bytes none;
  auto fail_from = [&](std::size_t k, const std::string& reason) {
    for (; k < indices.size(); ++k) {
      none.clear();
      each(k, Reply{Result::kFailed, PeerStatus::kMiss, reason}, none);
    }
  };
  if (peer < 0 || peer >= static_cast<int>(impl_->peers.size())) return fail_from(0, fmt::format("no peer {}", peer));
  auto& p = *impl_->peers[static_cast<std::size_t>(peer)];
  const PeerAddress& address = impl_->config.peers[static_cast<std::size_t>(peer)];
  std::unique_ptr<Connection> conn;
  {
    std::unique_lock lock(p.mu);
    if (impl_->now() < p.down_until) {
      const std::string reason = fmt::format("{} skipped after: {}", address.to_string(), p.down_reason);
      lock.unlock();
      return fail_from(0, reason);
    }
    if (!p.idle.empty()) {
      conn = std::move(p.idle.back());
      p.idle.pop_back();
    }
  }
  auto deadline = std::chrono::steady_clock::now() + seconds(impl_->config.timeout_s);
  // The connection failed at item k: that peer is skipped for a while, this and the others to it dropped.
  auto fail = [&](std::size_t k, const std::string& what) {
    const std::string reason = fmt::format("{}: {}", address.to_string(), what);
    {
      std::lock_guard lock(p.mu);
      p.down_until = impl_->now() + seconds(impl_->config.retry_after_s);
      p.down_reason = reason;
      p.idle.clear();  // the others to that peer are as suspect
    }
    fail_from(k, reason);
  };
  const std::string timed_out = fmt::format("timed out after {} s", impl_->config.timeout_s);

  if (!conn) {
    conn = std::make_unique<Connection>();
    if (const std::string why = connect(*conn, address, deadline, timed_out, impl_->config.secret); !why.empty()) {
      return fail(0, why);
    }
  }
  error_code ec;
  std::vector<std::uint8_t> request(8 + 8 * indices.size());
  put_u32(request.data(), static_cast<std::uint32_t>(4 + 8 * indices.size()));
  put_u32(request.data() + 4, kPeerMagic);
  for (std::size_t k = 0; k < indices.size(); ++k) put_u64(request.data() + 8 + 8 * k, indices[k]);
  ec = asio::error::would_block;
  asio::async_write(conn->socket, asio::buffer(request), [&](error_code e, std::size_t) { ec = e; });
  if (!conn->run_until(deadline)) return fail(0, timed_out);
  if (ec) return fail(0, ec == asio::error::eof ? "closed the connection" : ec.message());

  Bytes body;
  for (std::size_t k = 0; k < indices.size(); ++k) {
    std::array<std::uint8_t, kPeerReplyHeaderBytes> header{};
    ec = asio::error::would_block;
    asio::async_read(conn->socket, asio::buffer(header), [&](error_code e, std::size_t) { ec = e; });
    if (!conn->run_until(deadline)) return fail(k, timed_out);
    if (ec) return fail(k, ec == asio::error::eof ? "closed the connection" : ec.message());
    const std::uint32_t status = get_u32(header.data());
    const std::uint64_t length = get_u64(header.data() + 4);
    if (status > static_cast<std::uint32_t>(PeerStatus::kRejected))
      return fail(k, fmt::format("bad reply status {}", status));
    const auto st = static_cast<PeerStatus>(status);
    const bool has_body = st == PeerStatus::kCacheHit || st == PeerStatus::kStorage;
    if (!has_body && length != 0) return fail(k, "a miss with a body");
    if (length > impl_->config.max_item_bytes) {
      return fail(k, fmt::format("announced {} bytes, more than the {} an item may have", length,
                                 impl_->config.max_item_bytes));
    }
    body.clear();
    if (has_body && length > 0) {
      body.resize(static_cast<std::size_t>(length));
      ec = asio::error::would_block;
      asio::async_read(conn->socket, asio::buffer(body), [&](error_code e, std::size_t) { ec = e; });
      if (!conn->run_until(deadline)) return fail(k, timed_out);
      if (ec) return fail(k, ec == asio::error::eof ? "closed the connection mid-item" : ec.message());
    }
    // A peer that keeps answering is not cut off: the timeout bounds each reply.
    deadline = std::chrono::steady_clock::now() + seconds(impl_->config.timeout_s);
    if (k + 1 == indices.size()) {
      std::lock_guard lock(p.mu);
      p.idle.push_back(std::move(conn));  // before the last item is handed on: the connection is free
    }
    if (st == PeerStatus::kRejected) {
      each(k, Reply{Result::kMiss, st, "rejected"}, body);
    } else {
      each(k, Reply{has_body ? Result::kHit : Result::kMiss, st, {}}, body);
    }
  }
}

// --- the loader's source -----------------------------------------------------------------------

FetchOrigin& this_thread_fetch_origin() {
  thread_local FetchOrigin origin = FetchOrigin::kUnknown;
  return origin;
}

// The batched requests (will_fetch): per peer a queue of requests and a thread that sends
// them; each asked item's slot, until fetch() or fetch_if_cached() takes it.
struct PartitionedSource::Prefetch {
  // Items asked for and not taken, at most (a batch withdrawn before its reads leaves its
  // items here; past this, items are asked for one at a time).
  static constexpr std::size_t kMaxSlots = 4096;
  struct Slot {
    bool done = false;
    bool taken = false;  // handed to one reader: a slot's bytes serve one read only
    PeerCacheClient::Reply reply;
    Bytes bytes;
  };
  std::mutex mu;
  std::condition_variable work_cv, done_cv;
  std::unordered_map<std::size_t, std::shared_ptr<Slot>> slots;
  std::vector<std::deque<std::vector<std::size_t>>> work;  // per peer rank
  std::vector<std::thread> threads;                        // started at the first will_fetch
  bool stopping = false;

  // Takes the slot of `index` (it is then no longer asked for): waiting for its reply when
  // `wait`, else only one whose item arrived. Null when there is none to take. A slot is
  // taken once: two reads of one item (an epoch's last batch and the next epoch's first, which
  // found the slot still asked for) once both took it while one waited, and the item was
  // delivered twice (one reply, two counts, the second read's bytes swapped away); the read
  // that finds its slot taken now asks the peer itself.
  std::shared_ptr<Slot> take(std::size_t index, bool wait) {
    std::unique_lock lock(mu);
    const auto it = slots.find(index);
    if (it == slots.end()) return nullptr;
    std::shared_ptr<Slot> slot = it->second;
    if (wait) {
      done_cv.wait(lock, [&] { return slot->done; });
    } else if (!slot->done || slot->reply.result != PeerCacheClient::Result::kHit) {
      return nullptr;  // under way, or failed: left to fetch()
    }
    if (slot->taken) return nullptr;
    slot->taken = true;
    // Only this slot: while this reader waited, the item's slot may have been taken and a new
    // one asked for under the same index.
    if (const auto now = slots.find(index); now != slots.end() && now->second == slot) slots.erase(now);
    return slot;
  }
};

PartitionedSource::PartitionedSource(std::shared_ptr<const ItemSource> storage, PartitionConfig config,
                                     PeerCacheClient::Clock clock)
    : storage_(std::move(storage)), config_(config), client_(std::move(config), std::move(clock)) {
  if (config_.enabled() && config_.max_ids_per_request > 1) {
    prefetch_ = std::make_unique<Prefetch>();
    prefetch_->work.resize(static_cast<std::size_t>(config_.world()));
  }
}

PartitionedSource::~PartitionedSource() {
  if (!prefetch_) return;
  {
    std::lock_guard lock(prefetch_->mu);
    prefetch_->stopping = true;
  }
  prefetch_->work_cv.notify_all();
  for (auto& t : prefetch_->threads) t.join();
}

void PartitionedSource::from_storage(std::size_t index, Bytes& out) const {
  this_thread_fetch_origin() = FetchOrigin::kStorage;
  const auto t0 = std::chrono::steady_clock::now();
  storage_->fetch(index, out);
  storage_ns_ += elapsed_ns(t0);
  ++storage_items_;
  storage_bytes_ += out.size();
}

void PartitionedSource::deliver(std::size_t index, const PeerCacheClient::Reply& reply, Bytes& out) const {
  if (reply.result == PeerCacheClient::Result::kHit) {
    this_thread_fetch_origin() = FetchOrigin::kPeer;
    ++(reply.status == PeerStatus::kCacheHit ? peer_cache_items_ : peer_storage_items_);
    peer_bytes_ += out.size();
    return;
  }
  if (reply.result == PeerCacheClient::Result::kMiss) {
    ++peer_misses_;
  } else {
    ++peer_failures_;
    std::lock_guard lock(error_mu_);
    last_error_ = reply.error;
  }
  from_storage(index, out);
}

void PartitionedSource::will_fetch(const std::vector<std::size_t>& items) const {
  if (!prefetch_) return;
  Prefetch& pf = *prefetch_;
  const auto per_request = static_cast<std::size_t>(std::min<int>(config_.max_ids_per_request, kPeerMaxIds));
  {
    std::lock_guard lock(pf.mu);
    if (pf.stopping) return;
    std::vector<std::vector<std::size_t>> asked(pf.work.size());
    for (std::size_t i : items) {
      if (config_.owns(i) || i >= size() || pf.slots.size() >= Prefetch::kMaxSlots) continue;
      if (!pf.slots.emplace(i, std::make_shared<Prefetch::Slot>()).second) continue;  // already asked for
      auto& ids = asked[static_cast<std::size_t>(config_.owner(i))];
      ids.push_back(i);
      if (ids.size() == per_request) {
        pf.work[static_cast<std::size_t>(config_.owner(i))].push_back(std::move(ids));
        ids.clear();
      }
    }
    for (std::size_t r = 0; r < asked.size(); ++r) {
      if (!asked[r].empty()) pf.work[r].push_back(std::move(asked[r]));
    }
    if (pf.threads.empty()) {
      for (int r = 0; r < config_.world(); ++r) {
        if (r != config_.rank) pf.threads.emplace_back([this, r] { prefetch_loop(r); });
      }
    }
  }
  pf.work_cv.notify_all();
}

void PartitionedSource::prefetch_loop(int peer) const {
  Prefetch& pf = *prefetch_;
  TraceRecorder::Track* track = trace_ ? &trace_->add_track(fmt::format("peer {}", peer)) : nullptr;
  auto& queue = pf.work[static_cast<std::size_t>(peer)];
  for (;;) {
    std::vector<std::size_t> ids;
    {
      std::unique_lock lock(pf.mu);
      pf.work_cv.wait(lock, [&] { return pf.stopping || !queue.empty(); });
      if (pf.stopping) break;
      ids = std::move(queue.front());
      queue.pop_front();
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto since = t0;
    ++peer_requests_;
    client_.get_many(peer, ids, [&](std::size_t k, const PeerCacheClient::Reply& reply, Bytes& bytes) {
      {
        std::lock_guard lock(pf.mu);
        auto it = pf.slots.find(ids[k]);
        if (it != pf.slots.end()) {
          it->second->reply = reply;
          it->second->bytes.swap(bytes);
          it->second->done = true;
        }
      }
      pf.done_cv.notify_all();
      if (track) {
        // Back to back: the first item's span holds the round trip, each next one its own transfer.
        const auto now = std::chrono::steady_clock::now();
        track->span("read peer", since, now, -1, static_cast<std::int64_t>(ids[k]));
        since = now;
      }
    });
    peer_ns_ += elapsed_ns(t0);
  }
  // Stopping: whoever still waits for an item of this peer reads it from storage.
  {
    std::lock_guard lock(pf.mu);
    for (auto& [index, slot] : pf.slots) {
      if (!slot->done && config_.owner(index) == peer) {
        slot->reply = {PeerCacheClient::Result::kFailed, PeerStatus::kMiss, "the loader stopped"};
        slot->done = true;
      }
    }
  }
  pf.done_cv.notify_all();
}

void PartitionedSource::fetch(std::size_t index, Bytes& out) const {
  if (config_.owns(index)) return from_storage(index, out);
  if (const auto slot = prefetch_ ? prefetch_->take(index, true) : nullptr) {
    out.swap(slot->bytes);
    return deliver(index, slot->reply, out);
  }
  const auto t0 = std::chrono::steady_clock::now();
  ++peer_requests_;
  const auto reply = client_.get(config_.owner(index), index, out);
  peer_ns_ += elapsed_ns(t0);
  deliver(index, reply, out);
}

bool PartitionedSource::fetch_if_cached(std::size_t index, Bytes& out) const {
  if (!config_.owns(index)) {
    // An item of a peer's that already arrived (a batched request's); one that failed or is
    // still under way is left to fetch().
    const auto slot = prefetch_ ? prefetch_->take(index, false) : nullptr;
    if (!slot) return false;
    out.swap(slot->bytes);
    deliver(index, slot->reply, out);
    return true;
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (!storage_->fetch_if_cached(index, out)) return false;
  this_thread_fetch_origin() = FetchOrigin::kStorage;
  storage_ns_ += elapsed_ns(t0);
  ++storage_items_;
  storage_bytes_ += out.size();
  return true;
}

std::vector<int> PartitionedSource::wait_for_peers(double timeout_s) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::vector<int> down;
  for (int r = 0; r < config_.world(); ++r) {
    if (r == config_.rank) continue;
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (!client_.wait_until_up(r, std::max(left, 0.0))) down.push_back(r);
  }
  return down;
}

PartitionedSource::Counters PartitionedSource::counters() const {
  return {peer_cache_items_.load(), peer_storage_items_.load(), peer_bytes_.load(),    peer_ns_.load(),
          peer_misses_.load(),      peer_failures_.load(),      storage_items_.load(), storage_bytes_.load(),
          storage_ns_.load(),       peer_requests_.load()};
}

std::string PartitionedSource::last_peer_error() const {
  std::lock_guard lock(error_mu_);
  return last_error_;
}

LoopbackPeerRate loopback_peer_rate(std::size_t item_bytes, int threads, double duration_s, int ids_per_request) {
  PartitionConfig config;
  config.rank = 1;
  config.peers = {{"127.0.0.1", 1}, {"127.0.0.1", 0}};
  config.server_threads = std::max(1, threads);
  config.secret = core::random_hex(32);  // this process's own loopback pair: a secret of its own
  auto item = std::make_shared<const Bytes>(std::max<std::size_t>(1, item_bytes), std::uint8_t{7});
  PeerCacheServer server(config.peers[1], std::size_t{1} << 20, config,
                         [item](std::size_t, std::shared_ptr<const Bytes>& out) {
                           out = item;
                           return PeerStatus::kCacheHit;
                         });
  config.peers[1].port = server.port();
  config.rank = 0;
  PeerCacheClient client(config);
  const auto per_request = static_cast<std::size_t>(std::clamp<int>(ids_per_request, 1, kPeerMaxIds));
  std::atomic<std::uint64_t> fetched{0};
  std::atomic<bool> failed{false};
  const double cpu0 = core::process_cpu_now().total();
  const auto t0 = std::chrono::steady_clock::now();
  const auto until = t0 + seconds(duration_s);
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, threads); ++t) {
    pool.emplace_back([&, t] {
      std::vector<std::size_t> ids(per_request);
      std::size_t next = 2 * static_cast<std::size_t>(t) + 1;  // odd ids: the server's partition
      while (std::chrono::steady_clock::now() < until && !failed) {
        for (auto& id : ids) {
          id = next % (std::size_t{1} << 20);
          next += 2 * static_cast<std::size_t>(std::max(1, threads));
        }
        client.get_many(1, ids, [&](std::size_t, const PeerCacheClient::Reply& r, Bytes&) {
          if (r.result != PeerCacheClient::Result::kHit) {
            failed = true;
          } else {
            ++fetched;
          }
        });
      }
    });
  }
  for (auto& t : pool) t.join();
  if (failed) throw std::runtime_error("peer cache: the loopback rate measurement failed");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double n = static_cast<double>(std::max<std::uint64_t>(1, fetched.load()));
  return {static_cast<double>(fetched.load()) / s, (core::process_cpu_now().total() - cpu0) / n};
}

nlohmann::json partitioned_cache_report(const PartitionedSource& source, const PeerCacheServer* server) {
  const auto& c = source.config();
  const auto n = source.counters();
  nlohmann::json peers = nlohmann::json::array();
  for (const auto& p : c.peers) peers.push_back(p.to_string());
  // Items i < size with i % world == rank.
  const auto world = static_cast<std::size_t>(c.world()), rank = static_cast<std::size_t>(c.rank);
  const std::size_t owned = source.size() > rank ? (source.size() - rank + world - 1) / world : 0;
  const std::string error = source.last_peer_error();
  nlohmann::json j = {
      {"rank", c.rank},
      {"world", c.world()},
      {"peers", peers},
      {"owned_items", owned},
      {"timeout_s", c.timeout_s},
      {"retry_after_s", c.retry_after_s},
      {"max_ids_per_request", c.max_ids_per_request},
      {"peer",
       {{"cache_items", n.peer_cache_items},
        {"storage_items", n.peer_storage_items},
        {"bytes", n.peer_bytes},
        {"seconds", static_cast<double>(n.peer_ns) * 1e-9},
        {"requests", n.peer_requests},
        {"misses", n.peer_misses},
        {"failures", n.peer_failures},
        {"last_error", error.empty() ? nlohmann::json() : nlohmann::json(error)}}},
      {"storage",
       {{"items", n.storage_items}, {"bytes", n.storage_bytes}, {"seconds", static_cast<double>(n.storage_ns) * 1e-9}}},
      {"peer_failures", n.peer_failures}};
  if (server) {
    const auto s = server->counters();
    j["served"] = {{"requests", s.requests},     {"messages", s.messages},
                   {"from_cache", s.from_cache}, {"from_storage", s.from_storage},
                   {"misses", s.misses},         {"rejected", s.rejected},
                   {"bytes", s.bytes},           {"storage_bytes", s.storage_bytes},
                   {"unauthenticated", s.unauthenticated}, {"connections_refused", s.connections_refused},
                   {"accept_errors", s.accept_errors}};
  } else {
    j["served"] = nullptr;
  }
  return j;
}

}  // namespace mlbench::pipeline
