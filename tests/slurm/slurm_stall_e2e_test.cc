// mlbench-stall --exec over srun across the private two-node test cluster (slurm_cluster.sh,
// started by the ctest fixture `slurm_cluster`, or by this program when run alone): a 2-rank DDP
// job (tests/stall/exec/ddp_train.py --launcher env, Gloo) with one task on each node, rank 1's
// samples slowed. The probe reaches every task through srun's environment; the analysis names two
// ranks on two nodes, the job, and the nodes' shared page cache (both "nodes" are this host).
// Skips, saying why, where the cluster cannot start or the Python has no torch.distributed.
#include <sched.h>

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
  // The reports of run `label`, one per rank.
  std::vector<nlohmann::json> reports(const std::string& label) const {
    std::vector<nlohmann::json> out;
    for (const auto& e : fs::directory_iterator(dir_ / "out" / "runs" / label)) {
      if (e.path().extension() == ".json") out.push_back(read_json(e.path()));
    }
    return out;
  }
  fs::path dir_;
};

// The CPUs this process may run on.
std::vector<int> own_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

// Each rank of a `cpus-N` run (the CPU sweep's split in a task that srun started, probe/mlbench_probe.py):
// N CPUs of those Slurm gave it, the job's CPUs taken from its own affinity, no error.
void expect_split_from_slurm(const nlohmann::json& report, int n) {
  ASSERT_TRUE(report["cpu_split"].is_object()) << report["rank"].dump();
  const auto& split = report["cpu_split"];
  EXPECT_TRUE(split["error"].is_null()) << split.dump();
  EXPECT_EQ(split["job_cpus_from"], "the task's affinity (Slurm)") << split.dump();
  EXPECT_EQ(split["slot_from"], "SLURM_LOCALID") << split.dump();
  ASSERT_TRUE(split["cpus"].is_array()) << split.dump();
  EXPECT_EQ(split["cpus"].size(), static_cast<std::size_t>(n)) << split.dump();
  EXPECT_EQ(report["rank"]["cpus"], split["cpus"]) << report["rank"].dump();
}

// Two tasks, one a node (srun allocating by itself), rank 1 20 ms a sample: two ranks on two nodes,
// the job's split summing to 100%, rank 1 named, each rank's CPUs as Slurm gave them.
// The analyzer runs on the last CPU of this process's only: its CPUs (MLBENCH_PROBE_JOB_CPUS) are not
// those Slurm gives the tasks (the first of each node), and the `cpus-1` run's split takes each
// task's own.
TEST_F(SlurmStallE2E, AJobOfOneRankOnEachOfTwoNodesIsAnalysedPerNode) {
  const std::string srun = "srun --quiet -N2 --ntasks-per-node=1 --cpus-per-task=1 --time=5";
  const std::string script = fs::path(MLBENCH_SOURCE_DIR) / "tests" / "stall" / "exec" / "ddp_train.py";
  const auto cpus = own_cpus();
  const std::string pin = cpus.size() > 1 ? fmt::format("taskset -c {}", cpus.back()) : "";
  const auto r = run_command(fmt::format(
      "timeout 240 {} {} --exec --data {} --out {} --iterations 10 --cpus 1 --exec-writes-ok -- {} {} {} --launcher "
      "env --slow-rank 1 --slow-ms 20 2>&1",
      pin, MLBENCH_STALL_BIN, (dir_ / "data").string(), (dir_ / "out").string(), srun, MLBENCH_TEST_PYTHON, script));
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
  // The sweep's cpus-1 run: each task kept 1 CPU of those Slurm gave it (before, the probe took the
  // analyzer's CPU, which was not the task's: sched_setaffinity failed, or was never asked with one
  // rank a node), and no warning that the run did not limit the ranks.
  const auto split_reports = reports("cpus-1");
  ASSERT_EQ(split_reports.size(), 2u) << r.output;
  for (const auto& report : split_reports) {
    expect_split_from_slurm(report, 1);
    EXPECT_EQ(report["cpu_split"]["job_cpus"], report["cpu_split"]["cpus"]) << report["cpu_split"].dump();
  }
  EXPECT_EQ(r.output.find("did not limit the ranks"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("CPUs per rank not applied"), std::string::npos) << r.output;
}

// Two tasks on one node, one CPU each: with TaskPlugin=task/cgroup (the private cluster) both share
// the step's cpuset on the node (CPUs 0-1); the `cpus-1` run's split gives each its slot's CPU of
// them (SLURM_LOCALID), distinct, and says no warning. ~17 s.
TEST_F(SlurmStallE2E, TwoTasksOnOneNodeEachKeepADistinctCpuInTheSweepsSplit) {
  if (own_cpus().size() < 2) GTEST_SKIP() << "needs 2 CPUs in this process's affinity: 1 per rank";
  const std::string srun = "srun --quiet -N1 --ntasks-per-node=2 --cpus-per-task=1 --time=5";
  const std::string script = fs::path(MLBENCH_SOURCE_DIR) / "tests" / "stall" / "exec" / "ddp_train.py";
  const auto r = run_command(fmt::format(
      "timeout 240 {} --exec --data {} --out {} --iterations 10 --cpus 1 --exec-writes-ok -- {} {} {} --launcher env "
      "2>&1",
      MLBENCH_STALL_BIN, (dir_ / "data").string(), (dir_ / "out").string(), srun, MLBENCH_TEST_PYTHON, script));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto split_reports = reports("cpus-1");
  ASSERT_EQ(split_reports.size(), 2u) << r.output;
  std::set<int> used;
  for (const auto& report : split_reports) {
    expect_split_from_slurm(report, 1);
    const auto& split = report["cpu_split"];
    EXPECT_EQ(split["slot"], report["rank"]["local_rank"]) << split.dump();
    const auto slot = split["slot"].get<std::size_t>();
    if (split["job_cpus"].size() > slot) {  // task/cgroup: the step's cpuset, its slot's share
      EXPECT_EQ(split["cpus"][0], split["job_cpus"][slot]) << split.dump();
    }
    if (split["cpus"].size() == 1) used.insert(split["cpus"][0].get<int>());
  }
  EXPECT_EQ(used.size(), 2u) << "each rank on a CPU of its own";
  EXPECT_EQ(r.output.find("did not limit the ranks"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("CPUs per rank not applied"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace mlbench::testing_support
