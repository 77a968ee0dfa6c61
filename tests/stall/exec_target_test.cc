// stall/exec_target.h: the runs of `mlbench-stall --exec` (which states, which probe settings,
// warm-up covering the compute-only cache and the loader's prefetch), the probe's environment,
// the PATH lookup of the command and the stand-in outcomes for the fetch-only runs.
#include "stall/exec_target.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using namespace mlbench::stall;

StallConfig config() {
  StallConfig c;
  c.data = "/data/train";
  c.iterations = 20;
  c.cpus = {1, 2};
  return c;
}

TEST(ExecTarget, PlansTheCommandInEveryStateWithTheProbeSettings) {
  ExecConfig e;
  e.command = {"/usr/bin/python3", "train.py", "--epochs", "3"};
  e.cache_batches = 8;
  const auto runs = plan_exec_runs(config(), e, 3);
  ASSERT_EQ(runs.size(), 5u);
  const std::vector<std::string> labels{"synthetic", "cached", "cold", "cpus-1", "cpus-2"};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].label, labels[i]);
    EXPECT_EQ(runs[i].command, e.command);
    EXPECT_EQ(runs[i].env.at("MLBENCH_PROBE_ITERATIONS"), "20");
    EXPECT_EQ(runs[i].env.at("MLBENCH_PROBE_NUMBER"), "2");
  }
  EXPECT_EQ(runs[0].env.at("MLBENCH_PROBE_MODE"), "compute-only");
  EXPECT_EQ(runs[0].env.at("MLBENCH_PROBE_CACHE_BATCHES"), "8");
  // Warm-up covers the 8 cached batches and 3 prefetched: ceil(11 / 2) + 1 observations.
  EXPECT_EQ(runs[0].env.at("MLBENCH_PROBE_WARMUP"), "7");
  EXPECT_EQ(runs[1].env.at("MLBENCH_PROBE_MODE"), "normal");
  EXPECT_EQ(runs[1].env.at("MLBENCH_PROBE_WARMUP"), "3");
  EXPECT_EQ(runs[1].cache, CacheState::Warm);
  EXPECT_EQ(runs[2].cache, CacheState::Cold);
  EXPECT_EQ(runs[2].env.at("MLBENCH_PROBE_COLD_DIR"), "/data/train");
  EXPECT_FALSE(runs[1].env.count("MLBENCH_PROBE_COLD_DIR"));
  EXPECT_EQ(runs[3].cpus, 1);
  EXPECT_EQ(runs[4].cpus, 2);
  EXPECT_EQ(runs[4].cache, CacheState::Warm);
}

TEST(ExecTarget, EnvironmentPutsTheProbeFirstOnPythonPath) {
  ExecConfig e;
  e.python_dir = "/repo/python";
  RunSpec spec;
  spec.env = {{"MLBENCH_PROBE_MODE", "normal"}};
  auto env = exec_environment(spec, e, "/out/runs/cached", {{"PYTHONPATH", "/mine"}, {"OUTPUT_DIRECTORY", "/x"}});
  EXPECT_EQ(env.at("PYTHONPATH"), "/repo/python/autoprobe:/repo/python:/mine");
  EXPECT_EQ(env.at("MLBENCH_PROBE_REPORT"), "/out/runs/cached");
  EXPECT_EQ(env.at("MLBENCH_PROBE_MODE"), "normal");
  EXPECT_EQ(env.at("MLBENCH_PROBE_NAME"), "exec");
  EXPECT_FALSE(env.count("OUTPUT_DIRECTORY"));
  env = exec_environment(spec, e, "/o", {});
  EXPECT_EQ(env.at("PYTHONPATH"), "/repo/python/autoprobe:/repo/python");
}

TEST(ExecTarget, FindsTheCommandOnPath) {
  const auto dir = mlbench::testing_support::scratch_dir("exec_target");
  const fs::path tool = dir / "bin" / "trainer";
  fs::create_directories(tool.parent_path());
  std::ofstream(tool) << "#!/bin/sh\n";
  fs::permissions(tool, fs::perms::owner_all);
  std::ofstream(dir / "bin" / "plain") << "not executable";
  EXPECT_EQ(find_executable("trainer", "/nonexistent:" + (dir / "bin").string()), tool.string());
  EXPECT_EQ(find_executable("plain", (dir / "bin").string()), "");
  EXPECT_EQ(find_executable("nope", (dir / "bin").string()), "");
  EXPECT_EQ(find_executable("./x/y", ""), "./x/y");  // a path is taken as given
  fs::remove_all(dir);
}

TEST(ExecTarget, DirectReadOutcomeSaysWhereItsRateComesFrom) {
  const RunOutcome r = direct_read_outcome(1234.5, "direct reads, page cache warm");
  EXPECT_DOUBLE_EQ(r.rate, 1234.5);
  EXPECT_EQ(r.report["pipeline"]["source"], "direct reads, page cache warm");
}

TEST(ExecTarget, LastLinesOfALog) {
  const auto dir = mlbench::testing_support::scratch_dir("exec_target_log");
  std::ofstream(dir / "log") << "a\n\nb\nc\n";
  EXPECT_EQ(last_lines(dir / "log", 2), "b | c");
  EXPECT_EQ(last_lines(dir / "none", 2), "");
  fs::remove_all(dir);
}

}  // namespace
