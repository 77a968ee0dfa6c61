// The network rate between nodes of a partitioned cache, measured on loopback
// (pipeline/peer_cache.h; mlbench-stall's partitioned-cache what-if).
#pragma once

#include <cstddef>

namespace mlbench::pipeline {

struct LoopbackPeerRate {
  double items_per_s = 0;     // items fetched per second
  double cpu_s_per_item = 0;  // this process's CPU seconds per item: asking and answering
};
// Items of `item_bytes` that `threads` threads fetch from a peer cache server on loopback, in
// this process, for about `duration_s` seconds. Throws std::runtime_error when loopback fails.
LoopbackPeerRate loopback_peer_rate(std::size_t item_bytes, int threads, double duration_s);

}  // namespace mlbench::pipeline
