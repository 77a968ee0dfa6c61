// A job across nodes (stall/nodes.h): the ranks grouped by the node each ran on, each node's CPUs
// and page cache, and the partitioned-cache what-if at the job's node count.
#include "stall/nodes.h"

#include <gtest/gtest.h>

namespace mlbench::stall {
namespace {

RankPlace place(int rank, const std::string& node, const std::string& boot, std::vector<int> cpus, double rate = 50) {
  nlohmann::json b = {{"rank", rank},          {"host", "vm"},          {"node", node},
                      {"boot_id", boot},       {"cpus", cpus},          {"cpus_per_task", cpus.size()},
                      {"mem_total_mib", 4096}, {"memory_max_mib", 1024}};
  return rank_place(b, rank, rate);
}

// whatif.partitioned as analyze() writes it, prep-bound at 100/s a rank on one CPU a sample of 10 ms.
nlohmann::json partitioned_whatif() {
  return {{"G", 1000.0},
          {"P", 100.0},
          {"C", 100000.0},
          {"S", 150.0},
          {"R", 50000.0},
          {"cores", 2},
          {"memory_fraction", "1/N"},
          {"prep_cpu_us", 0.0},
          {"peer_request_cpu_us", 100.0},
          {"batch_items", 4.0},
          {"max_ids_per_request", 256}};
}

TEST(Nodes, ARankBlockWithoutNodeIsItsHost) {
  const RankPlace p = rank_place({{"rank", 1}, {"host", "h1"}}, 1, 10);
  EXPECT_EQ(p.node, "h1");
  EXPECT_TRUE(p.boot_id.empty());
  EXPECT_TRUE(p.cpus.empty());
  EXPECT_EQ(rank_place(nullptr, 2, 5).node, "");
}

// Two ranks a node on two nodes of one kernel (the test suite's private cluster): grouped by node,
// the page cache said to be shared, the partitioned what-if with each rate x 2.
TEST(Nodes, RanksGroupByNodeAndOneKernelSharesThePageCache) {
  const nlohmann::json j = nodes_json(
      {place(2, "n2", "b", {0}), place(0, "n1", "b", {0}), place(1, "n1", "b", {1}), place(3, "n2", "b", {1})},
      partitioned_whatif(), "b", 2048.0 * (1 << 20));
  EXPECT_EQ(j["count"], 2);
  EXPECT_EQ(j["ranks_per_node"], 2);
  ASSERT_EQ(j["nodes"].size(), 2u);
  EXPECT_EQ(j["nodes"][0]["node"], "n1");
  EXPECT_EQ(j["nodes"][0]["ranks"], nlohmann::json({0, 1}));
  EXPECT_EQ(j["nodes"][1]["ranks"], nlohmann::json({2, 3}));
  EXPECT_EQ(j["nodes"][0]["cpus"], "0-1");
  EXPECT_EQ(j["nodes"][0]["cpus_per_rank"]["1"], "1");
  EXPECT_DOUBLE_EQ(j["nodes"][0]["rate"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(j["nodes"][0]["page_cache_mib"].get<double>(), 1024);  // the cgroup's limit
  EXPECT_DOUBLE_EQ(j["nodes"][0]["dataset_fraction_fits"].get<double>(), 0.5);
  EXPECT_EQ(j["page_cache"]["shared"], true);
  EXPECT_NE(j["page_cache"]["text"].get<std::string>().find("one page cache"), std::string::npos);
  EXPECT_TRUE(j["page_cache"]["nodes_elsewhere"].empty());
  const auto& p = j["partitioned"];
  ASSERT_TRUE(p.is_object()) << j.dump(1);
  EXPECT_EQ(p["nodes"], 2);
  EXPECT_EQ(p["ranks_per_node"], 2);
  EXPECT_DOUBLE_EQ(p["memory_fraction"].get<double>(), 0.5);
  EXPECT_EQ(p["shared_cpus"], true);
  // Each node on its own: F = 1 / (0.5 / (2 C) + 0.5 x 2 / S) = ~150/s, below P = 200: fetch-bound.
  EXPECT_NEAR(p["own"].get<double>(), 1 / (0.5 / 200000.0 + 0.5 * 2 / 150.0), 0.01);
  EXPECT_EQ(p["bound_own"], "fetch");
  // Partitioned: every item in a node's cache or its peer's, at prep's 2 x 100/s.
  EXPECT_NEAR(p["partitioned"].get<double>(), 200, 0.01);
  EXPECT_EQ(p["bound_partitioned"], "prep");
  EXPECT_NEAR(p["job_partitioned"].get<double>(), 400, 0.01);
}

// Nodes on kernels of their own, one of them not this machine: the warm state did not reach it.
TEST(Nodes, NodesOnOtherKernelsHaveTheirOwnPageCacheAndMissTheWarmState) {
  const nlohmann::json j =
      nodes_json({place(0, "n1", "b1", {0, 1}), place(1, "n2", "b2", {0, 1})}, partitioned_whatif(), "b1", 0);
  EXPECT_EQ(j["page_cache"]["shared"], false);
  EXPECT_EQ(j["page_cache"]["kernels"], 2);
  EXPECT_EQ(j["page_cache"]["nodes_elsewhere"], nlohmann::json({"n2"}));
  EXPECT_NE(j["page_cache"]["text"].get<std::string>().find("n2 read what their own page cache held"),
            std::string::npos)
      << j["page_cache"];
  EXPECT_TRUE(j["nodes"][0]["dataset_fraction_fits"].is_null());  // no dataset size
  EXPECT_EQ(j["partitioned"]["shared_cpus"], false);
  EXPECT_DOUBLE_EQ(j["partitioned"]["cores"].get<double>(), 2);
}

TEST(Nodes, OneNodeOrNoWhatIfHasNoPartitionedPrediction) {
  const nlohmann::json one =
      nodes_json({place(0, "n1", "b", {0}), place(1, "n1", "b", {1})}, partitioned_whatif(), "b", 0);
  EXPECT_EQ(one["count"], 1);
  EXPECT_TRUE(one["partitioned"].is_null());
  EXPECT_EQ(one["partitioned_note"], "one node: nothing to partition");
  EXPECT_EQ(one["page_cache"]["shared"], false);
  EXPECT_EQ(nodes_text({{"nodes", one}}), "");  // the console says nothing of one node
  const nlohmann::json none = nodes_json({place(0, "n1", "b", {0}), place(1, "n2", "b", {0})}, nullptr, "b", 0);
  EXPECT_TRUE(none["partitioned"].is_null());
  EXPECT_NE(none["partitioned_note"].get<std::string>().find("no peer rate"), std::string::npos);
}

TEST(Nodes, ConsoleNamesEachNodesRanksAndCpus) {
  const nlohmann::json j =
      nodes_json({place(0, "n1", "b", {0, 1}, 47.6), place(1, "n2", "b", {0, 1}, 47.7)}, partitioned_whatif(), "b", 0);
  const std::string text = nodes_text({{"nodes", j}});
  EXPECT_NE(text.find("nodes: 2: n1: rank 0 (CPUs 0-1), 47.6/s; n2: rank 1 (CPUs 0-1), 47.7/s\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("page cache: the 2 nodes run on one kernel"), std::string::npos) << text;
  EXPECT_NE(text.find("partitioned cache across the job's 2 nodes (per node, 1 rank each"), std::string::npos) << text;
}

// srun's tasks do not inherit the CPU sweep's limit (the probe's split in each limits them): a cpus-1
// run whose ranks still had 2 CPUs each is said to be no measurement of 1 CPU, pointing at the ranks'
// cpu_split.error; a rank within the count, or unrecorded CPUs, says nothing.
TEST(Nodes, ACpuSweepRunThatDidNotReachTheRanksIsAWarning) {
  const auto w = cpu_sweep_warnings({{"cpus-1", {place(0, "n1", "b", {0, 1}), place(1, "n2", "b", {0})}},
                                     {"cpus-2", {place(0, "n1", "b", {0, 1}), place(1, "n2", "b", {0, 1})}},
                                     {"cached", {place(0, "n1", "b", {0, 1, 2})}},
                                     {"cpus-x", {place(0, "n1", "b", {0, 1, 2})}},
                                     {"cpus-3", {rank_place(nullptr, 0, 0)}}});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("run cpus-1 did not limit the ranks to 1 CPU (rank 0 on CPUs 0-1)"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("cpu_split.error says why"), std::string::npos) << w[0];
}

}  // namespace
}  // namespace mlbench::stall
