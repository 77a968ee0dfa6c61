// probe/probe.h, the C++ probe for a user's own training loop (docs/stall.md, "--exec"), with an injected
// clock: the wait/compute split, the observations and rates of its report, the iteration target
// that ends the loop, compute-only replay (the loader is not touched after K batches), snapshot
// and final reports written atomically, and its settings from the environment.
#include "probe/probe.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using mlbench::pipeline::Probe;
using mlbench::pipeline::ProbeOptions;

// A loader whose every next batch costs `wait_s` on the fake clock, and counts its fetches.
struct SlowLoader {
  struct iterator {
    SlowLoader* l;
    int i;
    std::vector<int>& operator*() { return l->batches[static_cast<std::size_t>(i)]; }
    iterator& operator++() {
      ++i;
      if (i < static_cast<int>(l->batches.size())) l->fetch();
      return *this;
    }
    bool operator==(const iterator& o) const { return i == o.i; }
  };
  iterator begin() {
    if (!batches.empty()) fetch();
    return {this, 0};
  }
  iterator end() { return {this, static_cast<int>(batches.size())}; }
  void fetch() {
    *now += wait_s;
    ++fetches;
  }
  std::vector<std::vector<int>> batches;
  double* now;
  double wait_s;
  int fetches = 0;
};

struct ProbeTest : testing::Test {
  void SetUp() override { dir = mlbench::testing_support::scratch_dir("probe_test"); }
  void TearDown() override { fs::remove_all(dir); }
  ProbeOptions options() {
    ProbeOptions o;
    o.report_dir = dir;
    o.clock = [this] { return now; };
    o.name = "unit";
    o.interval_s = 1e9;
    return o;
  }
  SlowLoader loader(int batches, int batch_size, double wait_s) {
    SlowLoader l{{}, &now, wait_s};
    for (int b = 0; b < batches; ++b) l.batches.emplace_back(static_cast<std::size_t>(batch_size), b);
    return l;
  }
  std::vector<fs::path> reports() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".json") out.push_back(e.path());
    }
    return out;
  }
  nlohmann::json only_report() const {
    const auto files = reports();
    EXPECT_EQ(files.size(), 1u);
    if (files.empty()) return {};
    std::ifstream in(files.front());
    return nlohmann::json::parse(in);
  }
  fs::path dir;
  double now = 0;
};

TEST_F(ProbeTest, SplitsEachIterationIntoWaitAndCompute) {
  ProbeOptions o = options();
  o.number = 5;
  o.warmup = 1;
  SlowLoader l = loader(20, 4, 0.030);
  {
    Probe probe(o);
    for (auto& batch : probe.wrap(l)) {
      EXPECT_EQ(batch.size(), 4u);
      now += 0.070;  // the step
    }
    probe.finish();
    EXPECT_EQ(probe.iterations(), 20);
  }
  const auto r = only_report();
  EXPECT_TRUE(r["completed"].get<bool>());
  EXPECT_EQ(r["batch_size"], 4);
  EXPECT_EQ(r["train"]["count"], 3);  // 4 observations of 5, one warm-up
  EXPECT_NEAR(r["train"]["avg"].get<double>(), 0.5, 1e-9);
  EXPECT_NEAR(r["train_item"]["avg"].get<double>(), 20 / 0.5, 1e-6);
  EXPECT_NEAR(r["stall"]["wait"]["avg"].get<double>(), 0.030, 1e-9);
  EXPECT_NEAR(r["stall"]["compute"]["avg"].get<double>(), 0.070, 1e-9);
  EXPECT_NEAR(r["stall"]["stall_pct"].get<double>(), 30.0, 1e-6);
  EXPECT_EQ(r["stall"]["warmup_iterations"], 5);
  EXPECT_EQ(r["probe"]["mode"], "normal");
  EXPECT_EQ(r["name"], "unit");
}

TEST_F(ProbeTest, AnIterationTargetEndsTheLoopAndCompletesTheReport) {
  ProbeOptions o = options();
  o.iterations = 6;
  o.number = 2;
  o.warmup = 1;  // target = (1 + 3) * 2 = 8 iterations
  SlowLoader l = loader(5, 2, 0.01);
  Probe probe(o);
  int epochs = 0, steps = 0;
  while (!probe.done() && epochs < 10) {
    ++epochs;
    for (auto& batch : probe.wrap(l)) {
      (void)batch;
      ++steps;
      now += 0.02;
    }
  }
  EXPECT_EQ(epochs, 2);
  EXPECT_EQ(steps, 8);
  EXPECT_TRUE(probe.done());
  const auto r = only_report();  // written when the target was reached
  EXPECT_TRUE(r["completed"].get<bool>());
  EXPECT_EQ(r["train"]["count"], 3);
  EXPECT_EQ(r["iterations"], 8);
}

TEST_F(ProbeTest, ComputeOnlyReplaysTheFirstBatchesWithoutTheLoader) {
  ProbeOptions o = options();
  o.mode = ProbeOptions::Mode::kComputeOnly;
  o.cache_batches = 3;
  o.iterations = 10;
  o.number = 2;
  o.warmup = 2;  // target 14
  SlowLoader l = loader(50, 1, 0.5);
  Probe probe(o);
  std::vector<int> seen;
  for (auto& batch : probe.wrap(l)) {
    seen.push_back(batch.front());
    now += 0.1;
  }
  EXPECT_EQ(l.fetches, 3);
  ASSERT_EQ(seen.size(), 14u);
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<int>(i % 3)) << i;
  const auto r = only_report();
  EXPECT_EQ(r["probe"]["mode"], "compute-only");
  EXPECT_EQ(r["probe"]["replayed_iterations"], 11);
  // The kept observations are replays: no wait, the step's time only.
  EXPECT_NEAR(r["stall"]["wait"]["avg"].get<double>(), 0.0, 1e-12);
  EXPECT_NEAR(r["train_item"]["avg"].get<double>(), 10.0, 1e-9);
}

