// stall/exec_target.h: the runs of `mlbench-stall --exec` (which states, which probe settings,
// warm-up covering the compute-only cache and the loader's prefetch), the probe's environment,
// the PATH lookup of the command and the stand-in outcomes for the fetch-only runs.
#include "stall/exec_target.h"

#include <map>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "stall/analyzer.h"
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
  e.probe_dir = "/repo/probe";
  RunSpec spec;
  spec.env = {{"MLBENCH_PROBE_MODE", "normal"}};
  auto env = exec_environment(spec, e, "/out/runs/cached", {{"PYTHONPATH", "/mine"}, {"OUTPUT_DIRECTORY", "/x"}});
  EXPECT_EQ(env.at("PYTHONPATH"), "/repo/probe/autoprobe:/repo/probe:/mine");
  EXPECT_EQ(env.at("MLBENCH_PROBE_REPORT"), "/out/runs/cached");
  EXPECT_EQ(env.at("MLBENCH_PROBE_MODE"), "normal");
  EXPECT_EQ(env.at("MLBENCH_PROBE_NAME"), "exec");
  EXPECT_FALSE(env.count("OUTPUT_DIRECTORY"));
  env = exec_environment(spec, e, "/o", {});
  EXPECT_EQ(env.at("PYTHONPATH"), "/repo/probe/autoprobe:/repo/probe");
}

// pytorch/examples' ImageNet script takes the root of train/ and val/: mlbench's own loader, run
// beside it for the advice, read that root and found "1 items, fewer than one batch" (a file at its
// top), so the advice named it unmeasured. It reads DIR/train where there is one.
TEST(ExecTarget, TheLoaderRunReadsTheTrainFolderOfAnImageNetRoot) {
  const auto dir = mlbench::testing_support::scratch_dir("exec_loader_root");
  StallConfig c;
  c.data = dir.string();
  c.iterations = 10;
  const auto data_of = [](const RunSpec& r) {
    for (std::size_t i = 0; i + 1 < r.args.size(); ++i) {
      if (r.args[i] == "--data") return r.args[i + 1];
    }
    return std::string();
  };
  EXPECT_EQ(data_of(plan_exec_loader_run(c, 2, 32)), dir.string());  // a plain image folder: as given
  fs::create_directories(dir / "train" / "n0");
  fs::create_directories(dir / "val" / "n0");
  EXPECT_EQ(data_of(plan_exec_loader_run(c, 2, 32)), (dir / "train").string());
  fs::remove_all(dir);
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

// A script without +x was "no such executable file", and a directory passed the check and
// failed later with exit 1.
TEST(ExecTarget, SaysWhyAFileCannotBeExecuted) {
  const auto dir = mlbench::testing_support::scratch_dir("exec_problem");
  const fs::path tool = dir / "train.sh";
  std::ofstream(tool) << "#!/bin/sh\n";
  fs::permissions(tool, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_NE(executable_problem(tool.string()).find("not executable (chmod +x it"), std::string::npos)
      << executable_problem(tool.string());
  EXPECT_EQ(executable_problem(dir.string()), "it is a directory");
  EXPECT_EQ(executable_problem((dir / "nope").string()), "no such file");
  fs::permissions(tool, fs::perms::owner_all);
  EXPECT_EQ(executable_problem(tool.string()), "");
  fs::remove_all(dir);
}

TEST(ExecTarget, DirectReadOutcomeSaysWhereItsRateComesFrom) {
  const RunOutcome r = direct_read_outcome(1234.5, "direct reads, page cache warm");
  EXPECT_DOUBLE_EQ(r.rate, 1234.5);
  EXPECT_EQ(r.report["pipeline"]["source"], "direct reads, page cache warm");
  // The analyzer reads these blocks with a const operator[], undefined on a missing key: a
  // stand-in without "stall" crashed mlbench-stall --exec now and then after its last run.
  EXPECT_TRUE(r.report.contains("stall"));
  EXPECT_TRUE(r.report.contains("pipeline"));
}

TEST(ExecTarget, AnalysisOfProbeRunsWithDirectReadStandIns) {
  std::map<std::string, RunOutcome> runs;
  const auto probe_run = [](double rate, double stall_pct) {
    RunOutcome r;
    r.rate = rate;
    r.cv = 0.01;
    r.observations = 10;
    r.report = {{"stall", {{"stall_pct", stall_pct}}}, {"pipeline", {{"source", "mlbench_probe"}}}};
    return r;
  };
  runs["synthetic"] = probe_run(33.3, 0.0);
  runs["cached"] = probe_run(20.0, 40.0);
  runs["cold"] = probe_run(12.5, 62.5);
  runs["fetch-cold"] = direct_read_outcome(2000, "direct reads, random order, cold");
  runs["fetch-cached"] = direct_read_outcome(60000, "direct reads, page cache warm");
  AnalysisContext ctx;
  ctx.config.bench = "exec";
  ctx.items = 100;
  ctx.batch_size = 2;
  const auto result = analyze(ctx, runs, RawRates{});
  EXPECT_NEAR(result["split"]["compute_pct"].get<double>(), 100 * 12.5 / 33.3, 1e-6);
  EXPECT_NEAR(result["split"]["fetch_pct"].get<double>(), 100 * (1 - 12.5 / 20.0), 1e-6);
  EXPECT_TRUE(result["runs"]["fetch-cold"]["stall_pct"].is_null());
  EXPECT_EQ(result["runs"]["fetch-cached"]["pipeline"]["source"], "direct reads, page cache warm");
}

TEST(ExecTarget, LastLinesOfALog) {
  const auto dir = mlbench::testing_support::scratch_dir("exec_target_log");
  std::ofstream(dir / "log") << "a\n\nb\nc\n";
  EXPECT_EQ(last_lines(dir / "log", 2), "b | c");
  EXPECT_EQ(last_lines(dir / "none", 2), "");
  fs::remove_all(dir);
}

}  // namespace
