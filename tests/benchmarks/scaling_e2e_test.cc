// End-to-end runs of the real scaling binary on tiny settings: two local ranks
// (rank 0 starts the second) train with averaged gradients and end with the same
// weights; rank 0's report holds the efficiency and both ranks' times; a rank
// that dies ends the run with a FAIL report naming it, not a hang.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/process.h"
#include "tests/support/bench_run.h"
#include "tests/support/processes.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

fs::path data_root() {
  static const fs::path root = mlbench::testing_support::scratch_dir("scaling_e2e_data");
  return root;
}

class ScalingE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string cmd = std::string(MLBENCH_DATAGEN) + " ensure fake-imagenet-tiny --root " + data_root().string();
    const auto r = mlbench::testing_support::run_command(cmd);
    ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(data_root()); }

  void SetUp() override {
    tmp_ = mlbench::testing_support::temp_dir_for_current_test("scaling_e2e");
    dir_ = tmp_->path();
  }
  void TearDown() override {
    if (HasFailure()) tmp_->keep();
  }

  mlbench::testing_support::BenchRun run(const std::string& env, const std::string& args) {
    const fs::path reports = dir_ / "reports";
    return mlbench::testing_support::run_bench(
        env + " " + std::string(MLBENCH_BENCH_DIR) + "/scaling --no-cuda --cpu-cores 2 --data " +
            (data_root() / "fake-imagenet-tiny" / "train").string() +
            " --arch resnet18 --image-size 32 --classes 4 --batch-size 4 --workers 1 --repeat 3 --number 2 "
            "--warmup 1 --timeout 60 --report " +
            reports.string() + " " + args,
        reports, dir_ / "scaling.log");
  }

  std::unique_ptr<mlbench::testing_support::TempDir> tmp_;
  fs::path dir_;
};

