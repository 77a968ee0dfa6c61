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
#include <map>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/process.h"
#include "core/sysinfo.h"
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

// --rank-reports (what mlbench-stall --ranks runs): every rank writes its own report, named by its
// rank, with its rank block, its own samples/s, and per iteration its sync wait (blocked on the
// allreduce after backward) taken out of its compute; each local rank on a CPU of its own.
TEST_F(ScalingE2E, RankReportsGiveEveryRankItsOwnReportWithItsSyncWait) {
  const auto r = run("", "--ranks 2 --rank-reports");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(r.reports.size(), 2u) << r.output;
  std::map<int, nlohmann::json> by_rank;
  for (std::size_t i = 0; i < r.reports.size(); ++i) {
    const auto& j = r.reports[i];
    ASSERT_TRUE(j["rank"].is_object()) << r.report_names[i];
    const int k = j["rank"]["rank"].get<int>();
    EXPECT_NE(r.report_names[i].find(fmt::format("mlbench.scaling.rank{}.R0.D0.", k)), std::string::npos)
        << r.report_names[i];
    EXPECT_EQ(j["rank"]["world_size"], 2);
    EXPECT_EQ(j["rank"]["local_rank"], k);
    EXPECT_EQ(j["rank"]["from"], "local");
    EXPECT_FALSE(j["rank"]["host"].get<std::string>().empty());
    EXPECT_EQ(j["completed"], true);
    const auto& st = j["stall"];
    ASSERT_TRUE(st["sync"].is_object()) << st.dump();
    EXPECT_EQ(st["sync"]["count"], 4) << st.dump();  // (repeat 3 - warmup 1) x number 2
    EXPECT_GE(st["sync"]["avg"].get<double>(), 0.0);
    // The phases still make the iteration: wait + h2d + compute (less sync) + sync.
    const double parts = st["wait"]["avg"].get<double>() + st["h2d"]["avg"].get<double>() +
                         st["compute"]["avg"].get<double>() + st["sync"]["avg"].get<double>();
    EXPECT_NEAR(parts, st["iteration"]["avg"].get<double>(), 1e-6 + 1e-3 * parts) << st.dump();
    // The sync wait is the exposed allreduce the rank measured.
    EXPECT_NEAR(st["sync"]["avg"].get<double>(), j["metrics"]["allreduce_exposed_s"].get<double>(), 1e-9);
    by_rank[k] = j;
  }
  ASSERT_EQ(by_rank.size(), 2u);
  // Each rank's own samples/s (a batch of 4 per iteration); rank 0's metrics keep the job's.
  const auto& m = by_rank[0]["metrics"];
  EXPECT_EQ(m["rank_reports"], true);
  EXPECT_NEAR(m["throughput_n"].get<double>(), 2 * by_rank[0]["train_item"]["avg"].get<double>(), 1e-6);
  EXPECT_EQ(m["weights"]["in_sync"], true) << m.dump(1);
  ASSERT_EQ(m["ranks"].size(), 2u);
  EXPECT_TRUE(m["ranks"][1]["sync_s"].is_number()) << m["ranks"].dump();
  if (mlbench::core::affinity_cpus().size() >= 2) {
    EXPECT_NE(by_rank[0]["machine"]["affinity"], by_rank[1]["machine"]["affinity"]) << "each rank on its own CPU";
  }
}

