// The loader's view of a partitioned cache (pipeline/remedies/peer_cache.h): an ItemSource over
// the node's storage that fetches other partitions' items from their owners (falling back to
// storage), and reads its own partition's from storage (the item cache in front of it keeps
// them: ItemCache::set_admit admits only this partition).
//
// Batched peer fetches: read-ahead tells the source each batch's items when it starts the batch
// (ItemSource::will_fetch); the items of other partitions go to their owners in one request per
// owner (at most `max_ids_per_request` ids), on one thread per peer, so a peer fetch costs a
// round trip's wake-ups per batch instead of per item.
//
// A peer that fails authentication (its handshake, or an item's MAC: a changed byte on the
// way) costs the items it was asked for a read from storage each, counted in `auth_failures`
// (and `failures`), and one warning naming it, the first time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "pipeline/remedies/peer_client.h"
#include "pipeline/remedies/peer_config.h"
#include "pipeline/source.h"
#include "pipeline/trace.h"

namespace mlbench::pipeline {

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
  // Where the warning about a peer that failed authentication goes (default std::cerr).
  void set_warnings(std::ostream* warnings) { warnings_ = warnings; }

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
    std::uint64_t peer_requests = 0;       // requests sent to peers (one per item, or one per batch and peer)
    std::uint64_t peer_auth_failures = 0;  // of peer_failures: the peer did not authenticate
  };
  Counters counters() const;
  std::string last_peer_error() const;

 private:
  void from_storage(std::size_t index, Bytes& out) const;
  // An item a peer answered (or failed to): into `out` and counted; else from storage.
  void deliver(std::size_t index, const PeerCacheClient::Reply& reply, Bytes& out) const;
  struct Prefetch;  // peer_source.cc
  void prefetch_loop(int peer) const;

  std::shared_ptr<const ItemSource> storage_;
  PartitionConfig config_;
  mutable PeerCacheClient client_;
  TraceRecorder* trace_ = nullptr;
  std::ostream* warnings_ = nullptr;
  std::unique_ptr<Prefetch> prefetch_;
  mutable std::atomic<std::uint64_t> peer_cache_items_{0}, peer_storage_items_{0}, peer_bytes_{0}, peer_ns_{0},
      peer_misses_{0}, peer_failures_{0}, storage_items_{0}, storage_bytes_{0}, storage_ns_{0}, peer_requests_{0},
      peer_auth_failures_{0};
  mutable std::mutex error_mu_;
  mutable std::string last_error_;
  mutable std::vector<bool> warned_;  // per rank: its authentication failure was told (under error_mu_)
};

}  // namespace mlbench::pipeline
