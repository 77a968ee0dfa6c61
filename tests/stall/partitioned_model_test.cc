// The partitioned-cache what-if (stall/partitioned_model.h) on hand-computed numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "stall/partitioned_model.h"

namespace mlbench::stall {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

PartitionedNodes nodes(int n, double m) {
  PartitionedNodes in;
  in.nodes = n;
  in.memory_fraction = m;
  in.memory_rate = 1e6;
  in.storage_rate = 1000;
  in.peer_rate = 4000;
  return in;
}

TEST(PartitionedModel, TwoNodesHoldingHalfEachCacheEverythingBetweenThem) {
  const auto p = predict_partitioned(nodes(2, 0.5));
  EXPECT_DOUBLE_EQ(p.cluster_cached, 1.0);
  EXPECT_DOUBLE_EQ(p.local, 0.5);
  EXPECT_DOUBLE_EQ(p.peer, 0.5);
  EXPECT_DOUBLE_EQ(p.storage, 0.0);
  // Own: half from memory, half from storage shared by 2 nodes: 1 / (0.5/1e6 + 0.5 * 2/1000).
  EXPECT_NEAR(p.own, 1.0 / (0.5e-6 + 1e-3), 1e-9);
  // Partitioned: half local, half from the peer: 1 / (0.5/1e6 + 0.5/4000).
  EXPECT_NEAR(p.partitioned, 1.0 / (0.5e-6 + 0.5 / 4000), 1e-9);
  EXPECT_EQ(p.bound_own, "fetch");
  EXPECT_EQ(p.bound_partitioned, "fetch");
  EXPECT_NEAR(p.gain, p.partitioned / p.own, 1e-12);
}

TEST(PartitionedModel, ACacheTooSmallForTheDatasetLeavesItsRestOnSharedStorage) {
  // 2 nodes of 25% each: half the dataset cached, a quarter local, a quarter on the peer.
  const auto p = predict_partitioned(nodes(2, 0.25));
  EXPECT_DOUBLE_EQ(p.cluster_cached, 0.5);
  EXPECT_DOUBLE_EQ(p.local, 0.25);
  EXPECT_DOUBLE_EQ(p.peer, 0.25);
  EXPECT_DOUBLE_EQ(p.storage, 0.5);
  EXPECT_NEAR(p.partitioned, 1.0 / (0.25e-6 + 0.25 / 4000 + 0.5 * 2 / 1000), 1e-9);
  EXPECT_NEAR(p.own, 1.0 / (0.25e-6 + 0.75 * 2 / 1000), 1e-9);
  // Four nodes of 25%: all cached, three quarters from peers; own caches a quarter, misses 3/4 on S/4.
  const auto q = predict_partitioned(nodes(4, 0.25));
  EXPECT_DOUBLE_EQ(q.peer, 0.75);
  EXPECT_NEAR(q.partitioned, 1.0 / (0.25e-6 + 0.75 / 4000), 1e-9);
  EXPECT_NEAR(q.own, 1.0 / (0.25e-6 + 0.75 * 4 / 1000), 1e-9);
}

TEST(PartitionedModel, PrepAndComputeCapBothAndSharedCpusDivideThePrep) {
  PartitionedNodes in = nodes(4, 0.25);
  in.prep_rate = 8000;
  in.device_rate = kInf;
  auto p = predict_partitioned(in);
  EXPECT_NEAR(p.partitioned, 1.0 / (0.25e-6 + 0.75 / 4000), 1e-9);  // 5,327/s: fetch below P
  // 4 nodes sharing 2 CPUs, a sample's prep 250 us of CPU, a peer fetch 40 us (both ends):
  // own 0.5 / 250 us = 2,000/s; partitioned, 3/4 from peers, 0.5 / 280 us = 1,785.7/s.
  in.shared_cpus = true;
  in.cores = 2;
  in.prep_cpu_s = 250e-6;
  in.peer_request_cpu_s = 40e-6;
  in.storage_rate = 1e9;  // storage and network out of the way: both prep-bound
  in.peer_rate = 1e6;
  p = predict_partitioned(in);
  EXPECT_NEAR(p.own, 2000, 1e-6);
  EXPECT_NEAR(p.partitioned, 0.5 / 280e-6, 1e-6);
  EXPECT_EQ(p.bound_partitioned, "prep");
  // A node's own prep (one worker: 1,500/s) below its share of the CPUs caps it.
  in.prep_rate = 1500;
  p = predict_partitioned(in);
  EXPECT_DOUBLE_EQ(p.partitioned, 1500);
  // On machines of their own, each node has the 2 CPUs: 2 / 280 us, capped by P = 8,000.
  in.prep_rate = 8000;
  in.shared_cpus = false;
  p = predict_partitioned(in);
  EXPECT_NEAR(p.partitioned, 2 / 280e-6, 1e-6);
  in.device_rate = 500;
  p = predict_partitioned(in);
  EXPECT_DOUBLE_EQ(p.partitioned, 500);
  EXPECT_EQ(p.bound_partitioned, "device");
}

TEST(PartitionedModel, NodesPayTheirPeersCpuPerRequestOneABatchAndPeer) {
  // One item a batch: a request per item from a peer, (N-1)/N a sample.
  EXPECT_DOUBLE_EQ(peer_requests_per_sample(2, 1, 256), 0.5);
  EXPECT_DOUBLE_EQ(peer_requests_per_sample(4, 1, 256), 0.75);
  EXPECT_DOUBLE_EQ(peer_requests_per_sample(1, 32, 256), 0.0);
  // Batches of 32: each of the N-1 peers once a batch (it has items in all but (1-1/N)^32).
  EXPECT_NEAR(peer_requests_per_sample(2, 32, 256), (1 - std::pow(0.5, 32)) / 32, 1e-15);
  EXPECT_NEAR(peer_requests_per_sample(4, 32, 256), 3 * (1 - std::pow(0.75, 32)) / 32, 1e-15);
  // At most 4 ids a request: 16 items of a peer in a batch of 32 take 4 requests.
  EXPECT_NEAR(peer_requests_per_sample(2, 32, 4), 4.0 / 32, 1e-15);
  // 64 nodes, batches of 32: a batch meets 25.3 of the 63 peers, not all of them.
  EXPECT_NEAR(peer_requests_per_sample(64, 32, 256), 63 * (1 - std::pow(63.0 / 64, 32)) / 32, 1e-12);
  EXPECT_THROW(peer_requests_per_sample(0, 32, 256), std::invalid_argument);
  EXPECT_THROW(peer_requests_per_sample(2, 0.5, 256), std::invalid_argument);
  EXPECT_THROW(peer_requests_per_sample(2, 32, 0), std::invalid_argument);
  // 4 nodes sharing 2 CPUs, 250 us a sample's prep, 400 us a request: batches of 32 make
  // 3 (1 - 0.75^32) / 32 requests a sample; 2 nodes make (1 - 0.5^32) / 32, a third of that.
  PartitionedNodes in = nodes(4, 0.25);
  in.shared_cpus = true;
  in.cores = 2;
  in.prep_cpu_s = 250e-6;
  in.peer_request_cpu_s = 400e-6;
  in.batch_items = 32;
  in.storage_rate = 1e9;
  in.peer_rate = 1e9;
  const double q4 = 3 * (1 - std::pow(0.75, 32)) / 32;
  auto p = predict_partitioned(in);
  EXPECT_NEAR(p.requests, q4, 1e-15);
  EXPECT_NEAR(p.partitioned, 0.5 / (250e-6 + q4 * 400e-6), 1e-6);
  EXPECT_NEAR(p.own, 0.5 / 250e-6, 1e-6);  // caching on its own, a node asks no peer
  in.nodes = 2;
  in.memory_fraction = 0.5;
  p = predict_partitioned(in);
  EXPECT_NEAR(p.partitioned, 1 / (250e-6 + (1 - std::pow(0.5, 32)) / 32 * 400e-6), 1e-6);
  const auto j = partitioned_whatif_json(in, {2, 4});
  EXPECT_NEAR(j["predictions"][1]["peer_requests_per_sample"].get<double>(), q4, 1e-15);
  EXPECT_DOUBLE_EQ(j["batch_items"].get<double>(), 32.0);
  EXPECT_NE(j["model_formula"].get<std::string>().find("(N-1) max(1 - (1-1/N)^B, B/(N M)) / B"), std::string::npos);
}

TEST(PartitionedModel, OneNodeIsItsOwnCache) {
  const auto p = predict_partitioned(nodes(1, 0.3));
  EXPECT_DOUBLE_EQ(p.peer, 0.0);
  EXPECT_NEAR(p.partitioned, p.own, 1e-9);
}

TEST(PartitionedModel, JsonTakesOneOverNWhenNoMemoryIsGiven) {
  PartitionedNodes base = nodes(2, 0);
  const auto j = partitioned_whatif_json(base, {2, 4});
  EXPECT_EQ(j["memory_fraction"], "1/N");
  ASSERT_EQ(j["predictions"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["predictions"][1]["memory_fraction"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j["predictions"][1]["from_peers"].get<double>(), 0.75);
  EXPECT_NE(j["model_formula"].get<std::string>().find("min(1, N m)"), std::string::npos);
}

TEST(PartitionedModel, BadInputsAreRefused) {
  EXPECT_THROW(predict_partitioned(nodes(0, 0.5)), std::invalid_argument);
  EXPECT_THROW(predict_partitioned(nodes(2, 1.5)), std::invalid_argument);
  PartitionedNodes in = nodes(2, 0.5);
  in.peer_rate = 0;
  EXPECT_THROW(predict_partitioned(in), std::invalid_argument);
  PartitionedNodes unbounded;  // every rate infinite
  unbounded.memory_fraction = 0.5;
  EXPECT_THROW(predict_partitioned(unbounded), std::invalid_argument);
}

}  // namespace
}  // namespace mlbench::stall
