// Unit tests of the instability flags and their measured causes, and of the
// passes and instances the report names (report/instability.h), on fixed numbers;
// instance fields as read from hand-written report JSON with and without the
// newer `stability` / `interference` fields.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "report/instability.h"
#include "report/report_statistics.h"
#include "report/reports_tree.h"

namespace mlbench::report {
namespace {

// A benchmark with one instance per run; values in items/s, observations of 1 s.
BenchInput bench_of(const std::vector<double>& values) {
  BenchInput b;
  b.name = "x";
  for (std::size_t k = 0; k < values.size(); ++k) {
    Instance i;
    i.items_per_s = values[k];
    i.observation_s = 1.0;
    b.runs.push_back({"R" + std::to_string(k), {i}});
  }
  return b;
}

Stability quiet_stability() {
  Stability s;
  s.observations = 20;
  s.median_s = 1.0;
  s.trend_pct = 0.5;
  return s;
}

Interference quiet_interference() {
  return Interference{1.0, 0.0, 0.29, 0.291, 0.3};
}

// Every instance recorded, nothing found: the base the cause tests change one field of.
BenchInput recorded(const std::vector<double>& values) {
  BenchInput b = bench_of(values);
  for (RunInstances& r : b.runs) {
    r.instances[0].stability = quiet_stability();
    r.instances[0].interference = quiet_interference();
  }
  return b;
}

TEST(ReportInstability, ShortObservationsFromTrainAvgInOldReports) {
  BenchInput b = bench_of({100, 60, 110, 90});
  b.runs[1].instances[0].observation_s = 0.0008;
  b.runs[2].instances[0].observation_s = 0.0009;
  const Instability r = explain_instability(b, 20.0, 5.0);
  EXPECT_EQ(r.cause, "short observations");
  EXPECT_EQ(r.evidence,
            "short observations: one timed observation lasts 0.8 ms in R1/D0 (train.avg), under the 100 ms minimum");
  EXPECT_DOUBLE_EQ(r.sd_pct, 20.0);
  EXPECT_DOUBLE_EQ(r.limit_pct, 5.0);
}

TEST(ReportInstability, ShortObservationsAsTheBenchmarkRecordedThem) {
  BenchInput b = recorded({100, 60, 110, 90});
  b.runs[3].instances[0].stability->short_observations = true;
  b.runs[3].instances[0].stability->median_s = 0.004;
  b.runs[0].instances[0].interference->other_cpu_pct = 50.0;  // short observations come first
  const Instability r = explain_instability(b, 20.0, 5.0);
  EXPECT_EQ(r.cause, "short observations");
  EXPECT_EQ(r.evidence,
            "short observations: one timed observation lasts 4 ms in R3/D0 (stability.median_s), under the "
            "benchmark's minimum");
  // The benchmark's verdict wins over train.avg: a short train.avg alone is not flagged then.
  BenchInput c = recorded({100, 60, 110, 90});
  c.runs[0].instances[0].observation_s = 0.001;
  EXPECT_NE(explain_instability(c, 20.0, 5.0).cause, "short observations");
}

TEST(ReportInstability, OtherLoadNamesTheShareAndThePass) {
  BenchInput b = recorded({38, 35, 78, 40});
  b.runs[2].instances[0].interference->other_cpu_pct = 38.2;
  b.runs[1].instances[0].interference->other_cpu_pct = 12.0;
  Instability r = explain_instability(b, 40.0, 5.0);
  EXPECT_EQ(r.cause, "other load");
  EXPECT_EQ(r.evidence, "other load: 38% of the slot's CPU time went to other processes in R2/D0");
  // At the threshold it is not other load.
  b.runs[2].instances[0].interference->other_cpu_pct = kOtherLoadPct;
  b.runs[1].instances[0].interference->other_cpu_pct = 0.0;
  EXPECT_EQ(explain_instability(b, 40.0, 5.0).cause, "unexplained");
  b.runs[1].instances[0].interference->steal_pct = 7.0;
  r = explain_instability(b, 40.0, 5.0);
  EXPECT_EQ(r.cause, "other load");
  EXPECT_EQ(r.evidence, "other load: 7% of the wall time was stolen from the slot's CPUs in R1/D0");
}

TEST(ReportInstability, MachineDriftWithinAPassAndAcrossPasses) {
  BenchInput b = recorded({100, 80, 100, 100});
  b.runs[1].instances[0].interference->probe_drift_pct = -14.0;
  Instability r = explain_instability(b, 10.0, 5.0);
  EXPECT_EQ(r.cause, "machine drift");
  EXPECT_EQ(r.evidence,
            "machine drift: the fixed CPU probe's time changed by -14% from before the job to after it in R1/D0");
  // A probe that moved between passes, not within a job: 0.277 to 0.325 s (+17%).
  BenchInput c = recorded({100, 80, 100, 100});
  c.runs[0].instances[0].interference->probe_before_s = 0.325;
  c.runs[3].instances[0].interference->probe_before_s = 0.277;
  r = explain_instability(c, 10.0, 5.0);
  EXPECT_EQ(r.cause, "machine drift");
  EXPECT_EQ(r.evidence,
            "machine drift: the fixed CPU probe before the job took 277 ms in R3/D0 and 325 ms in R0/D0 "
            "(+17%)");
}

// Two vCPUs that share a host core in some passes: the one-thread probe does not see
// it, the probe on all slot CPUs at once does.
TEST(ReportInstability, MachineDriftSeenOnlyByTheProbeOnAllCpus) {
  BenchInput b = recorded({100, 80, 100, 100});
  for (RunInstances& run : b.runs) {
    run.instances[0].interference->parallel_probe_before_s = 0.30;
    run.instances[0].interference->parallel_probe_after_s = 0.30;
  }
  EXPECT_EQ(explain_instability(b, 10.0, 5.0).cause, "unexplained");
  b.runs[1].instances[0].interference->parallel_probe_before_s = 0.45;
  b.runs[1].instances[0].interference->parallel_probe_after_s = 0.45;
  Instability r = explain_instability(b, 10.0, 5.0);
  EXPECT_EQ(r.cause, "machine drift");
  EXPECT_EQ(r.evidence,
            "machine drift: the probe on all of the slot's CPUs at once before the job took 300 ms in R0/D0 and "
            "450 ms in R1/D0 (+50%) while the one-thread probe stayed within 10%: the slot's CPUs compete with "
            "each other");
  // Within one pass: before 0.30, after 0.36 (+20%).
  BenchInput c = recorded({100, 80, 100, 100});
  c.runs[2].instances[0].interference->parallel_probe_before_s = 0.30;
  c.runs[2].instances[0].interference->parallel_probe_after_s = 0.36;
  r = explain_instability(c, 10.0, 5.0);
  EXPECT_EQ(r.cause, "machine drift");
  EXPECT_EQ(r.evidence,
            "machine drift: the probe on all of the slot's CPUs at once changed by +20% from before the job to "
            "after it in R2/D0");
}

TEST(ReportInstability, WarmUpThenUnexplainedThenNotRecorded) {
  BenchInput b = recorded({100, 80, 100, 100});
  b.runs[2].instances[0].stability->warmup_trending = true;
  b.runs[2].instances[0].stability->trend_pct = -12.4;
  Instability r = explain_instability(b, 10.0, 5.0);
  EXPECT_EQ(r.cause, "warm-up");
  EXPECT_EQ(r.evidence,
            "warm-up: observations after the warm-up still trend in R2/D0 (second half -12% against the "
            "first)");
  r = explain_instability(recorded({100, 80, 100, 100}), 10.0, 5.0);
  EXPECT_EQ(r.cause, "unexplained");
  EXPECT_EQ(r.evidence,
            "unexplained: observations long enough, other load <= 10%, probe drift <= 10%, no warm-up trend");
  // Old reports, observations long enough: nothing measured to name.
  r = explain_instability(bench_of({100, 80, 100, 100}), 10.0, 5.0);
  EXPECT_EQ(r.cause, "not recorded");
  EXPECT_EQ(r.evidence,
            "cause not recorded (reports written before the `stability` field; observations are long enough)");
  // Stability recorded but not run under mlbench-run: no interference.
  BenchInput c = recorded({100, 80, 100, 100});
  for (RunInstances& run : c.runs) run.instances[0].interference.reset();
  EXPECT_EQ(explain_instability(c, 10.0, 5.0).cause, "not recorded");
}

// With every outside cause absent, where the spread lives: 16 observations per pass move
// a pass mean by about sd / 4; passes 10% apart are "between passes", passes 3% apart
// "within-run noise"; the boundary is kBetweenPassFactor x 2% = 4%.
TEST(ReportInstability, MachineDriftFromTheSameWorksCpuTimePerItem) {
  // Every probe still; the passes' CPU time per item moves with their speed.
  BenchInput b = recorded({100, 90, 100});
  const double cpu[] = {400.0, 440.0, 402.0};
  for (std::size_t k = 0; k < b.runs.size(); ++k) b.runs[k].instances[0].cpu_per_item_us = cpu[k];
  Instability r = explain_instability(b, 5.7, 5.0);
  EXPECT_EQ(r.cause, "machine drift");
  EXPECT_EQ(r.evidence,
            "machine drift: the same work took 440 us of CPU time per item in R1/D0 and 400 us in R0/D0 (+10%), "
            "and ran 10% slower there: the machine's speed changed, not the work");
  // More CPU per item in the faster pass: not the machine (more work, e.g. spinning threads).
  b.runs[1].instances[0].items_per_s = 110;
  EXPECT_NE(explain_instability(b, 5.7, 5.0).cause, "machine drift");
  // Within 5% of each other: no evidence either way.
  b.runs[1].instances[0].items_per_s = 90;
  b.runs[1].instances[0].cpu_per_item_us = 419.0;
  EXPECT_NE(explain_instability(b, 5.7, 5.0).cause, "machine drift");
  // Reports older than process_cpu: nothing to compare.
  BenchInput old = recorded({100, 90, 100});
  EXPECT_NE(explain_instability(old, 5.7, 5.0).cause, "machine drift");
}

TEST(ReportInstability, BetweenPassesOrWithinRunNoiseFromTheObservationsSpread) {
  BenchInput b = recorded({100, 80, 100, 100});
  for (RunInstances& run : b.runs) {
    run.instances[0].stability->observations = 16;
    run.instances[0].stability->sd_pct = 4.0;
  }
  // One pass spreads 14.4% (sd^2 = 208): the root mean square of sd / sqrt(n) over the
  // four passes is sqrt((3 x 16 + 208) / 16 / 4) = 2.0%.
  b.runs[2].instances[0].stability->sd_pct = std::sqrt(208.0);
  Instability r = explain_instability(b, 10.0, 5.0);
  EXPECT_EQ(r.cause, "between passes");
  EXPECT_EQ(r.evidence,
            "between passes: each pass was steady (observations spread at most 14.4% sd, in R2/D0: a pass mean to "
            "about 2.0%), but the passes differ by 10.0% sd: something set when a pass starts (thread placement, "
            "memory layout, clock speed); more passes narrow it, longer ones do not");
  r = explain_instability(b, 3.0, 2.0);
  EXPECT_EQ(r.cause, "within-run noise");
  EXPECT_EQ(r.evidence,
            "within-run noise: observations spread up to 14.4% sd within a pass (in R2/D0), which moves a pass mean "
            "by about 2.0%, as much as the passes differ (3.0%); more or longer observations per pass (--repeat, "
            "--min-time) narrow it");
  // The boundary is 2 x 2.0 = 4%: just below it within-run noise, just above between passes.
  EXPECT_EQ(explain_instability(b, 3.95, 2.0).cause, "within-run noise");
  EXPECT_EQ(explain_instability(b, 4.05, 2.0).cause, "between passes");
  // An instance with fewer than 2 observations, or without sd_pct, says nothing about it.
  BenchInput c = recorded({100, 80, 100, 100});
  c.runs[0].instances[0].stability->observations = 1;
  c.runs[0].instances[0].stability->sd_pct = 50.0;
  EXPECT_EQ(explain_instability(c, 10.0, 5.0).cause, "unexplained");
}

TEST(ReportInstability, FailedInstancesAreNotEvidence) {
  BenchInput b = recorded({100, 80, 100, 100});
  b.runs[1].instances[0].failed = true;
  b.runs[1].instances[0].interference->other_cpu_pct = 90.0;
  b.runs[1].instances[0].observation_s = 0.0001;
  EXPECT_EQ(explain_instability(b, 10.0, 5.0).cause, "unexplained");
}

TEST(ReportInstability, SummarizeFlagsOnlyBenchesAboveTheRule) {
  // Run values 100, 60, 110, 90: result 95, sd 21.6 -> sd% 22.8 > 5: flagged (old reports, 1 s
  // observations: cause not recorded).
  BenchResult r = summarize_bench(bench_of({100, 60, 110, 90}), std::nullopt, 4);
  ASSERT_TRUE(r.instability.has_value());
  EXPECT_NEAR(r.instability->sd_pct, r.sd_frac * 100.0, 1e-12);
  EXPECT_DOUBLE_EQ(r.instability->limit_pct, 5.0);
  EXPECT_EQ(r.instability->cause, "not recorded");
  // 100, 101, 102, 103: sd% 1.27: not flagged.
  EXPECT_FALSE(summarize_bench(bench_of({100, 101, 102, 103}), std::nullopt, 4).instability.has_value());
  // A target's sd_target is the rule when given.
  Target t;
  t.items_per_s = 100;
  t.sd_target = 1.0;
  const BenchResult strict = summarize_bench(bench_of({100, 101, 102, 103}), t, 4);
  ASSERT_TRUE(strict.instability.has_value());
  EXPECT_DOUBLE_EQ(strict.instability->limit_pct, 1.0);
  // One run: no sd, nothing to flag.
  EXPECT_FALSE(summarize_bench(bench_of({100}), std::nullopt, 1).instability.has_value());
}

TEST(ReportOutliers, DroppedPassesAreTheLowestAndHighest) {
  const BenchResult r = summarize_bench(bench_of({38, 35, 78, 40}), std::nullopt, 4);
  ASSERT_EQ(r.dropped.size(), 2u);
  EXPECT_EQ(r.dropped[0].where, "R1");
  EXPECT_DOUBLE_EQ(r.dropped[0].items_per_s, 35.0);
  EXPECT_EQ(r.dropped[0].why, "lowest pass, dropped by the trimmed mean");
  EXPECT_EQ(r.dropped[1].where, "R2");
  EXPECT_EQ(r.dropped[1].why, "highest pass, dropped by the trimmed mean");
  EXPECT_TRUE(summarize_bench(bench_of({38, 35}), std::nullopt, 2).dropped.empty());  // plain mean
  const std::vector<NamedValue> same = dropped_passes({{"R0", 5, 1, 0}, {"R1", 5, 1, 0}, {"R2", 5, 1, 0}});
  ASSERT_EQ(same.size(), 2u);
  EXPECT_NE(same[0].where, same[1].where);
}

TEST(ReportOutliers, TukeyFencesNameValuesOutside) {
  // 100 101 102 103 150: Q1 = 101, Q3 = 103, IQR 2 -> fences 98 and 106: 150 is out.
  const std::vector<NamedValue> out =
      tukey_outliers({{"R0", 100, ""}, {"R1", 101, ""}, {"R2", 102, ""}, {"R3", 103, ""}, {"R4", 150, ""}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].where, "R4");
  EXPECT_EQ(out[0].why, "above Q3 + 1.5 IQR (106)");
  EXPECT_TRUE(tukey_outliers({{"R0", 1, ""}, {"R1", 100, ""}, {"R2", 101, ""}}).empty());  // too few values
  // One pass far above three (38, 35, 78, 40): Q1 = 37.25, Q3 = 49.5 -> 78 > 67.875.
  const BenchResult reso = summarize_bench(bench_of({38, 35, 78, 40}), std::nullopt, 4);
  ASSERT_EQ(reso.outliers.size(), 1u);
  EXPECT_EQ(reso.outliers[0].where, "R2/D0");
}

TEST(ReportOutliers, InstancesAndPassesWithSeveralSlots) {
  BenchInput b;
  b.name = "x";
  const double values[5][2] = {{100, 101}, {102, 99}, {100, 160}, {101, 100}, {99, 102}};
  for (int k = 0; k < 5; ++k) {
    RunInstances run{"R" + std::to_string(k), {}};
    for (int slot = 0; slot < 2; ++slot) {
      Instance i;
      i.slot = slot;
      i.items_per_s = values[k][slot];
      run.instances.push_back(i);
    }
    b.runs.push_back(run);
  }
  const BenchResult r = summarize_bench(b, std::nullopt, 4);
  ASSERT_EQ(r.outliers.size(), 2u);
  EXPECT_EQ(r.outliers[0].where, "R2/D1");  // the instance
  EXPECT_EQ(r.outliers[1].where, "R2");     // and its pass (run value 130)
}

TEST(ReportInstability, ParsesStabilityAndInterferenceAndReadsOldReportsAsNotRecorded) {
  nlohmann::json old = {{"name", "x"},
                        {"suite", "fast"},
                        {"completed", true},
                        {"train", {{"avg", 0.0008}}},
                        {"train_item", {{"avg", 1000.0}}}};
  Instance i = parse_instance(old, "fast.x.R0.D0.t.json");
  EXPECT_DOUBLE_EQ(i.observation_s, 0.0008);
  EXPECT_FALSE(i.stability.has_value());
  EXPECT_FALSE(i.interference.has_value());
  nlohmann::json now = old;
  now["stability"] = {{"observations", 20},
                      {"sd_pct", 3.5},
                      {"min_s", 0.1},
                      {"max_s", 0.2},
                      {"median_s", 0.15},
                      {"trend_pct", 8.0},
                      {"warmup_trending", true},
                      {"short_observations", false}};
  now["interference"] = {{"slot_cpus", {0, 1}},  {"wall_s", 10.0},        {"own_cpu_s", 19.0},
                         {"other_cpu_s", 1.0},   {"other_cpu_pct", 5.0},  {"steal_pct", 0.5},
                         {"loadavg_start", 0.1}, {"loadavg_end", 1.2},    {"probe_before_s", 0.29},
                         {"probe_after_s", 0.3}, {"probe_drift_pct", 3.4}};
  i = parse_instance(now, "fast.x.R0.D0.t.json");
  ASSERT_TRUE(i.stability.has_value());
  EXPECT_EQ(i.stability->observations, 20);
  EXPECT_DOUBLE_EQ(i.stability->median_s, 0.15);
  EXPECT_DOUBLE_EQ(i.stability->trend_pct, 8.0);
  EXPECT_TRUE(i.stability->warmup_trending);
  EXPECT_FALSE(i.stability->short_observations);
  ASSERT_TRUE(i.interference.has_value());
  EXPECT_DOUBLE_EQ(i.interference->other_cpu_pct, 5.0);
  EXPECT_DOUBLE_EQ(i.interference->steal_pct, 0.5);
  EXPECT_DOUBLE_EQ(i.interference->probe_before_s, 0.29);
  EXPECT_DOUBLE_EQ(i.interference->probe_drift_pct, 3.4);
  now["interference"] = nullptr;  // written by hand, not under the runner
  EXPECT_FALSE(parse_instance(now, "fast.x.R0.D0.t.json").interference.has_value());
}

}  // namespace
}  // namespace mlbench::report
