// A partitioned cache's server (pipeline/remedies/peer_cache.h): answers other nodes' requests
// for this node's partition on its --peers address. The protocol is peer_protocol.h's.
// A connection that does not prove the run's secret within the timeout gets nothing and is
// closed (counted as `unauthenticated`), as is one that claims this node's own rank; the
// server holds at most max_sessions() connections at once (more are closed at once, counted as
// `connections_refused`), and an accept that fails (out of file descriptors) is retried later,
// never fatal. The port serves only item bytes of the node's partition, by id: no path names
// cross the network. A request frame whose length is not 8 n for 1 <= n <= kPeerMaxIds
// (oversized or short) or whose kind is wrong is rejected, and one whose tag does not check is
// counted as a MAC failure: either way the connection is closed (its framing cannot be
// trusted); an id outside the dataset or of another partition gets a kRejected reply.
// torch-free; Boost.Asio inside peer_server.cc only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "pipeline/item_cache.h"
#include "pipeline/remedies/peer_config.h"
#include "pipeline/remedies/peer_protocol.h"

namespace mlbench::pipeline {

class PeerCacheServer {
 public:
  // `lookup(index, out)` for an index the server has checked: < items and of
  // `rank`'s partition. It sets `out` for kCacheHit and kStorage.
  using Lookup = std::function<PeerStatus(std::size_t index, std::shared_ptr<const Bytes>& out)>;
  // Listens on `listen` (port 0: an ephemeral port, see port()); throws
  // std::runtime_error naming the address when it cannot.
  PeerCacheServer(const PeerAddress& listen, std::size_t items, const PartitionConfig& partition, Lookup lookup);
  ~PeerCacheServer();
  PeerCacheServer(const PeerCacheServer&) = delete;
  PeerCacheServer& operator=(const PeerCacheServer&) = delete;

  std::uint16_t port() const;
  // Seconds since the last request (since the start when none came).
  double seconds_since_last_request() const;
  struct Counters {
    // `requests`: item ids asked for; `messages`: the requests that carried them.
    std::uint64_t requests = 0, from_cache = 0, from_storage = 0, misses = 0, rejected = 0, bytes = 0;
    std::uint64_t storage_bytes = 0;  // of `bytes`, read from storage for the asking peer
    std::uint64_t messages = 0;
    // Connections closed before they proved the secret (or claiming this node's rank); closed at
    // accept (over max_sessions); accepts that failed (e.g. out of file descriptors) and were retried.
    std::uint64_t unauthenticated = 0, connections_refused = 0, accept_errors = 0;
    // Request frames whose tag did not check (changed, replayed or forged): each closed its connection.
    std::uint64_t mac_failures = 0;
  };
  Counters counters() const;
  // The most connections held at once: 16 per node of the run plus 16, within a quarter of
  // this process's file-descriptor limit (the rest stay for its dataset).
  int max_sessions() const;

  struct Impl;  // peer_server.cc (its connections reach it)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace mlbench::pipeline
