// A cache partitioned across nodes (CoorDL's partitioned caching; docs/pipeline.md,
// "Partitioned cache"): N loader processes ("nodes", rank 0..N-1)
// each keep a never-evicting item cache for their own partition of the dataset
// (item i belongs to rank i % N) and serve it to the others over TCP, so the
// cluster caches the sum of its memories. A node's fetch of an item of another
// partition asks the owning peer; the owner answers from its cache, or reads the
// item from its storage, caches it and answers (the peer's miss goes to storage).
// A peer that is down, refuses, or does not answer within the timeout costs one
// read from this node's own storage, counted in `peer_failures`; that peer is
// then not asked again for `retry_after_s` (so a dead peer costs a timeout once,
// not per item), and training goes on.
//
// The wire protocol (docs/pipeline.md, "Partitioned cache"), integers big-endian:
//   request: u32 length (4 + 8 n: 12 for one item), u32 magic "MLPC", n x u64 item id
//            (1 <= n <= kPeerMaxIds)
//   reply:   per id, in the request's order: u32 status (PeerStatus), u64 length,
//            then `length` bytes
// Before any request, both ends prove they hold the run's shared secret
// (PartitionConfig::secret): the server sends u32 magic "MLPA" and a 16-byte
// random nonce Ns; the client answers HMAC-SHA256(secret, "mlbench-peer client"
// Ns) and its own nonce Nc; the server checks it (in constant time) and answers
// HMAC-SHA256(secret, "mlbench-peer server" Nc Ns), which the client checks. A
// connection that does not prove it within the timeout gets nothing and is
// closed (counted as `unauthenticated`); the server holds at most
// max_sessions() connections at once (more are closed at once, counted as
// `connections_refused`), and an accept that fails (out of file descriptors)
// is retried later, never fatal.
// The port serves only item bytes of the node's partition, by id: no path
// names cross the network. A request whose length is not 4 + 8 n for such an n
// (oversized or short) or whose magic is wrong is rejected: counted, and the
// connection is closed (its framing cannot be trusted); an id outside the
// dataset or of another partition gets a kRejected reply.
//
// Batched peer fetches: read-ahead tells the source each batch's items when it
// starts the batch (ItemSource::will_fetch); the items of other partitions go to
// their owners in one request per owner (at most `max_ids_per_request` ids), on
// one thread per peer, so a peer fetch costs a round trip's wake-ups per batch
// instead of per item. torch-free; Boost.Asio inside peer_cache.cc only.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/item_cache.h"
#include "pipeline/source.h"
#include "pipeline/trace.h"

namespace mlbench::pipeline {

struct PeerAddress {
  std::string host;
  std::uint16_t port = 0;
  std::string to_string() const { return host + ":" + std::to_string(port); }
};

// The partitioned cache's shared secret, in this order: $MLBENCH_PEER_SECRET (the
// text itself), the file $MLBENCH_PEER_SECRET_FILE, else the user's file
// $XDG_CONFIG_HOME/mlbench/peer-secret (default ~/.config/mlbench/peer-secret),
// made with 32 random bytes (hex) and mode 0600 when missing. Every node of a run
// must see the same: on one machine, or with a shared home, the user's file does;
// else set the variable on every node. A file another user owns, or that its group
// or others may read, is refused; throws std::invalid_argument with one line.
std::string load_peer_secret();

// HMAC-SHA256(secret, label || data): the handshake's proofs (exposed for the tests).
std::array<std::uint8_t, 32> peer_proof(const std::string& secret, const std::string& label, const std::uint8_t* data,
                                        std::size_t size);
inline constexpr std::uint32_t kPeerHelloMagic = 0x4d4c5041;  // "MLPA"
inline constexpr std::size_t kPeerNonceBytes = 16;

// "host:port,host:port,..." (IPv4 names or addresses; "[::1]:port" for IPv6).
// Throws std::invalid_argument naming the bad entry.
std::vector<PeerAddress> parse_peers(const std::string& text);

struct PartitionConfig {
  int rank = 0;
  std::vector<PeerAddress> peers;  // one per rank; peers[rank] is where this node listens
  double timeout_s = 2.0;          // one request to a peer, connect included
  double retry_after_s = 5.0;      // a peer that failed is not asked again for this long
  double join_timeout_s = 30.0;    // at start, how long a node waits for the others to be up
  // At the end, how long a node that finished keeps answering peers still asking (it leaves once
  // none asked for kLingerIdleS, or after this long; 0: it leaves at once).
  double linger_s = 10.0;
  std::size_t max_item_bytes = std::size_t{1} << 30;  // a reply announcing more is a failure
  int server_threads = 4;                             // threads answering peers (an answer may read storage)
  // --peer-batch: the most item ids one request to a peer carries (a batch's items of that peer
  // go in as few requests); 1: one request per item, as each item is read (no batching).
  int max_ids_per_request = 256;
  // The run's shared secret (load_peer_secret): every node of a run must hold the same; a
  // server or client without one refuses to start.
  std::string secret;

