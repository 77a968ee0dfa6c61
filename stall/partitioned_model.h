// The partitioned-cache what-if: the per-node speed of N nodes that
// train on one dataset, each with an item cache of a fraction m of it, caching
// on their own (each its first m: CoorDL's MinIO per node) against a cache
// partitioned across them (pipeline/remedies/peer_cache.h: node r keeps the items
// i % N == r, and fetches the others from their owner). Per item, a node's
// fetch costs 1/C from its own cache, 1/R from a peer and N/S from storage
// (the N nodes' misses share one storage of rate S); a node's speed is the
// smallest of its compute G, its prep P and its fetch rate. CPU: a sample costs
// its prep (1 / P(1 CPU)) and its share of the requests to peers, each costing
// the CPU of asking and of answering (a node answers as many requests as it
// makes), out of the node's CPUs; with `shared_cpus` the N nodes run on one
// machine (the measurements here) and each has 1/N of its CPUs.
// Requests, not items: with read-ahead a node asks each peer once per batch for
// all of that peer's items in it (pipeline/remedies/peer_cache.h, batched peer fetches),
// so a request's wake-ups and system calls are paid per batch and peer, and N
// nodes ask N-1 peers each: per sample (N-1) q / B requests, q = max(1 - (1 -
// 1/N)^B, B/(N M)) the requests a batch of B items makes to one peer (at most M
// ids a request). With B = 1 (no read-ahead, one request per item) that is the
// (N-1)/N items from peers. The peer CPU a sample grows with nodes as the requests do, not as
// the items do (docs/performance.md, "Partitioned cache").
// Pure: rates in, rates out.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlbench::stall {

struct PartitionedNodes {
  int nodes = 2;               // N
  double memory_fraction = 0;  // m: one node's item cache, as a fraction of the dataset, in [0, 1]
  double prep_rate = std::numeric_limits<double>::infinity();     // P of one node
  double device_rate = std::numeric_limits<double>::infinity();   // G of one node
  double memory_rate = std::numeric_limits<double>::infinity();   // C: a cached item's fetch rate
  double storage_rate = std::numeric_limits<double>::infinity();  // S, shared by the N nodes
  double peer_rate = std::numeric_limits<double>::infinity();     // R: one node's fetch rate from its peers
  bool shared_cpus = false;                                       // the N nodes share one machine's CPUs
  double cores = 0;       // CPUs of a node (of the machine with shared_cpus); 0: no CPU budget, P alone
  double prep_cpu_s = 0;  // CPU seconds of one sample's prep: 1 / P(1 CPU)
  double peer_request_cpu_s = 0;  // CPU seconds of one request to a peer, both ends, its items included
  double batch_items = 1;         // B: the items a node asks its peers for at once (a batch with read-ahead)
  int max_ids_per_request = 256;  // M: the most item ids one request carries (--peer-batch)
};

// A node's requests to its peers per sample, N nodes (see above): (N-1) q / B. 0 for one node.
// Throws std::invalid_argument for N < 1, B < 1 or M < 1.
double peer_requests_per_sample(int nodes, double batch_items, int max_ids_per_request);

struct PartitionedPrediction {
  double cluster_cached = 0;                // min(1, N m): the dataset's share cached somewhere
  double local = 0, peer = 0, storage = 0;  // where a node's items come from (partitioned), summing to 1
  double requests = 0;                      // a node's requests to peers per sample (partitioned)
  double own = 0;                           // per node, each caching on its own (samples/s)
  double partitioned = 0;                   // per node, the partitioned cache
  double gain = 0;                          // partitioned / own
  std::string bound_own;                    // "device", "prep", "fetch"
  std::string bound_partitioned;
};

// Throws std::invalid_argument for N < 1, m outside [0, 1], a non-positive rate,
// or an unbounded speed (every rate infinite).
PartitionedPrediction predict_partitioned(const PartitionedNodes& in);

// stall.json's whatif.partitioned: inputs, formula and, for each N of `nodes`,
// the prediction at `base.memory_fraction` (<= 0: 1/N each, every node holding its partition).
// `base` at `nodes` nodes: its memory fraction, or 1/nodes (each node holds its partition) when unset.
PartitionedNodes partitioned_at(const PartitionedNodes& base, int nodes);
nlohmann::json partitioned_whatif_json(const PartitionedNodes& base, const std::vector<int>& nodes);

inline constexpr const char* kPartitionedFormula =
    "per node: speed = min(G, P, cores' / (p + requests k), F), cores' = cores (cores/N when the nodes share a "
    "machine); own: requests = 0, F = 1 / (m/C + (1-m) N/S); "
    "partitioned: requests = (N-1) max(1 - (1-1/N)^B, B/(N M)) / B, c = min(1, N m), "
    "F = 1 / (min(m, 1/N)/C + (N-1)/N c/R + (1-c) N/S)";

}  // namespace mlbench::stall
