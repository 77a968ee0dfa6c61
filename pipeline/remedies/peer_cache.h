// A cache partitioned across nodes (CoorDL's partitioned caching; docs/pipeline.md,
// "Partitioned cache"): N loader processes ("nodes", rank 0..N-1)
// each keep a never-evicting item cache for their own partition of the dataset
// (item i belongs to rank i % N) and serve it to the others over TCP, so the
// cluster caches the sum of its memories. A node's fetch of an item of another
// partition asks the owning peer; the owner answers from its cache, or reads the
// item from its storage, caches it and answers (the peer's miss goes to storage).
// A peer that is down, refuses, does not answer within the timeout or fails
// authentication costs one read from this node's own storage, counted in
// `peer_failures`; that peer is then not asked again for `retry_after_s` (so a dead
// peer costs a timeout once, not per item), and training goes on.
//
// The parts, one file each:
//   peer_config.h    the settings (addresses, rank, timeouts, the run's secret and name)
//   peer_protocol.h  the wire protocol: handshake, session keys, MAC'd frames (the one codec)
//   peer_server.h    PeerCacheServer: answers peers' requests for this node's partition
//   peer_client.h    PeerCacheClient: asks peers for items
//   peer_source.h    PartitionedSource: the loader's ItemSource over peers and storage
// and here, the report's block.
#pragma once

#include <nlohmann/json.hpp>

#include "pipeline/remedies/peer_client.h"
#include "pipeline/remedies/peer_config.h"
#include "pipeline/remedies/peer_protocol.h"
#include "pipeline/remedies/peer_server.h"
#include "pipeline/remedies/peer_source.h"

namespace mlbench::pipeline {

// The report's pipeline.partitioned_cache block (docs/report-format.md).
nlohmann::json partitioned_cache_report(const PartitionedSource& source, const PeerCacheServer* server);

}  // namespace mlbench::pipeline