  int world() const { return static_cast<int>(peers.size()); }
  bool enabled() const { return peers.size() > 1; }
  int owner(std::size_t index) const { return static_cast<int>(index % peers.size()); }
  bool owns(std::size_t index) const { return owner(index) == rank; }
};

enum class PeerStatus : std::uint32_t {
  kCacheHit = 0,  // from the owner's cache
  kStorage = 1,   // the owner read it from its storage (and cached it)
  kMiss = 2,      // the owner could not read it either: fetch it yourself
  kRejected = 3,  // not an item of the owner's partition
};
inline constexpr std::uint32_t kPeerMagic = 0x4d4c5043;   // "MLPC"
inline constexpr std::uint32_t kPeerRequestBytes = 12;    // magic + one id
inline constexpr std::uint32_t kPeerMaxIds = 256;         // ids in one request, at most
inline constexpr std::size_t kPeerReplyHeaderBytes = 12;  // status + length
inline constexpr double kLingerIdleS = 1.0;               // PartitionConfig::linger_s: peers silent this long are done

// Answers peers' requests for this node's partition.
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
    // Connections closed before they proved the secret; closed at accept (over max_sessions);
    // accepts that failed (e.g. out of file descriptors) and were retried.
    std::uint64_t unauthenticated = 0, connections_refused = 0, accept_errors = 0;
  };
  Counters counters() const;
  // The most connections held at once: 16 per node of the run plus 16, within a quarter of
  // this process's file-descriptor limit (the rest stay for its dataset).
  int max_sessions() const;

  struct Impl;  // peer_cache.cc (its connections reach it)

 private:
  std::unique_ptr<Impl> impl_;
};

// Asks peers for items: per peer a pool of connections (each used by one thread
// at a time), each request bounded by the timeout.
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

// The loader's view of a partitioned cache: an ItemSource over the node's storage
// that fetches other partitions' items from their owners (falling back to
// storage), and reads its own partition's from storage (the item cache in front
// of it keeps them: ItemCache::set_admit admits only this partition).
class PartitionedSource : public ItemSource {
 public:
  PartitionedSource(std::shared_ptr<const ItemSource> storage, PartitionConfig config,
                    PeerCacheClient::Clock clock = {});

  std::size_t size() const override { return storage_->size(); }
  std::int64_t label(std::size_t index) const override { return storage_->label(index); }
  void fetch(std::size_t index, Bytes& out) const override;
  // Only this node's partition can be had without waiting (another's is a network request).
  bool fetch_if_cached(std::size_t index, Bytes& out) const override;
  Encoding encoding() const override { return storage_->encoding(); }
  int raw_width() const override { return storage_->raw_width(); }
  int raw_height() const override { return storage_->raw_height(); }
  int raw_channels() const override { return storage_->raw_channels(); }
  std::string describe(std::size_t index) const override { return storage_->describe(index); }
  // The storage's planned order (tar shards), so that a partitioned cache keeps it.
  std::optional<std::vector<std::size_t>> epoch_order(const EpochOrderRequest& request) const override {
    return storage_->epoch_order(request);
  }
  std::size_t class_count() const override { return storage_->class_count(); }
  // Asks each owner for `items` of its partition in one request (max_ids_per_request > 1), on a
  // thread per peer; fetch() and fetch_if_cached() then take them from what arrived.
  void will_fetch(const std::vector<std::size_t>& items) const override;

  ~PartitionedSource() override;
  // --trace: the batched requests' items as "read peer" spans on a track per peer ("peer R").
  void set_trace(TraceRecorder* trace) { trace_ = trace; }

  const ItemSource& storage() const { return *storage_; }
  // Waits up to `timeout_s` in all for every other node to accept a connection; returns
  // the ranks still not up (their items then come from storage until they are).
  std::vector<int> wait_for_peers(double timeout_s) const;
  const PartitionConfig& config() const { return config_; }

  // Where this node's fetches (the item cache's misses) were served from.
  struct Counters {
    std::uint64_t peer_cache_items = 0, peer_storage_items = 0, peer_bytes = 0, peer_ns = 0;
    std::uint64_t peer_misses = 0, peer_failures = 0;
    std::uint64_t storage_items = 0, storage_bytes = 0, storage_ns = 0;  // own partition, misses and failures
    std::uint64_t peer_requests = 0;  // requests sent to peers (one per item, or one per batch and peer)
  };
  Counters counters() const;
  std::string last_peer_error() const;

 private:
  void from_storage(std::size_t index, Bytes& out) const;
  // An item a peer answered (or failed to): into `out` and counted; else from storage.
  void deliver(std::size_t index, const PeerCacheClient::Reply& reply, Bytes& out) const;
  struct Prefetch;  // peer_cache.cc
  void prefetch_loop(int peer) const;

  std::shared_ptr<const ItemSource> storage_;
  PartitionConfig config_;
  mutable PeerCacheClient client_;
  TraceRecorder* trace_ = nullptr;
  std::unique_ptr<Prefetch> prefetch_;
  mutable std::atomic<std::uint64_t> peer_cache_items_{0}, peer_storage_items_{0}, peer_bytes_{0}, peer_ns_{0},
      peer_misses_{0}, peer_failures_{0}, storage_items_{0}, storage_bytes_{0}, storage_ns_{0}, peer_requests_{0};
  mutable std::mutex error_mu_;
  mutable std::string last_error_;
};

// The report's pipeline.partitioned_cache block (docs/report-format.md).
nlohmann::json partitioned_cache_report(const PartitionedSource& source, const PeerCacheServer* server);

}  // namespace mlbench::pipeline