// mlbench-stall --bench scaling --ranks 2 on tiny settings: every run is a job of two ranks, and
// stall.json has both ranks and the job (straggler or balanced) with a split that sums to 100%.
TEST_F(ScalingE2E, StallAnalysesAJobOfTwoRanksOfItsOwn) {
  const fs::path out = dir_ / "stall";
  const std::string cmd = fmt::format(
      "{} --bench scaling --ranks 2 --bench-dir {} --data {} --out {} --cpus 2 --cache-fracs 0.5 --page-fracs 0 "
      "--iterations 4 --target-noise 0 --timeout 120 -- --arch resnet18 --image-size 32 --classes 4 --batch-size 4 "
      "--workers 1 --baseline-iterations 1 --timeout 60 > {} 2>&1",
      MLBENCH_STALL_BIN, MLBENCH_BENCH_DIR, (data_root() / "fake-imagenet-tiny" / "train").string(), out.string(),
      (dir_ / "stall.log").string());
  const auto r = mlbench::testing_support::run_command(cmd);
  std::ifstream log_in(dir_ / "stall.log");
  const std::string log((std::istreambuf_iterator<char>(log_in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(r.exit_code, 0) << log;
  std::ifstream in(out / "stall.json");
  const auto j = nlohmann::json::parse(in);
  ASSERT_TRUE(j["ranks"].is_array()) << j.dump(1).substr(0, 2000);
  ASSERT_EQ(j["ranks"].size(), 2u);
  for (int k = 0; k < 2; ++k) {
    const auto& rank = j["ranks"][k];
    EXPECT_EQ(rank["rank"], k);
    EXPECT_EQ(rank["world_size"], 2);
    EXPECT_EQ(rank["from"], "local");
    EXPECT_GT(rank["rate"].get<double>(), 0.0);
    EXPECT_TRUE(rank["sync_ms"].is_number()) << rank.dump();  // measured by the benchmark, not inferred
    EXPECT_NEAR(rank["wait_pct"].get<double>() + rank["sync_pct"].get<double>() + rank["compute_pct"].get<double>(),
                100.0, 0.5)
        << rank.dump();
  }
  const auto& job = j["job"];
  ASSERT_TRUE(job.is_object());
  EXPECT_EQ(job["ranks"], 2);
  EXPECT_TRUE(job["balanced"].is_boolean());
  EXPECT_EQ(job["balanced"].get<bool>(), job["straggler"].is_null()) << job.dump();
  EXPECT_NEAR(job["rate"].get<double>(), 2 * std::min(j["ranks"][0]["rate"].get<double>(), j["ranks"][1]["rate"].get<double>()),
              1e-6);
  // The job's split, where the analysis gives one (compute, prep, fetch and sync of the ranks' time).
  if (job.contains("split") && job["split"].is_object()) {
    const auto& s = job["split"];
    double sum = 0;
    for (const char* key : {"compute_pct", "prep_pct", "fetch_pct", "sync_pct"}) sum += s[key].get<double>();
    EXPECT_NEAR(sum, 100.0, 0.5) << s.dump();
  }
  // Every run was a job of two: each rank's report in each run's folder.
  for (const char* label : {"synthetic", "cached", "cold"}) {
    int reports = 0;
    for (const auto& e : fs::directory_iterator(out / "runs" / label)) reports += e.path().extension() == ".json";
    EXPECT_EQ(reports, 2) << label;
  }
}

// --ranks: below 1, on a benchmark that runs no ranks, with --exec, or with the ranks given to the
// benchmark after --: one line, exit 2, nothing run.
TEST_F(ScalingE2E, StallRanksErrorsAreOneLineAndRunNothing) {
  const fs::path bench_dir = dir_ / "benches";
  fs::create_directories(bench_dir);
  for (const char* name : {"convnet", "scaling"}) {
    std::ofstream(bench_dir / name) << "#!/bin/sh\ntouch " << (dir_ / "ran").string() << "\nexit 1\n";
    fs::permissions(bench_dir / name, fs::perms::owner_all);
  }
  const std::string base = fmt::format("{} --bench-dir {} --data {} --out {}", MLBENCH_STALL_BIN, bench_dir.string(),
                                       (data_root() / "fake-imagenet-tiny" / "train").string(),
                                       (dir_ / "out").string());
  const std::pair<std::string, std::string> cases[] = {
      {"--bench scaling --ranks 0", "--ranks 0: a job has 1 rank or more"},
      {"--bench convnet --ranks 2", "--ranks 2: benchmark 'convnet' is not distributed"},
      {"--bench scaling -- --ranks 2", "give a job's ranks to mlbench-stall (--ranks K)"},
      {"--exec --ranks 2 -- /bin/true", "--ranks is for --bench"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = mlbench::testing_support::run_command(base + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("mlbench-stall: error: " + message), std::string::npos) << args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(dir_ / "ran")) << "a benchmark ran";
}

TEST_F(ScalingE2E, MinTimeIsRefused) {
  // Every rank must run the same number of iterations: no calibration per rank.
  const auto r = mlbench::testing_support::run_command(std::string(MLBENCH_BENCH_DIR) +
                                                       "/scaling --no-cuda --synthetic --min-time 0.2 --ranks 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--min-time is not supported"), std::string::npos) << r.output;
}

}  // namespace
