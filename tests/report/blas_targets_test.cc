// mlbench-report's BLAS warnings (machine.blas of the instances) and the targets file
// that --write-targets makes from a report's runs: pure functions on numbers.
#include <cmath>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "report/blas_notes.h"
#include "report/report_statistics.h"
#include "report/targets.h"

namespace mlbench::report {
namespace {

nlohmann::json with_blas(const std::string& name) {
  return {{"name", "wlm"},
          {"suite", "fast"},
          {"completed", true},
          {"train_item", {{"avg", 30.0}}},
          {"machine", {{"blas", {{"name", name}, {"threads", 1}}}}}};
}

// A tree of `bench` with one instance per run, each run's BLAS from `blas`.
ReportsTree tree_of(const std::string& bench, const std::vector<std::string>& blas) {
  ReportsTree t;
  BenchInput& in = t.benches[bench];
  in.name = bench;
  for (std::size_t r = 0; r < blas.size(); ++r) {
    const std::string run = "R" + std::to_string(r);
    t.runs.push_back(run);
    Instance i;
    i.items_per_s = 10.0 + static_cast<double>(r);
    i.blas = blas[r];
    in.runs.push_back({run, {i}});
  }
  return t;
}

TEST(ReportBlas, ParseInstanceReadsTheBlasNameAndOlderReportsHaveNone) {
  EXPECT_EQ(parse_instance(with_blas("openblas-openmp"), "f.json").blas, "openblas-openmp");
  nlohmann::json old = with_blas("x");
  old["machine"].erase("blas");
  EXPECT_EQ(parse_instance(old, "f.json").blas, "");
  old.erase("machine");
  EXPECT_EQ(parse_instance(old, "f.json").blas, "");
  EXPECT_FALSE(parse_instance(old, "f.json").failed);
}

TEST(ReportBlas, WarnsOnTheReferenceBlasNamingTheBenchmarks) {
  const auto w = blas_warnings(tree_of("wlm", {"reference", "reference"}));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("wlm ran on the reference BLAS"), std::string::npos) << w[0];
}

TEST(ReportBlas, WarnsWhenRunsUsedDifferentLibraries) {
  const auto w = blas_warnings(tree_of("wlm", {"openblas-openmp", "openblas-pthread", "openblas-openmp"}));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("different BLAS libraries: openblas-openmp (R0, R2), openblas-pthread (R1)"), std::string::npos)
      << w[0];
}

TEST(ReportBlas, NoWarningForOneOptimisedBlasOrForOldReports) {
  EXPECT_TRUE(blas_warnings(tree_of("wlm", {"openblas-openmp", "openblas-openmp"})).empty());
  EXPECT_TRUE(blas_warnings(tree_of("wlm", {"", ""})).empty());
}

TEST(ReportBlas, CompareWarnsWhenTheTreesDiffer) {
  const auto a = tree_of("wlm", {"openblas-openmp", "openblas-openmp"});
  const auto b = tree_of("wlm", {"reference", "reference"});
  const auto w = blas_compare_warnings(a, b, "before/");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("--compare before/ used another BLAS: reference (R0, R1) there, openblas-openmp (R0, R1) here"),
            std::string::npos)
      << w[0];
  EXPECT_TRUE(blas_compare_warnings(a, a, "same/").empty());
  EXPECT_TRUE(blas_compare_warnings(a, tree_of("wlm", {""}), "old/").empty()) << "an old tree records no BLAS";
}

TEST(ReportTargets, RoundDownToTwoSignificantDigits) {
  EXPECT_EQ(round_down_2_significant(4683000.0), 4600000.0);
  EXPECT_EQ(round_down_2_significant(4600000.0), 4600000.0);
  EXPECT_EQ(round_down_2_significant(9.07), 9.0);
  EXPECT_EQ(round_down_2_significant(12.0), 12.0);
  EXPECT_DOUBLE_EQ(round_down_2_significant(0.987), 0.98);
  EXPECT_DOUBLE_EQ(round_down_2_significant(0.9), 0.9);
  EXPECT_EQ(round_down_2_significant(219.9), 210.0);
  EXPECT_TRUE(std::isnan(round_down_2_significant(0.0)));
  EXPECT_TRUE(std::isnan(round_down_2_significant(kNaN)));
}

