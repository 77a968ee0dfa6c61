#include "pipeline/remedies/peer_source.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "pipeline/fetch_origin.h"

namespace mlbench::pipeline {

namespace {

std::uint64_t elapsed_ns(std::chrono::steady_clock::time_point since) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since).count());
}

}  // namespace

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
    : storage_(std::move(storage)),
      config_(config),
      client_(std::move(config), std::move(clock)),
      warned_(static_cast<std::size_t>(config_.world()), false) {
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
    if (reply.auth_failed) ++peer_auth_failures_;
    std::lock_guard lock(error_mu_);
    last_error_ = reply.error;
    const auto peer = static_cast<std::size_t>(config_.owner(index));
    if (reply.auth_failed && !warned_[peer]) {
      // Once per peer: a forger on the network (or a misconfigured node) is worth a line, not one per item.
      warned_[peer] = true;
      (warnings_ ? *warnings_ : std::cerr) << fmt::format(
          "partitioned cache: warning: rank {} ({}) failed authentication: {}; its items are read from storage "
          "instead (peer.auth_failures counts them)\n",
          peer, config_.peers[peer].to_string(), reply.error);
    }
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
  return {peer_cache_items_.load(), peer_storage_items_.load(), peer_bytes_.load(),        peer_ns_.load(),
          peer_misses_.load(),      peer_failures_.load(),      storage_items_.load(),     storage_bytes_.load(),
          storage_ns_.load(),       peer_requests_.load(),      peer_auth_failures_.load()};
}

std::string PartitionedSource::last_peer_error() const {
  std::lock_guard lock(error_mu_);
  return last_error_;
}

}  // namespace mlbench::pipeline
