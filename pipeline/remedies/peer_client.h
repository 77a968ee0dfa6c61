// A partitioned cache's client (pipeline/remedies/peer_cache.h): asks peers for items, per peer
// a pool of connections (each used by one thread at a time), each request bounded by the
// timeout. The protocol is peer_protocol.h's: a connection is used only once the server proved
// the run's secret, its rank and the run; a reply frame whose tag does not check (a changed
// byte, a replayed or forged frame) fails, and its connection is dropped.
// torch-free; Boost.Asio inside peer_client.cc only.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/item_cache.h"
#include "pipeline/remedies/peer_config.h"
#include "pipeline/remedies/peer_protocol.h"

namespace mlbench::pipeline {

class PeerCacheClient {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  explicit PeerCacheClient(PartitionConfig config, Clock clock = {});
  ~PeerCacheClient();

  enum class Result { kHit, kMiss, kFailed };
  struct Reply {
    Result result = Result::kFailed;
    PeerStatus status = PeerStatus::kMiss;  // as the peer said (kHit: kCacheHit or kStorage)
    std::string error;                      // kFailed: why ("connect: Connection refused", "timed out after 2 s")
    // kFailed because the peer did not authenticate: its handshake (a wrong rank, another run, a
    // proof that does not check, or it refused this node's) or a reply's tag.
    bool auth_failed = false;
  };
  // Item `index` from peer `peer` into `out` (kHit). Never throws for the peer's faults.
  Reply get(int peer, std::size_t index, Bytes& out);
  // Items `indices` (1 to kPeerMaxIds of them) from peer `peer` in one request: `each(k, reply,
  // bytes)` is called for every k in order as its reply arrives (`bytes` the item's on kHit, to
  // be taken by swap); when the connection fails, for each item left with kFailed. The timeout
  // bounds each reply (a peer that keeps answering is not cut off). Never throws for the peer's faults.
  using EachReply = std::function<void(std::size_t k, const Reply& reply, Bytes& bytes)>;
  void get_many(int peer, const std::vector<std::size_t>& indices, const EachReply& each);
  // Idle connections kept for `peer` (tests).
  std::size_t idle_connections(int peer) const;
  // Connects to `peer` until it accepts or `timeout_s` passes (a node that starts before its
  // peers waits for them); the connection is kept for get(). Returns whether it is up.
  bool wait_until_up(int peer, double timeout_s);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mlbench::pipeline
