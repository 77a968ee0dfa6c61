// The results store's views on hand-made records (report/store_views.h): the regression
// rule (Mann-Whitney with enough passes, by size with fewer, nothing inside the spread), the
// component a change moved into, failures per run, and the machines side by side.
#include <gtest/gtest.h>

#include "report/store_views.h"

namespace mlbench::report {
namespace {

struct Timing {
  double wait_s = 0.001, h2d_s = 0.0, compute_s = 0.009;
  double fetch_ms = 0.1, prep_ms = 0.1;
};

store::HistoryInstance instance(const std::string& bench, const std::string& run_id, const std::string& started,
                                const std::string& machine, int pass, double items_per_s, const Timing& t = {}) {
  store::HistoryInstance h;
  h.run.run_id = run_id;
  h.run.started_at = started;
  h.run.machine = machine;
  h.instance.run_id = run_id;
  h.instance.bench = bench;
  h.instance.pass = pass;
  h.instance.items_per_s = items_per_s;
  h.instance.stall_pct = 100.0 * (t.wait_s + t.h2d_s) / (t.wait_s + t.h2d_s + t.compute_s);
  h.instance.wait_s = t.wait_s;
  h.instance.h2d_s = t.h2d_s;
  h.instance.compute_s = t.compute_s;
  h.instance.fetch_ms_per_item = t.fetch_ms;
  h.instance.prep_ms_per_item = t.prep_ms;
  return h;
}

// One run: one instance per pass value.
void add_run(std::vector<store::HistoryInstance>& out, const std::string& run_id, const std::string& started,
             const std::vector<double>& passes, const Timing& t = {}, const std::string& machine = "m1",
             const std::string& bench = "loader") {
  for (std::size_t p = 0; p < passes.size(); ++p) {
    out.push_back(instance(bench, run_id, started, machine, static_cast<int>(p), passes[p], t));
  }
}

std::vector<store::MachineRecord> two_machines() {
  store::MachineRecord a, b;
  a.fingerprint = "m1";
  a.kind = "CPU: AMD EPYC x2";
  a.hostname = "alpha";
  b.fingerprint = "m2";
  b.kind = "NVIDIA H200";
  b.hostname = "beta";
  return {a, b};
}

TEST(StoreHistory, RegressionByMannWhitneyWithFourPassesASide) {
  std::vector<store::HistoryInstance> in;
  add_run(in, "run-a", "2026-01-01T00:00:00Z", {100, 101, 99, 100.5});
  add_run(in, "run-b", "2026-01-02T00:00:00Z", {77, 76, 78, 76.5});
  const History h = build_history(in, two_machines(), {});
  ASSERT_EQ(h.series.size(), 1u);
  const HistorySeries& s = h.series[0];
  EXPECT_EQ(s.bench, "loader");
  EXPECT_EQ(s.machine_label, "CPU: AMD EPYC x2 / alpha");
  ASSERT_EQ(s.runs.size(), 2u);
  EXPECT_FALSE(s.runs[0].change);
  ASSERT_TRUE(s.runs[1].change);
  const HistoryChange& c = *s.runs[1].change;
  EXPECT_EQ(c.verdict, "regression");
  EXPECT_EQ(c.method, "mann-whitney");
  EXPECT_NEAR(c.p_value, 2.0 / 70.0, 1e-12);  // every B below every A: the smallest p of 4 v 4
  EXPECT_NEAR(c.change_pct, (76.875 / 100.125 - 1.0) * 100.0, 1e-9);
  EXPECT_EQ(c.text.rfind("regression -23.2% (p 0.0286)", 0), 0u) << c.text;
}

TEST(StoreHistory, FourPassesASideThatOverlapAreNoSignificantChange) {
  std::vector<store::HistoryInstance> in;
  add_run(in, "run-a", "2026-01-01T00:00:00Z", {100, 90, 110, 95});
  add_run(in, "run-b", "2026-01-02T00:00:00Z", {92, 105, 98, 99});
  const History h_c = build_history(in, {}, {});
  const HistoryChange& c = *h_c.series[0].runs[1].change;
  EXPECT_EQ(c.verdict, "no change");
  EXPECT_EQ(c.method, "mann-whitney");
  EXPECT_EQ(c.text.rfind("no significant change (", 0), 0u) << c.text;
  EXPECT_TRUE(c.component.empty());
}

TEST(StoreHistory, RegressionBySizeWithTwoPassesASideSaysTheTestNeedsFour) {
  std::vector<store::HistoryInstance> in;
  add_run(in, "run-a", "2026-01-01T00:00:00Z", {100, 102});
  add_run(in, "run-b", "2026-01-02T00:00:00Z", {80, 79});
  const History h_c = build_history(in, {}, {});
  const HistoryChange& c = *h_c.series[0].runs[1].change;
  EXPECT_EQ(c.verdict, "regression");
  EXPECT_EQ(c.method, "by size");
  EXPECT_TRUE(std::isnan(c.p_value));
  EXPECT_EQ(c.text.rfind("regression -21.3% (by size; 2 v 2 passes, the test needs 4 a side)", 0), 0u) << c.text;
}

TEST(StoreHistory, AnImprovementBySizeIsFlaggedToo) {
  std::vector<store::HistoryInstance> in;
  add_run(in, "run-a", "2026-01-01T00:00:00Z", {100, 102});
  add_run(in, "run-b", "2026-01-02T00:00:00Z", {120, 121});
  const History h_c = build_history(in, {}, {});
  const HistoryChange& c = *h_c.series[0].runs[1].change;
  EXPECT_EQ(c.verdict, "improvement");
  EXPECT_EQ(c.text.rfind("improvement +19.3% (by size;", 0), 0u) << c.text;
}

TEST(StoreHistory, NoFlagForAChangeInsideTheSpreadOrBelowTheThreshold) {
  // -6% on the mean, but inside the earlier passes' range (90..115): not flagged.
  std::vector<store::HistoryInstance> in;
  add_run(in, "run-a", "2026-01-01T00:00:00Z", {90, 115});
  add_run(in, "run-b", "2026-01-02T00:00:00Z", {96.3, 96.3});
  const History h_inside = build_history(in, {}, {});
  const HistoryChange& inside = *h_inside.series[0].runs[1].change;
  EXPECT_EQ(inside.verdict, "no change");
  EXPECT_EQ(inside.text.rfind("no change beyond the spread (-6.0%; by size; 2 v 2 passes", 0), 0u) << inside.text;
  // -4% and outside a tight range: below the 5% threshold, not flagged either.
  std::vector<store::HistoryInstance> small;
  add_run(small, "run-a", "2026-01-01T00:00:00Z", {100, 100.5});
  add_run(small, "run-b", "2026-01-02T00:00:00Z", {96, 96.2});
  EXPECT_EQ(build_history(small, {}, {}).series[0].runs[1].change->verdict, "no change");
}

TEST(StoreHistory, TheComponentThatGrewIsNamed) {
  // Run A: 1000 items/s = 1 ms/item: compute 0.9, wait 0.1 split 50/50 into fetch and prep.
  // Run B: 800 items/s = 1.25 ms/item: compute still 0.9, wait 0.35 of which prep 6/7.
  std::vector<store::HistoryInstance> in;
  add_run(in, "run-a", "2026-01-01T00:00:00Z", {1000, 1000}, Timing{0.001, 0.0, 0.009, 0.1, 0.1});
  add_run(in, "run-b", "2026-01-02T00:00:00Z", {800, 800}, Timing{0.0035, 0.0, 0.009, 0.1, 0.6});
  const History h = build_history(in, {}, {});
  const HistoryRun& a = h.series[0].runs[0];
  EXPECT_NEAR(a.time.compute_ms, 0.9, 1e-9);
  EXPECT_NEAR(a.time.fetch_ms, 0.05, 1e-9);
  EXPECT_NEAR(a.time.prep_ms, 0.05, 1e-9);
  EXPECT_EQ(a.time.source, "reports");
  const HistoryChange& c = *h.series[0].runs[1].change;
  EXPECT_EQ(c.verdict, "regression");
  EXPECT_EQ(c.component, "prep");
  EXPECT_NEAR(c.component_delta_ms, 0.25, 1e-9);
  EXPECT_NEAR(c.total_delta_ms, 0.25, 1e-9);
  EXPECT_NE(c.text.find("; its time moved into prep (+0.25 ms/item of +0.25)"), std::string::npos) << c.text;
}

TEST(StoreHistory, AStallAnalysisOfTheBenchAndMachineGivesTheSplit) {
  std::vector<store::HistoryInstance> in;
  add_run(in, "run-a", "2026-01-01T00:00:00Z", {1000, 1000});
  add_run(in, "run-b", "2026-01-02T00:00:00Z", {500, 500});
  store::StallAnalysisRecord before, during, other_machine;
  before.bench = during.bench = other_machine.bench = "loader";
  before.machine = during.machine = "m1";
  other_machine.machine = "m2";
  before.recorded_at = "2025-12-31T00:00:00Z";
  before.compute_pct = 90;
  before.prep_pct = 5;
  before.fetch_pct = 5;
  during.run_id = "run-b";
  during.recorded_at = "2026-01-02T01:00:00Z";
  during.compute_pct = 45;
  during.prep_pct = 5;
  during.fetch_pct = 50;
  other_machine.compute_pct = 10;
  const History h = build_history(in, {}, {other_machine, during, before});
  const HistoryRun& a = h.series[0].runs[0];
  const HistoryRun& b = h.series[0].runs[1];
  EXPECT_EQ(a.time.source, "mlbench-stall");
  EXPECT_NEAR(a.time.compute_ms, 0.9, 1e-9);
  EXPECT_NEAR(b.time.fetch_ms, 1.0, 1e-9);  // 2 ms/item, 50% fetch
  EXPECT_EQ(b.change->component, "fetch");
  EXPECT_NE(b.change->text.find("its time moved into fetch (+0.95 ms/item of +1.00)"), std::string::npos)
      << b.change->text;
}

TEST(StoreHistory, OneAnalysisBehindBothRunsNamesNoComponentAndRunsBeforeItUseTheirReports) {
  std::vector<store::HistoryInstance> in;
  add_run(in, "run-a", "2026-01-02T00:00:00Z", {1000, 1000});
  add_run(in, "run-b", "2026-01-03T00:00:00Z", {500, 500});
  add_run(in, "run-0", "2025-12-01T00:00:00Z", {1000, 1000});
  store::StallAnalysisRecord a;
  a.analysis_id = "x";
  a.bench = "loader";
  a.machine = "m1";
  a.recorded_at = "2026-01-01T00:00:00Z";
  a.compute_pct = 50;
  a.prep_pct = 25;
  a.fetch_pct = 25;
  const History h = build_history(in, {}, {a});
  const HistorySeries& s = h.series[0];
  EXPECT_EQ(s.runs[0].run_id, "run-0");
  EXPECT_EQ(s.runs[0].time.source, "reports");
  EXPECT_EQ(s.runs[1].time.source, "mlbench-stall");
  const HistoryChange& c = *s.runs[2].change;
  EXPECT_EQ(c.verdict, "regression");
  EXPECT_EQ(c.component, "");  // run-b against run-a: one split for both
  EXPECT_EQ(c.text.find("its time"), std::string::npos) << c.text;
}

TEST(StoreHistory, FailuresAreCountedPerRunAndEachRunIsComparedWithAllBeforeIt) {
  std::vector<store::HistoryInstance> in;
  add_run(in, "run-a", "2026-01-01T00:00:00Z", {100, 101});
  add_run(in, "run-b", "2026-01-02T00:00:00Z", {99, 102});
  add_run(in, "run-c", "2026-01-03T00:00:00Z", {70, 71});
  store::HistoryInstance failed = instance("loader", "run-c", "2026-01-03T00:00:00Z", "m1", 1, 0.0);
  failed.instance.failed = true;
  failed.instance.slot = 1;
  failed.instance.items_per_s.reset();
  failed.instance.reason = "NaN in batch_loss";
  in.push_back(failed);
  // Another machine's run in between is another series, not an earlier run of this one.
  add_run(in, "run-x", "2026-01-02T12:00:00Z", {10, 10}, {}, "m2");
  const History h = build_history(in, two_machines(), {});
  ASSERT_EQ(h.series.size(), 2u);
  const HistorySeries& s = h.series[0];
  EXPECT_EQ(s.machine, "m1");
  ASSERT_EQ(s.runs.size(), 3u);
  EXPECT_EQ(s.runs[2].run_id, "run-c");
  EXPECT_EQ(s.runs[2].failures, 1);
  EXPECT_EQ(s.runs[2].instances, 3);
  ASSERT_EQ(s.runs[2].failure_reasons.size(), 1u);
  EXPECT_EQ(s.runs[2].failure_reasons[0], "pass 1 slot 1: NaN in batch_loss");
  EXPECT_EQ(s.runs[2].change->earlier_passes, 4);
  EXPECT_EQ(s.runs[2].change->passes, 2);
  EXPECT_EQ(s.runs[2].change->text.rfind("regression -29.9% (by size; 2 v 4 passes", 0), 0u) << s.runs[2].change->text;
  EXPECT_NEAR(s.runs[0].sd_pct, 0.7035, 1e-3);
  EXPECT_DOUBLE_EQ(s.runs[1].min_pass, 99);
  EXPECT_DOUBLE_EQ(s.runs[1].max_pass, 102);
}

TEST(StoreMachines, TwoMachinesSideBySideWithTheLatestRunAndTheVerdict) {
  std::vector<store::HistoryInstance> in;
  add_run(in, "old", "2026-01-01T00:00:00Z", {50, 50}, {}, "m1");
  add_run(in, "new", "2026-01-02T00:00:00Z", {100, 110}, {}, "m1");
  add_run(in, "gpu", "2026-01-01T00:00:00Z", {420, 420}, {}, "m2");
  add_run(in, "new", "2026-01-02T00:00:00Z", {1000, 1000}, {}, "m1", "toy_reg");
  store::StallAnalysisRecord a;
  a.bench = "loader";
  a.machine = "m2";
  a.verdict = "fetch-bound";
  const MachinesView v = build_machines_view(in, two_machines(), {a});
  ASSERT_EQ(v.machines.size(), 2u);
  EXPECT_EQ(v.machines[0].label, "CPU: AMD EPYC x2 / alpha");
  EXPECT_EQ(v.machines[1].label, "NVIDIA H200 / beta");
  ASSERT_EQ(v.rows.size(), 2u);
  EXPECT_EQ(v.rows[0].bench, "loader");
  const MachineCell& cpu = v.rows[0].cells.at("m1");
  EXPECT_EQ(cpu.run_id, "new");
  EXPECT_DOUBLE_EQ(cpu.items_per_s, 105);
  EXPECT_NEAR(cpu.relative, 0.25, 1e-12);
  EXPECT_NEAR(cpu.stall_pct, 10.0, 1e-9);
  EXPECT_EQ(cpu.verdict, "");
  const MachineCell& gpu = v.rows[0].cells.at("m2");
  EXPECT_DOUBLE_EQ(gpu.relative, 1.0);
  EXPECT_EQ(gpu.verdict, "fetch-bound");
  EXPECT_EQ(v.rows[1].cells.count("m2"), 0u);
}

TEST(StoreViews, MsPerItemIsFormattedInMicrosecondsBelowAHundredth) {
  EXPECT_EQ(format_ms_per_item(0.41, true), "+0.41 ms/item");
  EXPECT_EQ(format_ms_per_item(0.0052, false), "5.20 µs/item");
  EXPECT_EQ(format_ms_per_item(-0.0002, true), "-0.20 µs/item");
  EXPECT_EQ(format_ms_per_item(kNaN, true), "-");
}

}  // namespace
}  // namespace mlbench::report
