// A partitioned cache's settings (pipeline/remedies/peer_cache.h): the nodes' addresses, this
// node's rank, its timeouts, the run's shared secret and the run's name, and where the secret
// comes from.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mlbench::pipeline {

struct PeerAddress {
  std::string host;
  std::uint16_t port = 0;
  std::string to_string() const { return host + ":" + std::to_string(port); }
};

// "host:port,host:port,..." (IPv4 names or addresses; "[::1]:port" for IPv6).
// Throws std::invalid_argument naming the bad entry.
std::vector<PeerAddress> parse_peers(const std::string& text);
// The addresses in rank order, "host:port,host:port" (the run's name: PartitionConfig::run).
std::string peers_text(const std::vector<PeerAddress>& peers);

// The partitioned cache's shared secret, in this order: $MLBENCH_PEER_SECRET (the
// text itself), the file $MLBENCH_PEER_SECRET_FILE, else the user's file
// $XDG_CONFIG_HOME/mlbench/peer-secret (default ~/.config/mlbench/peer-secret),
// made with 32 random bytes (hex) and mode 0600 when missing. Every node of a run
// must see the same: on one machine, or with a shared home, the user's file does;
// else set the variable on every node. A file another user owns, or that its group
// or others may read, is refused, and so is a path that is no file (a directory);
// throws std::invalid_argument with one line.
std::string load_peer_secret();

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
  // The run's name, bound into every proof and session key (NOTE [peer handshake] in
  // peer_protocol.h): every node of a run gives the same, and a node of another run is refused
  // even under the same secret. The loader's is its --peers list (peers_text: every node's
  // address in rank order, which every node is given alike).
  std::string run;

  int world() const { return static_cast<int>(peers.size()); }
  bool enabled() const { return peers.size() > 1; }
  int owner(std::size_t index) const { return static_cast<int>(index % peers.size()); }
  bool owns(std::size_t index) const { return owner(index) == rank; }
};

inline constexpr double kLingerIdleS = 1.0;  // PartitionConfig::linger_s: peers silent this long are done

// One of PartitionConfig's times (seconds) on the steady clock.
inline std::chrono::steady_clock::duration peer_seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace mlbench::pipeline
