#include "pipeline/remedies/peer_client.h"

#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <boost/asio.hpp>

namespace mlbench::pipeline {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

// One connection with its own io_context, so that any thread can drive it (one at a time), and
// its session once the handshake is done (the frames' keys and sequence numbers).
struct Connection {
  asio::io_context ctx;
  tcp::socket socket{ctx};
  std::optional<PeerSession> session;

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

// Why a connection or a request failed ("" for none); `auth`: the peer did not authenticate.
struct Failure {
  std::string what;
  bool auth = false;
};

// Connects `conn` to `address` (an address as given, else the name resolved) by `deadline` and
// does the client's half of the handshake. Fails with "resolve: ...", "connect " + `timed_out`,
// "connect: ...", "handshake ...".
Failure connect(Connection& conn, const PeerAddress& address, std::chrono::steady_clock::time_point deadline,
                const std::string& timed_out, PeerClientHandshake handshake) {
  error_code ec;
  std::vector<tcp::endpoint> endpoints;
  const auto ip = asio::ip::make_address(address.host, ec);
  if (!ec) {
    endpoints.emplace_back(ip, address.port);
  } else {
    tcp::resolver resolver(conn.ctx);
    const auto found = resolver.resolve(address.host, std::to_string(address.port), ec);
    if (ec) return {"resolve: " + ec.message()};
    for (const auto& e : found) endpoints.push_back(e.endpoint());
  }
  ec = asio::error::would_block;
  asio::async_connect(conn.socket, endpoints, [&](error_code e, const tcp::endpoint&) { ec = e; });
  if (!conn.run_until(deadline)) return {"connect " + timed_out};
  if (ec) return {"connect: " + ec.message()};
  conn.socket.set_option(tcp::no_delay(true), ec);
  // NOTE [peer handshake] (peer_protocol.h): the server's hello, this end's hello and proof, the server's proof.
  ServerHello hello{};
  ec = asio::error::would_block;
  asio::async_read(conn.socket, asio::buffer(hello), [&](error_code e, std::size_t) { ec = e; });
  if (!conn.run_until(deadline)) return {"handshake " + timed_out};
  if (ec) return {"handshake: " + (ec == asio::error::eof ? std::string("closed the connection") : ec.message())};
  ClientHello mine{};
  switch (handshake.answer(hello, mine)) {
    case PeerRefusal::kNone:
      break;
    case PeerRefusal::kNotAPeer:
      return {"handshake: not an mlbench peer of this version (no MLP2 greeting)"};
    case PeerRefusal::kWrongRank:
      return {fmt::format("handshake: the peer says it is rank {}, not the rank dialed (the nodes' --peers lists "
                          "differ, or a relay)",
                          handshake.server_rank_said()),
              true};
    default:  // kOtherRun
      return {"handshake: the peer is of another run (its --peers list is not this node's)", true};
  }
  PeerProof theirs{};
  ec = asio::error::would_block;
  asio::async_write(conn.socket, asio::buffer(mine), [&](error_code e, std::size_t) {
    ec = e;
    if (!e) asio::async_read(conn.socket, asio::buffer(theirs), [&](error_code e2, std::size_t) { ec = e2; });
  });
  if (!conn.run_until(deadline)) return {"handshake " + timed_out};
  if (ec == asio::error::eof || ec == asio::error::connection_reset) {
    return {"handshake: the peer closed the connection (it does not hold this run's secret, or refused this node)",
            true};
  }
  if (ec) return {"handshake: " + ec.message()};
  if (handshake.finish(theirs) != PeerRefusal::kNone)
    return {"handshake: the peer does not hold this run's secret", true};
  conn.session = handshake.session();
  return {};
}

}  // namespace

struct PeerCacheClient::Impl {
  PartitionConfig config;
  PeerRunId run{};
  Clock clock;
  struct Peer {
    mutable std::mutex mu;
    std::vector<std::unique_ptr<Connection>> idle;
    std::chrono::steady_clock::time_point down_until{};
    std::string down_reason;
    bool down_auth = false;  // down_reason is an authentication failure
  };
  std::vector<std::unique_ptr<Peer>> peers;

