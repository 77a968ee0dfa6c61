// mlbench-stall --exec over srun across the private two-node test cluster (slurm_cluster.sh,
// started by the ctest fixture `slurm_cluster`, or by this program when run alone): a 2-rank DDP
// job (tests/stall/exec/ddp_train.py --launcher env, Gloo) with one task on each node, rank 1's
// samples slowed. The probe reaches every task through srun's environment; the analysis names two
// ranks on two nodes, the job, and the nodes' shared page cache (both "nodes" are this host).
// Skips, saying why, where the cluster cannot start or the Python has no torch.distributed.
#include <cstdlib>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "tests/slurm/slurm_test_cluster.h"

namespace mlbench::testing_support {
namespace {

namespace fs = std::filesystem;

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new SlurmEnvironment("slurm_stall_cluster"));

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

class SlurmStallE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cluster().skip.empty()) GTEST_SKIP() << "no private Slurm cluster: " << cluster().skip;
    const auto probe = run_command(std::string(MLBENCH_TEST_PYTHON) +
                                   " -c 'import torch.distributed as d; assert d.is_available()' 2>&1");
    if (probe.exit_code != 0) GTEST_SKIP() << MLBENCH_TEST_PYTHON << " has no torch.distributed: " << probe.output;
    dir_ = scratch_dir("slurm_stall");
    for (int c = 0; c < 2; ++c) {  // 100 files of 16 KiB in two classes
      fs::create_directories(dir_ / "data" / fmt::format("c{}", c));
      for (int i = 0; i < 50; ++i) {
        std::ofstream(dir_ / "data" / fmt::format("c{}", c) / fmt::format("f{}.bin", i)) << std::string(16384, 'x');
      }
    }
    run_command("sync");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_;
};

// Two tasks, one a node (srun allocating by itself), rank 1 20 ms a sample: two ranks on two nodes,
// the job's split summing to 100%, rank 1 named, each rank's CPUs as Slurm gave them.
TEST_F(SlurmStallE2E, AJobOfOneRankOnEachOfTwoNodesIsAnalysedPerNode) {
  const std::string srun = "srun --quiet -N2 --ntasks-per-node=1 --cpus-per-task=1 --time=5";
  const std::string script = fs::path(MLBENCH_SOURCE_DIR) / "tests" / "stall" / "exec" / "ddp_train.py";
  const auto r = run_command(fmt::format(
      "timeout 240 {} --exec --data {} --out {} --iterations 10 --cpus 2 --exec-writes-ok -- {} {} {} --launcher env "
      "--slow-rank 1 --slow-ms 20 2>&1",
      MLBENCH_STALL_BIN, (dir_ / "data").string(), (dir_ / "out").string(), srun, MLBENCH_TEST_PYTHON, script));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto result = read_json(dir_ / "out" / "stall.json");

  // Two ranks, each on a node of its own, each with the one CPU Slurm gave it.
  ASSERT_TRUE(result.contains("ranks")) << r.output;
  ASSERT_EQ(result["ranks"].size(), 2u) << result["ranks"].dump(1);
  std::set<std::string> nodes;
  for (const auto& rank : result["ranks"]) {
    EXPECT_EQ(rank["from"], "env") << rank.dump();  // SLURM_PROCID, through srun's environment
    EXPECT_EQ(rank["world_size"], 2);
    ASSERT_TRUE(rank["node"].is_string()) << rank.dump();
    nodes.insert(rank["node"].get<std::string>());
    ASSERT_TRUE(rank["cpus"].is_string()) << rank.dump();
    EXPECT_EQ(rank["cpus"].get<std::string>().find_first_of(",-"), std::string::npos) << rank.dump();  // one CPU
  }
  EXPECT_EQ(nodes.size(), 2u) << result["ranks"].dump(1);
  const std::string node_list = fs::path(cluster().dir / "nodes");
  for (const auto& n : nodes) {
    std::ifstream in(node_list);
    const std::string all((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(all.find(n), std::string::npos) << n << " is not a node of the cluster: " << all;
  }

  // The job: rank 1 is late (its data wait); the split sums to 100%.
  ASSERT_TRUE(result.contains("job")) << r.output;
  EXPECT_EQ(result["job"]["straggler"], 1) << result["job"].dump(1);
  const auto& split = result["split"];
  EXPECT_NEAR(split["compute_pct"].get<double>() + split["prep_pct"].get<double>() + split["fetch_pct"].get<double>(),
              100, 0.5)
      << split.dump();
  // The job's split over its ranks' time (each share rounded to 0.1): sync wait included.
  const auto& job_split = result["job"]["split"];
  EXPECT_NEAR(job_split["compute_pct"].get<double>() + job_split["prep_pct"].get<double>() +
                  job_split["fetch_pct"].get<double>() + job_split["sync_pct"].get<double>(),
              100, 0.5)
      << job_split.dump();
  EXPECT_GT(job_split["sync_pct"].get<double>(), 0) << job_split.dump();  // rank 0 waits for rank 1

  // The nodes: one rank each, one kernel (this host): one page cache, said so.
  const auto& n = result["nodes"];
  EXPECT_EQ(n["count"], 2) << n.dump(1);
  EXPECT_EQ(n["ranks_per_node"], 1);
  EXPECT_EQ(n["page_cache"]["shared"], true) << n.dump(1);
  EXPECT_NE(r.output.find("nodes: 2: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("page cache: the 2 nodes run on one kernel"), std::string::npos) << r.output;
  // Every run of the job: one report per rank, each naming its node.
  for (const char* label : {"synthetic", "cached", "cold"}) {
    std::set<std::string> run_nodes;
    for (const auto& e : fs::directory_iterator(dir_ / "out" / "runs" / label)) {
      if (e.path().extension() != ".json") continue;
      const auto report = read_json(e.path());
      run_nodes.insert(report["rank"].value("node", ""));
    }
    EXPECT_EQ(run_nodes, nodes) << label;
  }
}

}  // namespace
}  // namespace mlbench::testing_support