TEST(ReportTargets, MedianOfTheRunValuesPerBenchmarkAndSkipsBenchesWithout) {
  std::vector<BenchResult> rows(3);
  rows[0].name = "wlm";
  for (double v : {31.0, 35.9, 34.2, 29.0, 36.5}) rows[0].runs.push_back({"R", v, 1, 0});
  rows[1].name = "toy_reg";
  for (double v : {4.1e6, 4.7e6}) rows[1].runs.push_back({"R", v, 1, 0});
  rows[2].name = "broken";
  rows[2].runs.push_back({"R0", kNaN, 1, 1});
  std::vector<std::string> skipped;
  const nlohmann::json j = make_targets(rows, "CPU", "a note", skipped);
  EXPECT_EQ(j["model"], "CPU");
  EXPECT_EQ(j["note"], "a note");
  EXPECT_EQ(j["benchmarks"]["wlm"], 34);           // median 34.2
  EXPECT_EQ(j["benchmarks"]["toy_reg"], 4400000);  // median 4.4e6
  EXPECT_FALSE(j["benchmarks"].contains("broken"));
  EXPECT_EQ(skipped, std::vector<std::string>{"broken"});
  // What it writes is what the report reads.
  const Targets t = parse_targets(j, "written.json");
  EXPECT_EQ(t.model, "CPU");
  EXPECT_EQ(t.benchmarks.at("wlm").items_per_s, 34.0);
}

// --write-targets made a target from a benchmark that failed 3 of its 4 instances, silently.
TEST(ReportTargets, ATargetFromABenchmarkWhoseInstancesFailedIsWarnedAbout) {
  std::vector<BenchResult> rows(2);
  rows[0].name = "flaky";
  rows[0].runs.push_back({"R0", 100.0, 1, 0});
  rows[0].instances = 4;
  rows[0].failures = 3;
  rows[0].failure_reasons = {"R1/D0: exit 1"};
  rows[1].name = "steady";
  rows[1].runs.push_back({"R0", 50.0, 1, 0});
  rows[1].instances = 4;
  std::vector<std::string> skipped;
  const nlohmann::json j = make_targets(rows, "CPU", "", skipped);
  const auto warnings = targets_from_failing_benches(rows, j);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("flaky's target comes from 1 of its 4 instances (3 failed: R1/D0: exit 1)"),
            std::string::npos)
      << warnings[0];
}

}  // namespace
}  // namespace mlbench::report

namespace mlbench::report {
namespace {

// configs/targets/cpu.json covers every job of configs/fast.json, so a CPU report of the
// fast suite has no NaN target on a row. A job added to fast.json has none until the
// targets are regenerated (docs/report.md, "Writing a targets file").
TEST(CpuTargets, EveryFastJobHasATarget) {
  const std::string root = MLBENCH_SOURCE_DIR;
  std::ifstream jobs_in(root + "/configs/fast.json"), targets_in(root + "/configs/targets/cpu.json");
  ASSERT_TRUE(jobs_in && targets_in);
  const auto jobs = nlohmann::json::parse(jobs_in);
  const auto targets = nlohmann::json::parse(targets_in)["benchmarks"];
  ASSERT_TRUE(jobs.is_array());
  for (const auto& job : jobs) {
    const std::string name = job["name"].get<std::string>();
    ASSERT_TRUE(targets.contains(name)) << name << " has no target in configs/targets/cpu.json";
    EXPECT_GT(targets[name].get<double>(), 0) << name;
  }
}

}  // namespace
}  // namespace mlbench::report