  std::chrono::steady_clock::time_point now() const { return clock ? clock() : std::chrono::steady_clock::now(); }
  PeerClientHandshake handshake(int peer) const { return PeerClientHandshake(config.secret, run, config.rank, peer); }
};

PeerCacheClient::PeerCacheClient(PartitionConfig config, Clock clock) : impl_(std::make_unique<Impl>()) {
  if (config.secret.empty()) throw std::runtime_error("peer cache: no shared secret (PartitionConfig::secret)");
  impl_->config = std::move(config);
  impl_->run = peer_run_id(impl_->config.run);
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
  const auto deadline = std::chrono::steady_clock::now() + peer_seconds(timeout_s);
  for (;;) {
    auto conn = std::make_unique<Connection>();
    const auto attempt = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1));
    if (connect(*conn, address, attempt, "timed out", impl_->handshake(peer)).what.empty()) {
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
  auto fail_from = [&](std::size_t k, const std::string& reason, bool auth) {
    for (; k < indices.size(); ++k) {
      none.clear();
      each(k, Reply{Result::kFailed, PeerStatus::kMiss, reason, auth}, none);
    }
  };
  if (peer < 0 || peer >= static_cast<int>(impl_->peers.size()))
    return fail_from(0, fmt::format("no peer {}", peer), false);
  auto& p = *impl_->peers[static_cast<std::size_t>(peer)];
  const PeerAddress& address = impl_->config.peers[static_cast<std::size_t>(peer)];
  std::unique_ptr<Connection> conn;
  {
    std::unique_lock lock(p.mu);
    if (impl_->now() < p.down_until) {
      const std::string reason = fmt::format("{} skipped after: {}", address.to_string(), p.down_reason);
      const bool auth = p.down_auth;
      lock.unlock();
      return fail_from(0, reason, auth);
    }
    if (!p.idle.empty()) {
      conn = std::move(p.idle.back());
      p.idle.pop_back();
    }
  }
  auto deadline = std::chrono::steady_clock::now() + peer_seconds(impl_->config.timeout_s);
  // The connection failed at item k: that peer is skipped for a while, this and the others to it dropped.
  auto fail = [&](std::size_t k, const std::string& what, bool auth = false) {
    const std::string reason = fmt::format("{}: {}", address.to_string(), what);
    {
      std::lock_guard lock(p.mu);
      p.down_until = impl_->now() + peer_seconds(impl_->config.retry_after_s);
      p.down_reason = reason;
      p.down_auth = auth;
      p.idle.clear();  // the others to that peer are as suspect
    }
    fail_from(k, reason, auth);
  };
  const std::string timed_out = fmt::format("timed out after {} s", impl_->config.timeout_s);

  if (!conn) {
    conn = std::make_unique<Connection>();
    if (const Failure why = connect(*conn, address, deadline, timed_out, impl_->handshake(peer)); !why.what.empty()) {
      return fail(0, why.what, why.auth);
    }
  }
  error_code ec;
  const std::vector<std::uint8_t> request = peer_request_frame(indices, conn->session->send);
  ec = asio::error::would_block;
  asio::async_write(conn->socket, asio::buffer(request), [&](error_code e, std::size_t) { ec = e; });
  if (!conn->run_until(deadline)) return fail(0, timed_out);
  if (ec) return fail(0, ec == asio::error::eof ? "closed the connection" : ec.message());

  Bytes body;
  for (std::size_t k = 0; k < indices.size(); ++k) {
    PeerFrameHeader header{};
    ec = asio::error::would_block;
    asio::async_read(conn->socket, asio::buffer(header), [&](error_code e, std::size_t) { ec = e; });
    if (!conn->run_until(deadline)) return fail(k, timed_out);
    if (ec) return fail(k, ec == asio::error::eof ? "closed the connection" : ec.message());
    const std::uint64_t length = get_be64(header.data() + 4);
    if (length > impl_->config.max_item_bytes) {
      return fail(k, fmt::format("announced {} bytes, more than the {} an item may have", length,
                                 impl_->config.max_item_bytes));
    }
    body.resize(static_cast<std::size_t>(length));
    PeerTag tag{};
    const std::array<asio::mutable_buffer, 2> rest{asio::buffer(body), asio::buffer(tag)};
    ec = asio::error::would_block;
    asio::async_read(conn->socket, rest, [&](error_code e, std::size_t) { ec = e; });
    if (!conn->run_until(deadline)) return fail(k, timed_out);
    if (ec) return fail(k, ec == asio::error::eof ? "closed the connection mid-item" : ec.message());
    // Nothing of a frame is believed before its tag checks (NOTE [peer frames]).
    if (!conn->session->receive.check(header.data(), body.data(), body.size(), tag.data())) {
      return fail(
          k, fmt::format("item {}'s reply failed its MAC check (changed, replayed or forged on the way)", indices[k]),
          true);
    }
    const std::uint32_t status = get_be32(header.data());
    if (status > static_cast<std::uint32_t>(PeerStatus::kRejected))
      return fail(k, fmt::format("bad reply status {}", status));
    const auto st = static_cast<PeerStatus>(status);
    const bool has_body = st == PeerStatus::kCacheHit || st == PeerStatus::kStorage;
    if (!has_body && length != 0) return fail(k, "a miss with a body");
    // A peer that keeps answering is not cut off: the timeout bounds each reply.
    deadline = std::chrono::steady_clock::now() + peer_seconds(impl_->config.timeout_s);
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

}  // namespace mlbench::pipeline
