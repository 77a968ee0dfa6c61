#include "pipeline/remedies/peer_cache.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "core/cli.h"
#include "core/process.h"
#include "pipeline/remedies/peer_rate.h"

namespace mlbench::pipeline {

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
  const auto until = t0 + peer_seconds(duration_s);
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
        {"auth_failures", n.peer_auth_failures},
        {"last_error", error.empty() ? nlohmann::json() : nlohmann::json(error)}}},
      {"storage",
       {{"items", n.storage_items}, {"bytes", n.storage_bytes}, {"seconds", static_cast<double>(n.storage_ns) * 1e-9}}},
      {"peer_failures", n.peer_failures}};
  if (server) {
    const auto s = server->counters();
    j["served"] = {{"requests", s.requests},
                   {"messages", s.messages},
                   {"from_cache", s.from_cache},
                   {"from_storage", s.from_storage},
                   {"misses", s.misses},
                   {"rejected", s.rejected},
                   {"bytes", s.bytes},
                   {"storage_bytes", s.storage_bytes},
                   {"unauthenticated", s.unauthenticated},
                   {"connections_refused", s.connections_refused},
                   {"accept_errors", s.accept_errors},
                   {"mac_failures", s.mac_failures}};
  } else {
    j["served"] = nullptr;
  }
  return j;
}

}  // namespace mlbench::pipeline
