// The network rate between nodes of a partitioned cache, measured on loopback
// (pipeline/remedies/peer_cache.h; mlbench-stall's partitioned-cache what-if).
#pragma once

#include <cstddef>

namespace mlbench::pipeline {

struct LoopbackPeerRate {
  double items_per_s = 0;     // items fetched per second
  double cpu_s_per_item = 0;  // this process's CPU seconds per item: asking and answering
};
// Items of `item_bytes` that `threads` threads fetch from a peer cache server on loopback, in
// this process, for about `duration_s` seconds, `ids_per_request` items a request (1: one
// request per item; a loader's batched peer fetches ask for a batch's items of a peer at once).
// Throws std::runtime_error when loopback fails.
// mlbench-stall's measurement: requests of 16 items, a batch of 32 split between 2 nodes.
inline constexpr int kLoopbackIdsPerRequest = 16;
LoopbackPeerRate loopback_peer_rate(std::size_t item_bytes, int threads, double duration_s, int ids_per_request = 1);

}  // namespace mlbench::pipeline
