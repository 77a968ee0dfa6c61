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
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using mlbench::testing_support::run_command;

// Runs stallsim on synthetic data with these arguments; returns its report.
nlohmann::json run_stallsim(const std::string& args) {
  mlbench::testing_support::TempDir dir("stallsim_stability");
  const std::string cmd = fmt::format("{}/stallsim --synthetic --prep-ms 0 --workers 0 --seed 7 --report {} {}",
                                      MLBENCH_BENCH_DIR, dir.path().string(), args);
  const auto r = run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  for (const auto& e : fs::directory_iterator(dir.path())) {
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

}  // namespace