TEST_F(ProbeTest, ASnapshotIsAFailReportThatTheFinalOneReplaces) {
  ProbeOptions o = options();
  o.interval_s = 1.0;
  o.number = 2;
  o.warmup = 0;
  SlowLoader l = loader(10, 1, 0.2);
  Probe probe(o);
  int step = 0;
  for (auto& batch : probe.wrap(l)) {
    (void)batch;
    now += 0.3;
    if (++step == 6) {
      const auto files = reports();
      ASSERT_EQ(files.size(), 1u);
      EXPECT_NE(files.front().filename().string().find(".FAIL."), std::string::npos);
      std::ifstream in(files.front());
      const auto snap = nlohmann::json::parse(in);
      EXPECT_FALSE(snap["completed"].get<bool>());
      EXPECT_NE(snap["reason"].get<std::string>().find("snapshot"), std::string::npos);
      EXPECT_GE(snap["iterations"].get<int>(), 2);
    }
  }
  probe.finish();
  const auto files = reports();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files.front().filename().string().find(".FAIL."), std::string::npos);
}

TEST_F(ProbeTest, ALoopEndingBeforeTheTargetIsAFailedReport) {
  ProbeOptions o = options();
  o.iterations = 100;
  o.number = 10;
  SlowLoader l = loader(7, 1, 0.01);
  {
    Probe probe(o);
    for (auto& batch : probe.wrap(l)) {
      (void)batch;
      now += 0.01;
    }
  }  // the destructor writes the report
  const auto r = only_report();
  EXPECT_FALSE(r["completed"].get<bool>());
  EXPECT_NE(r["reason"].get<std::string>().find("7 of 120"), std::string::npos) << r["reason"];
}

TEST_F(ProbeTest, SettingsComeFromTheEnvironment) {
  setenv("MLBENCH_PROBE_REPORT", dir.c_str(), 1);
  setenv("MLBENCH_PROBE_MODE", "compute-only", 1);
  setenv("MLBENCH_PROBE_ITERATIONS", "40", 1);
  setenv("MLBENCH_PROBE_CACHE_BATCHES", "5", 1);
  setenv("MLBENCH_PROBE_WARMUP", "3", 1);
  const ProbeOptions o = ProbeOptions::from_env();
  EXPECT_EQ(o.report_dir, dir);
  EXPECT_EQ(o.mode, ProbeOptions::Mode::kComputeOnly);
  EXPECT_EQ(o.iterations, 40);
  EXPECT_EQ(o.number, 4);
  EXPECT_EQ(o.cache_batches, 5);
  EXPECT_EQ(o.warmup, 3);
  setenv("MLBENCH_PROBE_MODE", "fast", 1);
  EXPECT_THROW(ProbeOptions::from_env(), std::invalid_argument);
  setenv("MLBENCH_PROBE_MODE", "normal", 1);
  setenv("MLBENCH_PROBE_ITERATIONS", "12x", 1);
  EXPECT_THROW(ProbeOptions::from_env(), std::invalid_argument);
  for (const char* n : {"MLBENCH_PROBE_REPORT", "MLBENCH_PROBE_MODE", "MLBENCH_PROBE_ITERATIONS",
                        "MLBENCH_PROBE_CACHE_BATCHES", "MLBENCH_PROBE_WARMUP"}) {
    unsetenv(n);
  }
}

}  // namespace

// The C++ probe's report is an instance report: it validates against the published JSON Schema
// (docs/schema/instance-report.schema.json, with Debian's python3-jsonschema) and reads through
// the typed reader every tool uses (core/instance_report.h).
TEST_F(ProbeTest, ItsReportValidatesAgainstTheSchemaAndReadsTyped) {
  if (std::system("/usr/bin/python3 -c 'import jsonschema' 2>/dev/null") != 0) {
    GTEST_SKIP() << "python3-jsonschema is not installed (scripts/bootstrap.sh installs it)";
  }
  ProbeOptions o = options();
  o.number = 2;
  SlowLoader l = loader(8, 4, 0.010);
  {
    Probe probe(o);
    for (auto& batch : probe.wrap(l)) {
      (void)batch;
      now += 0.020;  // the step
    }
    probe.finish();
  }
  const auto files = reports();
  ASSERT_EQ(files.size(), 1u);
  const std::string schema = std::string(MLBENCH_SOURCE_DIR) + "/docs/schema/instance-report.schema.json";
  const std::string check = "/usr/bin/python3 -c 'import json,sys; from jsonschema import Draft202012Validator as V; "
                            "errs = [e.message for e in V(json.load(open(sys.argv[1]))).iter_errors(json.load(open(sys.argv[2])))]; "
                            "print(errs); sys.exit(1 if errs else 0)' " +
                            schema + " " + files.front().string();
  EXPECT_EQ(std::system(check.c_str()), 0) << check;
  const auto typed = mlbench::core::read_instance_report(files.front());
  EXPECT_EQ(typed.schema_version, mlbench::core::kInstanceReportSchema);
  EXPECT_TRUE(typed.completed);
  ASSERT_TRUE(typed.train_item && typed.train_item->avg);
  EXPECT_GT(*typed.train_item->avg, 0);
  ASSERT_TRUE(typed.stall && typed.stall->stall_pct);
  EXPECT_NEAR(*typed.stall->stall_pct, 100.0 * 0.010 / 0.030, 1e-6);
}