TEST_F(ScalingE2E, TwoLocalRanksStayInSyncAndReportEfficiency) {
  const auto r = run("", "--ranks 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(r.reports.size(), 1u) << r.output;
  const auto& j = r.reports[0];
  EXPECT_EQ(j["completed"], true);
  const auto& m = j["metrics"];
  EXPECT_EQ(m["world_size"], 2);
  EXPECT_EQ(m["rendezvous"], "local");
  EXPECT_EQ(m["threads_per_rank"], 1);
  // Different shards, averaged gradients: the same weights on both ranks.
  EXPECT_EQ(m["weights"]["in_sync"], true) << m.dump(1);
  ASSERT_EQ(m["ranks"].size(), 2u) << m.dump(1);
  for (const auto& rank : m["ranks"]) {
    EXPECT_TRUE(rank["compute_s"].is_number()) << rank;
    EXPECT_TRUE(rank["wait_s"].is_number()) << rank;
    EXPECT_GE(rank["allreduce_exposed_s"].get<double>(), 0.0) << rank;
  }
  EXPECT_EQ(m["ranks"][1]["weights"]["in_sync"], true);
  EXPECT_GT(m["buckets"].get<int>(), 0);
  // The global batch: 2 ranks x 4.
  EXPECT_GT(m["throughput_1"].get<double>(), 0.0);
  const double eff = m["scaling_efficiency"].get<double>();
  EXPECT_NEAR(eff, m["throughput_n"].get<double>() / (2 * m["throughput_1"].get<double>()), 1e-9);
  EXPECT_GT(eff, 0.0);
}

TEST_F(ScalingE2E, OneRankIsItsOwnBaseline) {
  const auto r = run("", "--ranks 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(r.reports.size(), 1u) << r.output;
  const auto& m = r.reports[0]["metrics"];
  EXPECT_EQ(m["world_size"], 1);
  EXPECT_EQ(m["scaling_efficiency"], 1.0);
  EXPECT_EQ(m["ranks"].size(), 1u);
}

// A rank that crashes after joining: rank 0's allreduce fails at once (connection
// reset), and the FAIL report says which rank ended and how.
TEST_F(ScalingE2E, ACrashedRankEndsTheRunWithAFailRecordNamingIt) {
  const auto r = run("MLBENCH_SCALING_FAIL_RANK=1", "--ranks 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  ASSERT_EQ(r.reports.size(), 1u) << r.output;
  EXPECT_EQ(r.reports[0]["completed"], false);
  const std::string reason = r.reports[0]["reason"].get<std::string>();
  EXPECT_NE(reason.find("rank 1 exited with status 3"), std::string::npos) << reason;
  EXPECT_NE(r.output.find("scaling: error: rank 1 exited with status 3"), std::string::npos) << r.output;
  // The rank's own last words, and where the rest of its output is.
  EXPECT_NE(reason.find("failing on purpose"), std::string::npos) << reason;
  const auto at = reason.find("(its output: ");
  ASSERT_NE(at, std::string::npos) << reason;
  const std::string log = reason.substr(at + 13, reason.find(')', at) - at - 13);
  EXPECT_TRUE(std::filesystem::exists(log)) << log;
  std::filesystem::remove(log);
}

// SIGTERM to a local rank 0 once its log has a line starting with `line`;
// checks that it ends within 60 s with a FAIL report and takes rank 1 with it.
// Returns the report.
nlohmann::json terminate_rank0_at(const fs::path& dir, const std::vector<std::string>& args, const std::string& line) {
  const fs::path reports = dir / "reports";
  fs::create_directories(reports);
  const fs::path log = dir / "scaling.log";
  mlbench::core::ProcessSpec spec;
  spec.executable = std::string(MLBENCH_BENCH_DIR) + "/scaling";
  spec.args = {"--no-cuda", "--synthetic", "--cpu-cores", "2", "--arch", "resnet18", "--image-size", "32",
               "--classes", "4", "--batch-size", "4", "--number", "2", "--warmup", "1", "--timeout", "300",
               "--ranks", "2", "--report", reports.string()};
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  spec.output = mlbench::core::Output::File;
  spec.log_path = log.string();
  mlbench::core::Process rank0(spec);
  // Signal once the line is there, not after a fixed sleep.
  const auto started = std::chrono::steady_clock::now();
  while (!mlbench::testing_support::log_has_line(log, line)) {
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::minutes(3)) << "no '" << line << "': " << log;
    EXPECT_FALSE(rank0.try_wait()) << "scaling ended before it was signalled: " << log;
    if (testing::Test::HasFailure()) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const auto kids = mlbench::testing_support::children_of(rank0.pid());
  EXPECT_EQ(kids.size(), 1u) << "rank 0 should have started one copy";
  kill(rank0.pid(), SIGTERM);
  const auto st = rank0.wait_for(60);
  EXPECT_TRUE(st) << "rank 0 did not end within 60 s of SIGTERM (waiting for rank 1?)";
  if (!st) return {};
  EXPECT_EQ(st->shell_code(), 128 + SIGTERM);
  for (int k : kids) EXPECT_FALSE(mlbench::testing_support::alive(k)) << "rank 1 (pid " << k << ") outlived rank 0";
  std::vector<nlohmann::json> found;
  for (const auto& e : fs::directory_iterator(reports)) {
    std::ifstream in(e.path());
    found.push_back(nlohmann::json::parse(in));
  }
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? nlohmann::json() : found[0];
}

// SIGTERM (or Ctrl-C) to rank 0 while the ranks train: rank 0 writes its FAIL
// report and ends, and so does rank 1. Rank 1 is then blocked in an allreduce
// that rank 0 will never join, where its own SIGTERM handling cannot act: rank 0
// used to wait for it until Gloo's --timeout (300 s here) ran out.
TEST_F(ScalingE2E, TerminatingRankZeroEndsEveryRankWithoutWaitingForTheTimeout) {
  const auto report = terminate_rank0_at(dir_, {"--repeat", "100000"}, "[  2/");
  EXPECT_EQ(report.value("completed", true), false) << report.dump();
}

// SIGTERM during the baseline (rank 0 trains alone, rank 1 waits at a barrier):
// the baseline loop is not the training loop, whose check of the stop signals
// had not started, so rank 0 trained on through all of --baseline-iterations.
TEST_F(ScalingE2E, TerminatingDuringTheBaselineEndsTheRunWithAFailRecord) {
  const auto report =
      terminate_rank0_at(dir_, {"--repeat", "3", "--baseline-iterations", "1000000"}, "scaling: baseline:");
  EXPECT_EQ(report.value("completed", true), false) << report.dump();
  EXPECT_EQ(report.value("reason", ""), "terminated") << report.dump();
}

TEST_F(ScalingE2E, MinTimeIsRefused) {
  // Every rank must run the same number of iterations: no calibration per rank.
  const auto r = mlbench::testing_support::run_command(std::string(MLBENCH_BENCH_DIR) +
                                                       "/scaling --no-cuda --synthetic --min-time 0.2 --ranks 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--min-time is not supported"), std::string::npos) << r.output;
}

}  // namespace
