// Reliability tests of the batch memory check (docs/reliability.md, fault 11): a --batch-size
// that cannot fit in the memory this process may use is refused before it is
// allocated, in one line with the numbers and a FAIL report, instead of an OOM kill;
// a batch that fits runs as before.
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "cgroup/slice.h"
#include "core/memory_budget.h"
#include "tests/support/bench_run.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using mlbench::testing_support::run_bench;
using mlbench::testing_support::TempDir;

TEST(BatchMemoryFaults, ExtrapolationAndRefusalCarryTheNumbers) {
  using namespace mlbench::core;
  const StepMemory small{4, 100u << 20}, large{16, 160u << 20};  // 5 MiB per sample
  EXPECT_DOUBLE_EQ(bytes_per_sample(small, large), 5.0 * (1 << 20));
  EXPECT_EQ(extrapolated_growth(small, large, 116), (160ull + 500ull) << 20);
  const MemoryLimit limit{1ull << 30, "cgroup memory limit"};
  EXPECT_FALSE(batch_memory_refusal(small, large, 100, 100u << 20, limit).has_value());
  const auto refusal = batch_memory_refusal(small, large, 100000, 100u << 20, limit);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_NE(refusal->find("--batch-size 100000 needs about 488.5 GiB"), std::string::npos) << *refusal;
  EXPECT_NE(refusal->find("5.0 MiB per sample"), std::string::npos) << *refusal;
  EXPECT_NE(refusal->find("1.0 GiB this process may use (cgroup memory limit)"), std::string::npos) << *refusal;
  // A larger batch that grew no more than the smaller one: no slope, the probe's own growth.
  EXPECT_EQ(bytes_per_sample({4, 200}, {16, 100}), 0.0);
  EXPECT_FALSE(batch_memory_refusal({4, 200}, {16, 100}, 1 << 30, 0, limit).has_value());
}

TEST(BatchMemoryFaults, HugeBatchIsRefusedBeforeItIsAllocated) {
  TempDir tmp("batch_memory");
  const fs::path reports = tmp.path() / "reports";
  // Millions of 32x32 images: far beyond any machine, refused by the probes at batch 2 and 8.
  const auto r = run_bench(std::string(MLBENCH_BENCH_DIR) +
                               "/convnet --synthetic --no-cuda --image-size 32 --batch-size 50000000 --repeat 1 "
                               "--number 1 --cpu-cores 1 --report " +
                               reports.string(),
                           reports, tmp.path() / "log.txt");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--batch-size 50000000 needs about"), std::string::npos) << r.output;
  ASSERT_EQ(r.reports.size(), 1u) << r.output;
  EXPECT_EQ(r.reports[0]["completed"], false);
  EXPECT_NE(r.reports[0]["reason"].get<std::string>().find("this process may use"), std::string::npos);
}

// toy_reg's step at batch 2 and 8 grows resident memory by nothing measurable, so the
// extrapolation saw no cost per sample and 2^31 samples went ahead to the OOM killer (no
// message, no report). The probes now grow the batch until the growth shows.
TEST(BatchMemoryFaults, ASmallModelsHugeBatchIsRefusedToo) {
  TempDir tmp("batch_memory_small");
  const fs::path reports = tmp.path() / "reports";
  const auto r = run_bench(std::string(MLBENCH_BENCH_DIR) +
                               "/toy_reg --no-cuda --batch-size 2147483647 --repeat 1 --number 1 --cpu-cores 1 "
                               "--report " +
                               reports.string(),
                           reports, tmp.path() / "log.txt");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--batch-size 2147483647 needs about"), std::string::npos) << r.output;
  ASSERT_EQ(r.reports.size(), 1u) << r.output;
  EXPECT_EQ(r.reports[0]["completed"], false);
}

// With two intra-op threads the benchmark binds them (torch_runtime.h), which starts
// libgomp's thread team; a probe forked after that hung in its first parallel region
// until the 120 s probe timeout, and the batch was then allocated unchecked. The probe
// now forks before the binding: the refusal comes as with one thread.
TEST(BatchMemoryFaults, TheProbeWorksWhenLibTorchRunsTwoThreads) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs 2 CPUs for two bound intra-op threads";
  TempDir tmp("batch_memory");
  const fs::path reports = tmp.path() / "reports";
  const auto r = run_bench(std::string(MLBENCH_BENCH_DIR) +
                               "/convnet --synthetic --no-cuda --image-size 32 --batch-size 50000000 --repeat 1 "
                               "--number 1 --cpu-cores 2 --report " +
                               reports.string(),
                           reports, tmp.path() / "log.txt");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--batch-size 50000000 needs about"), std::string::npos) << r.output;
  ASSERT_EQ(r.reports.size(), 1u) << r.output;
  EXPECT_NE(r.reports[0]["reason"].get<std::string>().find("this process may use"), std::string::npos);
}

TEST(BatchMemoryFaults, BatchThatFitsRuns) {
  TempDir tmp("batch_memory");
  const fs::path reports = tmp.path() / "reports";
  const auto r = run_bench(std::string(MLBENCH_BENCH_DIR) +
                               "/convnet --synthetic --no-cuda --image-size 32 --batch-size 20 --repeat 1 --number 1 "
                               "--warmup 0 --cpu-cores 1 --report " +
                               reports.string(),
                           reports, tmp.path() / "log.txt");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(r.reports.size(), 1u) << r.output;
  EXPECT_EQ(r.reports[0]["completed"], true);
}

// The fault itself: a batch that allocates piecewise until the OOM killer strikes
// (here the slot's cgroup limit) is refused with the numbers instead.
TEST(BatchMemoryFaults, BatchBeyondTheSlotMemoryIsRefusedNotOomKilled) {
  std::string why;
  if (!mlbench::cgroup::Hierarchy::open(&why)) GTEST_SKIP() << "needs cgroups for a memory limit: " << why;
  TempDir tmp("batch_memory");
  const fs::path jobs = tmp.path() / "jobs.json";
  std::ofstream(jobs) << R"([{"name": "big", "cmd": ")" << MLBENCH_BENCH_DIR << R"(/convnet", "cgroup": "student",
    "args": {"--synthetic": "", "--no-cuda": "", "--image-size": 64, "--batch-size": 4000, "--repeat": 1,
             "--number": 1, "--cpu-cores": 1}}])";
  const auto r = mlbench::testing_support::run_command(std::string(MLBENCH_RUN) + " --jobs " + jobs.string() +
                                                       " --slots 1 --slot-memory 768M --outdir " +
                                                       (tmp.path() / "out").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  nlohmann::json report;
  for (const auto& e : fs::directory_iterator(tmp.path() / "out")) {
    if (e.path().filename().string().find(".big.R0.D0.FAIL.") != std::string::npos) {
      report = nlohmann::json::parse(std::ifstream(e.path()));
    }
  }
  ASSERT_TRUE(report.is_object()) << "a FAIL report\n" << r.output;
  EXPECT_NE(report["reason"], "oom");
  const std::string own = report.value("benchmark_reason", std::string());
  EXPECT_NE(own.find("--batch-size 4000 needs about"), std::string::npos) << own;
  EXPECT_NE(own.find("cgroup memory limit"), std::string::npos) << own;
}

}  // namespace
