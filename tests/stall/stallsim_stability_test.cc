// The report's stability block end to end on stallsim, whose compute cost is known:
// fixed delays give observations that hold still (not flagged), random delays
// (--compute-jitter-ms) give a run that is flagged unstable within itself
// (stability.sd_pct above Mila's 5%), whatever the machine's speed: the delays are
// sleeps, and the random ones are drawn from a fixed seed.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/stability.h"
#include "stall/page_cache.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using mlbench::testing_support::run_command;

// Runs stallsim on synthetic data with these arguments (or on `data`, when
// given, with the loader's prep); returns its report.
nlohmann::json run_stallsim(const std::string& args, const fs::path& data = {}) {
  mlbench::testing_support::TempDir dir("stallsim_stability");
  const std::string source =
      data.empty() ? std::string("--synthetic --prep-ms 0 --workers 0") : "--data " + data.string();
  const std::string cmd = fmt::format("{}/stallsim {} --seed 7 --report {} {}", MLBENCH_BENCH_DIR, source,
                                      (dir.path() / "report").string(), args);
  const auto r = run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  for (const auto& e : fs::directory_iterator(dir.path() / "report")) {
    std::ifstream in(e.path());
    return nlohmann::json::parse(in);
  }
  ADD_FAILURE() << "no report from " << cmd << "\n" << r.output;
  return {};
}

TEST(StallsimStability, FixedDelaysAreNotFlagged) {
  // 5 batches of 50 ms: 250 ms observations, 4 kept after 4 warm-up.
  const nlohmann::json r = run_stallsim("--compute-ms 50 --number 5 --repeat 8");
  ASSERT_TRUE(r.contains("stability")) << r.dump();
  const nlohmann::json& s = r["stability"];
  EXPECT_EQ(s["observations"], 4);
  EXPECT_LE(s["sd_pct"].get<double>(), mlbench::core::kUnstableSdPct) << s.dump();
  EXPECT_EQ(s["warmup_trending"], false) << s.dump();
  EXPECT_EQ(s["short_observations"], false) << s.dump();
}

TEST(StallsimStability, RandomDelaysAreFlaggedUnstableWithinTheRun) {
  // 5 batches of 5 ms plus uniform [0, 90) ms: ~250 ms observations whose sum of 5
  // uniforms spreads ~23% (sd 26 ms / 230 ms mean), from seed 7.
  const nlohmann::json r = run_stallsim("--compute-ms 5 --compute-jitter-ms 90 --number 5 --repeat 8");
  ASSERT_TRUE(r.contains("stability")) << r.dump();
  const nlohmann::json& s = r["stability"];
  EXPECT_EQ(s["observations"], 4);
  EXPECT_GT(s["sd_pct"].get<double>(), mlbench::core::kUnstableSdPct) << s.dump();
  EXPECT_EQ(r["metrics"]["injected"]["compute_jitter_ms"], 90.0);
}

TEST(StallsimAccelerator, LateWakeUpsDoNotSlowTheEmulatedAcceleratorWhileBatchesAreQueued) {
  // Synthetic batches are always queued; a consumer that wakes 4 ms late from
  // each 10 ms batch ran at 8 / 14 ms = 571/s before the accelerator kept its
  // own clock; it must run at 8 / 10 ms = 800/s, as a GPU's queue does while
  // its host thread is late. 90% leaves room for a loaded machine's own
  // lateness (absorbed too, up to one batch's length).
  const nlohmann::json r = run_stallsim("--compute-ms 10 --late-wakeup-ms 4 --number 5 --repeat 8");
  ASSERT_TRUE(r.contains("train_item")) << r.dump();
  EXPECT_EQ(r["metrics"]["injected"]["late_wakeup_ms"], 4.0);
  EXPECT_GT(r["train_item"]["avg"].get<double>(), 0.9 * 800) << r["train_item"].dump();
}

// 2 classes of 20 files of 16,384 bytes.
void make_files(const fs::path& root) {
  for (int c = 0; c < 2; ++c) {
    fs::create_directories(root / fmt::format("c{}", c));
    for (int i = 0; i < 20; ++i) {
      std::ofstream(root / fmt::format("c{}", c) / fmt::format("f{:02}.bin", i), std::ios::binary)
          << std::string(16384, 'x');
    }
  }
}

// Two serial workers on two virtual CPUs: no sample is queued behind another
// to hide a worker's late wake-up, so before the loader threads kept their
// own clock each sample took its cost plus the lateness (the ground-truth grid
// measured prep 6% slow on a loaded CI machine). 90% leaves room for the
// machine's own lateness beyond the injected one.
TEST(StallsimCpus, LateWakeUpsOfLoaderThreadsDoNotSlowTheVirtualCpus) {
  mlbench::testing_support::TempDir data("stallsim_cpus");
  make_files(data.path());
  // 2 CPUs / 10 ms = 200 samples/s (cached files: no device); compute 4 x 1 ms
  // per batch of 4 is 4000/s. Waking 4 ms late ran 2 / 14 ms = 143/s.
  const nlohmann::json r = run_stallsim(
      "--workers 2 --cpu-cores 2 --io-depth 0 --prep-ms 10 --compute-ms 1 --batch-size 4 --worker-late-wakeup-ms 4 "
      "--number 5 --repeat 8",
      data.path());
  ASSERT_TRUE(r.contains("train_item")) << r.dump();
  EXPECT_EQ(r["metrics"]["injected"]["worker_late_wakeup_ms"], 4.0);
  EXPECT_GT(r["train_item"]["avg"].get<double>(), 0.9 * 200) << r["train_item"].dump();
}

TEST(StallsimStorage, LateWakeUpsOfSerialWorkersDoNotSlowTheEmulatedDeviceAndCpus) {
  mlbench::testing_support::TempDir data("stallsim_storage");
  make_files(data.path());
  const auto files = mlbench::stall::dataset_files(data.path());
  mlbench::stall::evict(files);
  if (mlbench::stall::residency(files).fraction() > 0.05) {
    GTEST_SKIP() << "the temp directory ignores POSIX_FADV_DONTNEED (tmpfs?): no device reads possible";
  }
  // A device of 1.6384 MB/s reads a file in 10 ms; prep 10 ms on one of 2 CPUs.
  // Each serial worker reads, then preps: 2 workers / 20 ms = 100 samples/s
  // (their reads take turns and never queue). Waking 4 ms late after each
  // read and each prep ran 2 / 28 ms = 71/s.
  const nlohmann::json r = run_stallsim(
      "--workers 2 --cpu-cores 2 --io-depth 0 --prep-ms 10 --compute-ms 1 --batch-size 4 --storage-mbps 1.6384 "
      "--drop-after-read --worker-late-wakeup-ms 4 --number 5 --repeat 8",
      data.path());
  ASSERT_TRUE(r.contains("train_item")) << r.dump();
  EXPECT_EQ(r["pipeline"]["emulated_storage"]["cached_reads"], 0) << r["pipeline"].dump();
  EXPECT_GT(r["train_item"]["avg"].get<double>(), 0.9 * 100) << r["train_item"].dump();
}

}  // namespace
