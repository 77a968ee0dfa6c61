// Where the calling thread's last fetch came from, for the trace's span names: a
// partitioned source (pipeline/remedies/peer_cache.h) sets it on every fetch; the worker
// and I/O threads reset it before a fetch and read it after.
#pragma once

namespace mlbench::pipeline {

enum class FetchOrigin { kUnknown, kStorage, kPeer };

// This thread's origin of its last fetch (kUnknown when the source does not say).
FetchOrigin& this_thread_fetch_origin();

}  // namespace mlbench::pipeline
