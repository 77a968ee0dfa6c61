// Reliability tests of mlbench-report (docs/reliability.md, faults 2 and 3): a report file
// that is valid JSON but no report object is a failure of its instance, not a
// silent gap; the trimmed mean survives an absurd value, which is flagged.
#include <cmath>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "core/statistics.h"
#include "report/report_builder.h"
#include "report/report_statistics.h"
#include "report/reports_tree.h"
#include "report_tree_writer.h"

namespace mlbench::report {
namespace {

using testing::FakeInstance;
using testing::TempDir;
using testing::write_fake_report;

TEST(ReportFaults, ReportNamedFileThatIsNoObjectIsAFailureOfItsInstance) {
  TempDir root("report_faults");
  for (int run = 0; run < 3; ++run) {
    for (int slot = 0; slot < 2; ++slot) {
      if (run < 2 || slot < 1) write_fake_report(root.path(), FakeInstance{.run = run, .slot = slot});
    }
  }
  // R2/D1's report: valid JSON, but an array.
  const auto bad = write_fake_report(root.path(), FakeInstance{.run = 2, .slot = 1});
  std::ofstream(bad) << "[1, 2, 3]\n";
  const ReportsTree tree = load_reports_tree(root.path(), "fast", 3);
  const Report report = build_report("fast", root.path().string(), tree, Targets{}, {}, 3);
  ASSERT_EQ(report.benches.size(), 1u);
  const BenchResult& b = report.benches[0];
  EXPECT_EQ(b.instances, 6);
  EXPECT_EQ(b.failures, 1);
  ASSERT_EQ(b.failure_reasons.size(), 1u);
  EXPECT_NE(b.failure_reasons[0].find("R2/D1: unreadable report (not a report object)"), std::string::npos)
      << b.failure_reasons[0];
  EXPECT_FALSE(report.stats.bench_passes);
  EXPECT_EQ(report.stats.failed_instances, 1);
  bool named = false;
  for (const auto& w : tree.notes.warnings) named |= w.find(bad.filename().string()) != std::string::npos;
  EXPECT_TRUE(named) << "a warning names the file";
}

TEST(ReportFaults, TrimmedMeanDoesNotCancelOnAHugeValue) {
  EXPECT_DOUBLE_EQ(core::trimmed_mean(std::vector<double>{1e308, 1000, 1010, 990}), 1005.0);
  EXPECT_DOUBLE_EQ(core::trimmed_mean(std::vector<double>{1000, -1e308, 1e308, 1010, 990}), 1000.0);
  EXPECT_DOUBLE_EQ(trimmed_result(std::vector<double>{1000, 1e308, 1010, 990}), 1005.0);
}

TEST(ReportFaults, AbsurdSpeedIsAFlaggedFailureNotTheResult) {
  TempDir root("report_faults");
  for (int run = 0; run < 4; ++run) {
    write_fake_report(root.path(), FakeInstance{.run = run, .items_per_s = run == 3 ? 1e308 : 1000.0 + run});
  }
  const ReportsTree tree = load_reports_tree(root.path(), "fast", 4);
  const Report report = build_report("fast", root.path().string(), tree, Targets{}, {}, 4);
  ASSERT_EQ(report.benches.size(), 1u);
  const BenchResult& b = report.benches[0];
  EXPECT_EQ(b.failures, 1);
  EXPECT_NEAR(b.result, 1001.0, 1e-9);
  ASSERT_FALSE(tree.notes.warnings.empty());
  EXPECT_NE(tree.notes.warnings[0].find("implausible train_item.avg 1e+308"), std::string::npos)
      << tree.notes.warnings[0];
}

// A fault: --compare once flagged a change as significant when the two results differed by
// more than sqrt(sd_a^2 + sd_b^2), so 3 passes a side, which no rank test can tell apart
// at alpha = 0.05 (smallest two-sided p 2/20), were called a change. The verdict now
// comes from the Mann-Whitney U test over the passes and says that it needs more.
TEST(ReportFaults, ThreePassesASideAreNeverCalledASignificantChange) {
  BenchResult a, b;
  a.name = b.name = "x";
  for (double v : {110.0, 111.0, 112.0}) a.runs.push_back({"R", v, 1, 0});
  for (double v : {100.0, 101.0, 102.0}) b.runs.push_back({"R", v, 1, 0});
  a.result = 111.0;
  a.sd = 1.0;
  b.result = 101.0;
  b.sd = 1.0;  // combined sd 1.41 < 10: the old rule called this significant
  const std::vector<CompareRow> rows = compare_results({a}, {b});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FALSE(rows[0].significant);
  EXPECT_EQ(rows[0].verdict, "no significant difference");
  EXPECT_EQ(rows[0].note, "needs >= 4 passes a side: with 3 vs 3 no p is below 0.1");
  EXPECT_NEAR(rows[0].p_value, 0.1, 1e-12);
}

}  // namespace
}  // namespace mlbench::report
