// The runner's interference block on fixed /proc snapshots and fixed probe times:
// parsing, the arithmetic of other load and steal, and the sampler's seams.
#include "runner/interference.h"

#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace mlbench::runner {
namespace {

// The block as the report has it (null when none).
nlohmann::json block(const std::optional<core::InterferenceInfo>& i) {
  if (!i) return nullptr;
  core::InstanceReport r;
  r.interference = i;
  return core::to_json(r)["interference"];
}

// cpuN user nice system idle iowait irq softirq steal guest guest_nice
constexpr const char* kStatBefore =
    "cpu  300 0 150 900 10 0 5 20 0 0\n"
    "cpu0 100 0 50 300 5 0 0 0 0 0\n"
    "cpu1 100 0 50 300 5 0 5 10 0 0\n"
    "cpu2 100 0 50 300 0 0 0 10 0 0\n"
    "intr 1 2 3\n"
    "ctxt 42\n";
constexpr const char* kStatAfter =
    "cpu  9999 0 0 0 0 0 0 0 0 0\n"
    "cpu0 180 0 70 400 5 0 0 0 0 0\n"     // +100 busy
    "cpu1 250 10 60 340 5 0 15 30 7 0\n"  // +180 busy (user +150, nice +10, system +10, softirq +10; guest is inside
                                          // user), +20 steal
    "cpu2 900 0 50 300 0 0 0 10 0 0\n"    // not in the slot
    "intr 1 2 3\n";

TEST(Interference, ParsesPerCpuLinesAndSkipsTheTotal) {
  const auto cpus = parse_proc_stat(kStatBefore);
  ASSERT_EQ(cpus.size(), 3u);
  EXPECT_EQ(cpus.at(0).busy, 150u);
  EXPECT_EQ(cpus.at(0).idle, 305u);
  EXPECT_EQ(cpus.at(1).busy, 155u);  // user + nice + system + irq + softirq
  EXPECT_EQ(cpus.at(1).steal, 10u);
}

TEST(Interference, OlderKernelsWithoutGuestColumnsParse) {
  const auto cpus = parse_proc_stat("cpu0 1 2 3 4 5 6 7 8\n");
  EXPECT_EQ(cpus.at(0).busy, 1u + 2 + 3 + 6 + 7);
  EXPECT_EQ(cpus.at(0).steal, 8u);
}

TEST(Interference, MalformedLineNamesIt) {
  try {
    parse_proc_stat("cpu0 1 2 x\n");
    FAIL() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu0 1 2 x"), std::string::npos) << e.what();
  }
}

TEST(Interference, LoadAverageIsTheFirstField) {
  EXPECT_DOUBLE_EQ(*parse_loadavg("4.33 2.62 1.84 5/117 8797\n"), 4.33);
  EXPECT_FALSE(parse_loadavg("none").has_value());
}

InterferenceSample sample() {
  InterferenceSample s;
  s.slot_cpus = {0, 1};
  s.before.cpus = parse_proc_stat(kStatBefore);
  s.after.cpus = parse_proc_stat(kStatAfter);
  s.before.loadavg = 1.5;
  s.after.loadavg = 2.25;
  s.wall_s = 2.0;
  s.own_cpu_s = 2.0;
  s.probe_before = {0.050, 0.051};
  s.probe_after = {0.055, 0.080};
  s.ticks_per_second = 100;
  return s;
}

TEST(Interference, OtherCpuIsTheSlotsBusyTimeLessTheInstancesOwn) {
  const nlohmann::json j = block(interference_of(sample()));
  // Busy on CPUs 0 and 1: (100 + 180) ticks = 2.8 s; the instance used 2.0 s.
  EXPECT_NEAR(j["other_cpu_s"].get<double>(), 0.8, 1e-9);
  // Over 2 CPUs x 2 s.
  EXPECT_NEAR(j["other_cpu_pct"].get<double>(), 20.0, 1e-9);
  EXPECT_NEAR(j["steal_pct"].get<double>(), 100.0 * 0.2 / 4.0, 1e-9);
  EXPECT_EQ(j["slot_cpus"], nlohmann::json({0, 1}));
  EXPECT_EQ(j["wall_s"], 2.0);
  EXPECT_EQ(j["own_cpu_s"], 2.0);
  EXPECT_EQ(j["loadavg_start"], 1.5);
  EXPECT_EQ(j["loadavg_end"], 2.25);
  EXPECT_EQ(j["probe_before_s"], 0.050);
  EXPECT_EQ(j["probe_after_s"], 0.055);
  EXPECT_NEAR(j["probe_drift_pct"].get<double>(), 10.0, 1e-9);
  EXPECT_EQ(j["probe_after_wall_s"], 0.080);
}

TEST(Interference, OwnTimeAboveTheSampledTicksGivesZeroNotNegative) {
  InterferenceSample s = sample();
  s.own_cpu_s = 3.0;
  const nlohmann::json j = block(interference_of(s));
  EXPECT_EQ(j["other_cpu_s"], 0.0);
  EXPECT_EQ(j["other_cpu_pct"], 0.0);
}

TEST(Interference, UnknownOwnTimeOrMissingCpuGivesNull) {
  InterferenceSample s = sample();
  s.own_cpu_s.reset();
  nlohmann::json j = block(interference_of(s));
  EXPECT_TRUE(j["other_cpu_s"].is_null());
  EXPECT_TRUE(j["own_cpu_s"].is_null());
  EXPECT_FALSE(j["steal_pct"].is_null());
  s = sample();
  s.slot_cpus = {0, 7};
  j = block(interference_of(s));
  EXPECT_TRUE(j["other_cpu_pct"].is_null());
  EXPECT_TRUE(j["steal_pct"].is_null());
}

void write(const std::filesystem::path& file, const std::string& text) {
  std::ofstream(file) << text;
}

TEST(Interference, SamplerReadsTheProcRootItIsGivenAndProbesTwice) {
  testing_support::TempDir proc("fake_proc");
  write(proc.path() / "stat", kStatBefore);
  write(proc.path() / "loadavg", "0.50 0.40 0.30 1/100 5\n");
  std::vector<std::vector<int>> probed;
  int calls = 0;
  InterferenceSampler sampler(proc.path(), [&](const std::vector<int>& cpus) {
    probed.push_back(cpus);
    return ProbeTime{++calls == 1 ? 0.04 : 0.05, 0.06};
  });
  const auto running = sampler.begin({0, 1});
  write(proc.path() / "stat", kStatAfter);
  write(proc.path() / "loadavg", "1.75 0.40 0.30 1/100 5\n");
  const nlohmann::json j = block(sampler.end(running, 1.0));
  ASSERT_TRUE(j.is_object()) << j;
  EXPECT_EQ(probed, (std::vector<std::vector<int>>{{0, 1}, {0, 1}}));
  // The default parallel probe ran too (a 2-CPU slot): real times, not asserted further.
  EXPECT_GT(j["parallel_probe_before_s"].get<double>(), 0.0) << j;
  EXPECT_GT(j["parallel_probe_after_s"].get<double>(), 0.0) << j;
  EXPECT_NEAR(j["other_cpu_s"].get<double>(), 1.8, 1e-9);
  EXPECT_EQ(j["loadavg_start"], 0.5);
  EXPECT_EQ(j["loadavg_end"], 1.75);
  EXPECT_NEAR(j["probe_drift_pct"].get<double>(), 25.0, 1e-9);
  EXPECT_GE(j["wall_s"].get<double>(), 0.0);
}

TEST(Interference, ParallelProbeRunsOnSlotsOfTwoOrMoreCpusOnly) {
  testing_support::TempDir proc("fake_proc_parallel");
  write(proc.path() / "stat", kStatBefore);
  write(proc.path() / "loadavg", "0.50 0.40 0.30 1/100 5\n");
  std::vector<std::vector<int>> parallel;
  InterferenceSampler sampler(
      proc.path(),
      [](const std::vector<int>&) {
        return ProbeTime{0.05, 0.05};
      },
      [&](const std::vector<int>& cpus) {
        parallel.push_back(cpus);
        return ProbeTime{parallel.size() == 1 ? 0.05 : 0.08, 0.09};
      });
  auto running = sampler.begin({0, 1});
  write(proc.path() / "stat", kStatAfter);
  nlohmann::json j = block(sampler.end(running, 1.0));
  EXPECT_EQ(parallel, (std::vector<std::vector<int>>{{0, 1}, {0, 1}}));
  EXPECT_EQ(j["parallel_probe_before_s"], 0.05);
  EXPECT_EQ(j["parallel_probe_after_s"], 0.08);
  // One CPU: nothing to run side by side; the fields are null.
  parallel.clear();
  write(proc.path() / "stat", kStatBefore);
  running = sampler.begin({1});
  write(proc.path() / "stat", kStatAfter);
  j = block(sampler.end(running, 1.0));
  EXPECT_TRUE(parallel.empty());
  EXPECT_TRUE(j["parallel_probe_before_s"].is_null()) << j;
  EXPECT_TRUE(j["parallel_probe_after_s"].is_null()) << j;
}

TEST(Interference, UnreadableProcGivesNullAndAWarning) {
  testing_support::TempDir proc("no_proc");
  InterferenceSampler sampler(proc.path(), [](const std::vector<int>&) { return ProbeTime{0.05, 0.05}; });
  const auto running = sampler.begin({0});
  testing::internal::CaptureStderr();
  const nlohmann::json j = block(sampler.end(running, 1.0));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(j.is_null());
  EXPECT_NE(err.find("warning: no interference figures (cannot read"), std::string::npos) << err;
}

TEST(Interference, RealProbeRunsOnTheGivenCpu) {
  // Not a speed assertion: only that the fixed work took some CPU and wall time.
  const ProbeTime t = run_cpu_probe({0});
  EXPECT_GT(t.cpu_s, 0.0);
  EXPECT_GE(t.wall_s, 0.0);
}

TEST(Interference, RealParallelProbeRunsOneThreadPerCpu) {
  // Not a speed assertion: every thread did the fixed work (the slowest's CPU time is
  // positive) and the wall time covers it. CPU 0 twice: two threads on one CPU also work.
  const ProbeTime t = run_parallel_probe({0, 0});
  EXPECT_GT(t.cpu_s, 0.0);
  EXPECT_GE(t.wall_s, t.cpu_s * 0.5);
}

}  // namespace
}  // namespace mlbench::runner
