#include "pipeline/remedies/peer_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include <sys/resource.h>

#include <fmt/format.h>
#include <boost/asio.hpp>

namespace mlbench::pipeline {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

struct PeerCacheServer::Impl {
  asio::io_context ctx;
  tcp::acceptor acceptor{ctx};
  std::size_t items = 0;
  PartitionConfig partition;
  PeerRunId run{};
  Lookup lookup;
  std::vector<std::thread> threads;
  std::atomic<std::uint64_t> requests{0}, from_cache{0}, from_storage{0}, misses{0}, rejected{0}, bytes{0},
      storage_bytes{0}, messages{0}, unauthenticated{0}, connections_refused{0}, accept_errors{0}, mac_failures{0};
  std::atomic<std::int64_t> last_request_ns{0};  // steady clock
  std::atomic<int> sessions{0};
  int max_sessions = 64;
  asio::steady_timer accept_retry{ctx};

  void accept();
};

namespace {

// One peer's connection: the handshake, then read a request, answer it, read the next; one
// operation outstanding at a time, so its handlers never run concurrently. It proves the run's
// secret first (NOTE [peer handshake] in peer_protocol.h) within the timeout; its handlers run
// on a strand (the handshake's timer and its reads never race).
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(PeerCacheServer::Impl* server, tcp::socket socket)
      : server_(server),
        strand_(asio::make_strand(server->ctx)),
        socket_(std::move(socket)),
        auth_timer_(strand_),
        handshake_(server->partition.secret, server->run, server->partition.rank, server->partition.world()) {
    ++server_->sessions;
  }
  ~Session() { --server_->sessions; }
  void start() {
    auto self = shared_from_this();
    asio::dispatch(strand_, [this, self] { hello(); });
  }

 private:
  template <class F>
  auto on_strand(F&& f) {
    return asio::bind_executor(strand_, std::forward<F>(f));
  }

  void hello() {
    auto self = shared_from_this();
    auth_timer_.expires_after(peer_seconds(std::max(0.2, server_->partition.timeout_s)));
    auth_timer_.async_wait(on_strand([this, self](error_code ec) {
      if (ec || session_) return;
      ++server_->unauthenticated;  // silent: closed with nothing served
      close();
    }));
    asio::async_write(socket_, asio::buffer(handshake_.hello()), on_strand([this, self](error_code ec, std::size_t) {
                        if (ec) return;
                        asio::async_read(
                            socket_, asio::buffer(client_hello_), on_strand([this, self](error_code ec2, std::size_t) {
                              if (ec2) return;
                              if (handshake_.accept(client_hello_, finish_) != PeerRefusal::kNone) {
                                ++server_->unauthenticated;  // nothing is proved to a client that proved nothing
                                return close();
                              }
                              session_ = handshake_.session();
                              auth_timer_.cancel();
                              asio::async_write(socket_, asio::buffer(finish_),
                                                on_strand([this, self](error_code ec3, std::size_t) {
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
    asio::async_read(socket_, asio::buffer(header_), on_strand([this, self](error_code ec, std::size_t) {
                       if (ec) return;  // the peer closed, or the server stops
                       // 8 n bytes for 1..kPeerMaxIds ids; else oversized or short: the framing is lost.
                       const std::uint64_t length = get_be64(header_.data() + 4);
                       if (get_be32(header_.data()) != kPeerMagic || !peer_request_length_ok(length)) return reject();
                       request_.resize(static_cast<std::size_t>(length) + kPeerTagBytes);
                       asio::async_read(
                           socket_, asio::buffer(request_),
                           on_strand([this, self, length](error_code ec2, std::size_t) {
                             if (ec2) return;
                             const auto n = static_cast<std::size_t>(length);
                             if (!session_->receive.check(header_.data(), request_.data(), n, request_.data() + n)) {
                               ++server_->mac_failures;
                               return close();
                             }
                             answer(n / 8);
                           }));
                     }));
  }

  void reject() {
    ++server_->rejected;
    close();
  }

  // One id's status, its body into `body` (null for none); counted.
  PeerStatus answer_one(std::uint64_t id, std::shared_ptr<const Bytes>& body) {
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
    if (has_body) server_->bytes += body->size();
    if (status == PeerStatus::kStorage) server_->storage_bytes += body->size();
    return status;
  }

  // One frame per id, in the request's order, in one write (the item bytes are not copied).
  void answer(std::size_t n) {
    ++server_->messages;
    server_->last_request_ns = std::chrono::steady_clock::now().time_since_epoch().count();
    headers_.resize(n);
    tags_.resize(n);
    bodies_.assign(n, nullptr);
    buffers_.clear();
    for (std::size_t k = 0; k < n; ++k) {
      const PeerStatus status = answer_one(get_be64(request_.data() + 8 * k), bodies_[k]);
      const Bytes* body = bodies_[k].get();
      const std::size_t size = body ? body->size() : 0;
      headers_[k] = peer_frame_header(static_cast<std::uint32_t>(status), size);
      tags_[k] = session_->send.tag(headers_[k].data(), body ? body->data() : nullptr, size);
      buffers_.push_back(asio::buffer(headers_[k]));
      if (size > 0) buffers_.push_back(asio::buffer(*body));
      buffers_.push_back(asio::buffer(tags_[k]));
    }
    auto self = shared_from_this();
    asio::async_write(socket_, buffers_, on_strand([this, self](error_code ec, std::size_t) {
                        bodies_.clear();
                        if (!ec) read_request();
                      }));
  }

  PeerCacheServer::Impl* server_;
  asio::strand<asio::io_context::executor_type> strand_;
  tcp::socket socket_;
  asio::steady_timer auth_timer_;
  PeerServerHandshake handshake_;
  ClientHello client_hello_{};
  PeerProof finish_{};
  std::optional<PeerSession> session_;  // once the client proved the secret
  PeerFrameHeader header_{};
  std::vector<std::uint8_t> request_;  // ids and tag
  std::vector<PeerFrameHeader> headers_;
  std::vector<PeerTag> tags_;
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
  impl_->run = peer_run_id(partition.run);
  impl_->last_request_ns = std::chrono::steady_clock::now().time_since_epoch().count();
  impl_->lookup = std::move(lookup);
  if (partition.secret.empty()) throw std::runtime_error("peer cache: no shared secret (PartitionConfig::secret)");
  {
    rlimit lim{};
    const long fds =
        ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY ? static_cast<long>(lim.rlim_cur) : 1024;
    impl_->max_sessions = static_cast<int>(std::max<long>(4, std::min<long>(16L * partition.world() + 16, fds / 4)));
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
  c.mac_failures = impl_->mac_failures.load();
  return c;
}

int PeerCacheServer::max_sessions() const {
  return impl_->max_sessions;
}

}  // namespace mlbench::pipeline
