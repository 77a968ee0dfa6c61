// Unit tests of mlbench-report's statistics, pass rules, instance parsing,
// targets and the console/CSV/JSON formatting, on fixed numbers.
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

#include "core/html.h"
#include "report/report_builder.h"
#include "report/report_statistics.h"
#include "report/reporter.h"
#include "report/reports_tree.h"
#include "report/stall_results.h"
#include "report/svg_charts.h"
#include "report/targets.h"
#include "report_tree_writer.h"

namespace mlbench::report {
namespace {

RunInstances run_of(const std::string& name, std::vector<double> values) {
  RunInstances r{name, {}};
  int slot = 0;
  for (double v : values) {
    Instance i;
    i.slot = slot++;
    i.items_per_s = v;
    r.instances.push_back(i);
  }
  return r;
}

TEST(ReportStatistics, FiniteValuesDropsNaNAndInfinitiesInOrder) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> xs{3.0, std::nan(""), -inf, 1.0, inf, 2.0};
  EXPECT_EQ(finite_values(xs), (std::vector<double>{3.0, 1.0, 2.0}));
  EXPECT_TRUE(finite_values(std::vector<double>{}).empty());
}

TEST(ReportStatistics, RunValueIsTheMeanOverSlotsOfNonFailedInstances) {
  RunInstances r = run_of("R0", {100.0, 200.0, 600.0});
  EXPECT_DOUBLE_EQ(run_value(r), 300.0);
  r.instances[2].failed = true;
  EXPECT_DOUBLE_EQ(run_value(r), 150.0);
  r.instances[0].failed = r.instances[1].failed = true;
  EXPECT_TRUE(std::isnan(run_value(r)));
}

TEST(ReportStatistics, TrimmedResultWithFourRunsDropsMinAndMax) {
  const std::vector<double> runs{10.0, 40.0, 20.0, 30.0};
  EXPECT_DOUBLE_EQ(trimmed_result(runs), 25.0);  // (20 + 30) / 2
  const std::vector<double> skewed{100.0, 1.0, 2.0, 3.0};
  EXPECT_DOUBLE_EQ(trimmed_result(skewed), 2.5);  // (2 + 3) / 2: the outlier run is gone
}

TEST(ReportStatistics, TrimmedResultBelowThreeRunsIsThePlainMean) {
  EXPECT_DOUBLE_EQ(trimmed_result(std::vector<double>{10.0, 20.0}), 15.0);
  EXPECT_DOUBLE_EQ(trimmed_result(std::vector<double>{7.0}), 7.0);
  EXPECT_TRUE(std::isnan(trimmed_result(std::vector<double>{})));
  EXPECT_DOUBLE_EQ(trimmed_result(std::vector<double>{10.0, NAN, 20.0}), 15.0);  // NaN runs ignored
}

TEST(ReportStatistics, SampleSdSdFractionAndDiff) {
  const std::vector<double> runs{10.0, 40.0, 20.0, 30.0};
  EXPECT_NEAR(run_sd(runs), 12.909944487358056, 1e-12);  // sqrt(500/3)
  EXPECT_TRUE(std::isnan(run_sd(std::vector<double>{5.0})));
  EXPECT_DOUBLE_EQ(sd_fraction(2.0, 50.0), 0.04);
  EXPECT_TRUE(std::isnan(sd_fraction(2.0, 0.0)));
  EXPECT_DOUBLE_EQ(target_diff(150.0, 100.0), 0.5);
  EXPECT_DOUBLE_EQ(target_diff(75.0, 100.0), -0.25);
  EXPECT_TRUE(std::isnan(target_diff(75.0, NAN)));
}

TEST(ReportStatistics, DeviationQuantileIsLinearAt80Percent) {
  // sd% x 100 = 1..5: position 0.8 * 4 = 3.2 -> 4 + 0.2 * (5 - 4) = 4.2
  const std::vector<double> fracs{0.05, 0.01, 0.03, 0.02, 0.04};
  EXPECT_NEAR(deviation_quantile_pct(fracs), 4.2, 1e-12);
  EXPECT_TRUE(std::isnan(deviation_quantile_pct(std::vector<double>{NAN})));
}

TEST(ReportStatistics, PassRules) {
  EXPECT_TRUE(deviation_passes(4.999));
  EXPECT_FALSE(deviation_passes(5.0));
  EXPECT_FALSE(deviation_passes(NAN));
  EXPECT_TRUE(performance_passes(0.0));
  EXPECT_FALSE(performance_passes(-0.0001));
  EXPECT_FALSE(performance_passes(NAN));
}

// The Mila README example (docs/report.md, "Statistics"): 19 rows of sd% and diff.
TEST(ReportStatistics, MilaReadmeExample) {
  struct Row {
    const char* name;
    double sd_frac, diff;
  };
  const std::vector<Row> rows{{"atari", 0.007507, 0.372320},
                              {"cart", 0.002941, 0.097624},
                              {"convnet", 0.001089, -0.015586},
                              {"convnet_distributed", 0.079718, 1.741185},
                              {"convnet_distributed_fp16", 0.055165, 1.377260},
                              {"convnet_fp16", 0.002339, 0.254371},
                              {"dcgan_all", 0.004957, 0.971489},
                              {"dcgan", 0.004279, 0.279384},
                              {"fast_style", 0.001495, -0.066762},
                              {"loader", 0.052238, -0.009813},
                              {"recom", 0.004974, 0.007386},
                              {"reso", 0.005153, 0.291708},
                              {"ssd", 0.004130, -0.178390},
                              {"toy_lstm", 0.005761, -0.526553},
                              {"toy_reg", 0.017383, -0.415752},
                              {"translator", 0.002092, -0.051146},
                              {"vae", 0.004459, -0.256056},
                              {"wlm", 0.002131, -0.052310},
                              {"wlmfp16", 0.004022, 0.225681}};
  ASSERT_EQ(rows.size(), 19u);
  std::vector<BenchResult> benches;
  std::vector<std::string> expected;
  for (const Row& r : rows) {
    BenchResult b;
    b.name = r.name;
    b.sd_frac = r.sd_frac;
    b.diff = r.diff;
    b.n = 10;
    b.enough_runs = true;
    b.instances = 10;
    benches.push_back(b);
    expected.push_back(r.name);
  }
  const SuiteStatistics s = summarize_suite(benches, expected);
  EXPECT_NEAR(s.deviation_q80_pct, 1.14574, 1e-9);
  // The mean of the 19 printed diffs is 0.2129494...: the Mila tool printed "+0.2129 %" (the
  // fraction); the true percentage is +21.2949 %.
  EXPECT_NEAR(s.performance_pct, 21.294947368421, 1e-9);
  const std::string lines = format_statistics(s, false);
  EXPECT_EQ(lines,
            "Statistics               |     Value | Pass |\n"
            "-------------------------|-----------|------|\n"
            "Bench Passes             :           | True\n"
            "Deviation Quantile (80%) : +1.1457 % | True |\n"
            "Performance              : +21.2949 % | True\n");
}

TEST(ReportStatistics, SummarizeBenchCountsFailuresAndStall) {
  BenchInput in;
  in.name = "loader";
  for (int k = 0; k < 4; ++k) in.runs.push_back(run_of("R" + std::to_string(k), {100.0 + k * 10, 100.0 + k * 10}));
  in.runs[1].instances[1].failed = true;
  in.runs[1].instances[1].reason = "NaN in batch_loss";
  for (auto& run : in.runs) {
    for (auto& i : run.instances) {
      i.stall_pct = 20.0;
      i.wait_s = 0.2;
      i.h2d_s = 0.0;
      i.compute_s = 0.8;
    }
  }
  const BenchResult b = summarize_bench(in, Target{100.0}, 4);
  EXPECT_EQ(b.n, 4);
  EXPECT_EQ(b.failures, 1);
  EXPECT_EQ(b.instances, 8);
  ASSERT_EQ(b.failure_reasons.size(), 1u);
  EXPECT_EQ(b.failure_reasons[0], "R1/D1: NaN in batch_loss");
  EXPECT_DOUBLE_EQ(b.result, 115.0);  // runs 100,110,120,130 -> (110+120)/2
  EXPECT_DOUBLE_EQ(b.diff, 0.15);
  EXPECT_DOUBLE_EQ(b.stall_pct, 20.0);
  EXPECT_NEAR(b.wait_frac, 0.2, 1e-12);
  EXPECT_NEAR(b.compute_frac, 0.8, 1e-12);
  EXPECT_TRUE(b.enough_runs);
  EXPECT_FALSE(summarize_bench(in, Target{100.0}, 5).enough_runs);
}

TEST(ReportStatistics, BenchPassesNeedsEveryExpectedBenchAndNoFailure) {
  BenchResult a;
  a.name = "a";
  a.enough_runs = true;
  a.instances = 4;
  BenchResult b = a;
  b.name = "b";
  EXPECT_TRUE(summarize_suite({a, b}, {"a", "b"}).bench_passes);
  const SuiteStatistics missing = summarize_suite({a}, {"a", "b"});
  EXPECT_FALSE(missing.bench_passes);
  EXPECT_EQ(missing.missing, std::vector<std::string>{"b"});
  b.failures = 1;
  EXPECT_FALSE(summarize_suite({a, b}, {"a", "b"}).bench_passes);
  b.failures = 0;
  b.enough_runs = false;
  EXPECT_FALSE(summarize_suite({a, b}, {"a", "b"}).bench_passes);
}

TEST(ReportStatistics, MilabenchScore) {
  auto bench = [](const char* name, double result, double target, double sd_frac) {
    BenchResult b;
    b.name = name;
    b.target = Target{target};
    b.result = result;
    b.sd_frac = sd_frac;
    b.diff = result / target - 1.0;
    b.enough_runs = true;
    b.instances = 50;
    return b;
  };
  // ratios 2 and 0.5: geometric mean 1; one of two >= 0.5 ... both are (0.5 counts); one stable.
  std::vector<BenchResult> benches{bench("x", 200.0, 100.0, 0.01), bench("y", 50.0, 100.0, 0.2)};
  SuiteStatistics s = summarize_suite(benches, {"x", "y"});
  EXPECT_NEAR(s.geomean_ratio, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(s.meets_perf_share, 1.0);
  EXPECT_DOUBLE_EQ(s.stable_share, 0.5);
  EXPECT_DOUBLE_EQ(s.failure_rate, 0.0);
  EXPECT_NEAR(s.milabench_score, 2.0 * 1.0 + 0.5 + 5.0 * 1.0, 1e-12);
  benches[1].failures = 2;  // 2 of 100 instances: above 1%, the score is 0
  s = summarize_suite(benches, {"x", "y"});
  EXPECT_DOUBLE_EQ(s.failure_rate, 0.02);
  EXPECT_DOUBLE_EQ(s.milabench_score, 0.0);
}

TEST(ReportStatistics, CompareFlagsChangesBeyondTheCombinedSd) {
  BenchResult a, b;
  a.name = b.name = "x";
  a.result = 110.0;
  a.sd = 3.0;
  b.result = 100.0;
  b.sd = 4.0;  // combined sd 5 < 10: significant
  std::vector<CompareRow> rows = compare_results({a}, {b});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].ratio, 1.1);
  EXPECT_NEAR(rows[0].change_pct, 10.0, 1e-12);
  EXPECT_DOUBLE_EQ(rows[0].combined_sd, 5.0);
  EXPECT_TRUE(rows[0].beyond_combined_sd);
  // No run values on either side: nothing to test, so never called significant.
  EXPECT_FALSE(rows[0].significant);
  EXPECT_EQ(rows[0].verdict, "not compared");
  b.sd = 12.0;  // combined sd 12.37 > 10
  EXPECT_FALSE(compare_results({a}, {b})[0].beyond_combined_sd);
  BenchResult only_b;
  only_b.name = "y";
  only_b.result = 5.0;
  rows = compare_results({a}, {b, only_b});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(std::isnan(rows[1].ratio));
}

TEST(ReportInstance, FailureRules) {
  testing::FakeInstance f;
  EXPECT_FALSE(parse_instance(testing::fake_report(f), "fast.toy_reg.R0.D0.x.json").failed);
  EXPECT_TRUE(parse_instance(testing::fake_report(f), "fast.toy_reg.R0.D0.FAIL.x.json").failed);
  f.nan_loss = true;
  Instance nan = parse_instance(testing::fake_report(f), "f.json");
  EXPECT_TRUE(nan.failed);
  EXPECT_EQ(nan.reason, "NaN in batch_loss");
  f.nan_loss = false;
  f.completed = false;
  Instance incomplete = parse_instance(testing::fake_report(f), "f.json");
  EXPECT_TRUE(incomplete.failed);
  EXPECT_EQ(incomplete.reason, "loss is NaN");
  nlohmann::json no_item = testing::fake_report(testing::FakeInstance{});
  no_item["train_item"]["avg"] = nullptr;
  EXPECT_TRUE(parse_instance(no_item, "f.json").failed);
  const Instance ok = parse_instance(testing::fake_report(testing::FakeInstance{}), "f.json");
  EXPECT_DOUBLE_EQ(ok.items_per_s, 1000.0);
  EXPECT_DOUBLE_EQ(ok.stall_pct, 10.0);
  EXPECT_DOUBLE_EQ(ok.wait_s, 0.001);
}

// scaling's exposed allreduce, a stall of its own: read from metrics, as a share of
// the iteration; absent in every other benchmark (NaN, no console column).
TEST(ReportInstance, AllreduceShareOfDataParallelRuns) {
  nlohmann::json j = testing::fake_report(testing::FakeInstance{});
  EXPECT_TRUE(std::isnan(parse_instance(j, "f.json").allreduce_pct));
  j["stall"]["iteration"] = {{"avg", 0.5}};
  j["metrics"]["allreduce_exposed_s"] = 0.1;
  const Instance i = parse_instance(j, "f.json");
  EXPECT_DOUBLE_EQ(i.allreduce_pct, 20.0);

  BenchInput in;
  in.name = "scaling";
  for (int k = 0; k < 2; ++k) in.runs.push_back(run_of("R" + std::to_string(k), {100.0}));
  in.runs[0].instances[0].allreduce_pct = 20.0;
  in.runs[1].instances[0].allreduce_pct = 30.0;
  Report report;
  report.benches.push_back(summarize_bench(in, std::nullopt, 1));
  EXPECT_DOUBLE_EQ(report.benches[0].allreduce_pct, 25.0);
  const std::string table = format_bench_table(report);
  EXPECT_NE(table.find("allreduce%"), std::string::npos) << table;
  EXPECT_NE(table.find("25.00"), std::string::npos) << table;
  BenchInput plain = in;
  for (auto& run : plain.runs) run.instances[0].allreduce_pct = kNaN;
  report.benches[0] = summarize_bench(plain, std::nullopt, 1);
  EXPECT_EQ(format_bench_table(report).find("allreduce%"), std::string::npos);
}

// The GPU monitor's mean utilisation (docs/report-format.md, "GPU monitor"): read
// from gpu_monitor.summary, averaged over the non-failed instances, printed as gpu%
// beside stall%; absent in CPU runs and older reports (no column, null in the JSON).
TEST(ReportInstance, GpuUtilisationFromTheGpuMonitorBlock) {
  nlohmann::json j = testing::fake_report(testing::FakeInstance{});
  EXPECT_TRUE(std::isnan(parse_instance(j, "f.json").gpu_util_pct));
  j["gpu_monitor"] = {{"interval_s", 1.0}, {"summary", {{"util_pct", {{"mean", nullptr}, {"max", nullptr}}}}}};
  EXPECT_TRUE(std::isnan(parse_instance(j, "f.json").gpu_util_pct));
  j["gpu_monitor"]["summary"]["util_pct"]["mean"] = 71.5;
  EXPECT_DOUBLE_EQ(parse_instance(j, "f.json").gpu_util_pct, 71.5);

  BenchInput in;
  in.name = "convnet";
  for (int k = 0; k < 3; ++k) in.runs.push_back(run_of("R" + std::to_string(k), {100.0}));
  in.runs[0].instances[0].gpu_util_pct = 80.0;
  in.runs[1].instances[0].gpu_util_pct = 90.0;
  in.runs[2].instances[0].gpu_util_pct = 10.0;
  in.runs[2].instances[0].failed = true;  // a failed instance counts for nothing, as for stall%
  BenchInput cpu;
  cpu.name = "toy_reg";
  cpu.runs.push_back(run_of("R0", {100.0}));
  Report report;
  report.benches.push_back(summarize_bench(in, std::nullopt, 1));
  report.benches.push_back(summarize_bench(cpu, std::nullopt, 1));
  EXPECT_DOUBLE_EQ(report.benches[0].gpu_util_pct, 85.0);
  EXPECT_TRUE(std::isnan(report.benches[1].gpu_util_pct));
  const std::string table = format_bench_table(report);
  const std::size_t header_end = table.find('\n');
  const std::string header = table.substr(0, header_end);
  const std::size_t stall = header.find("stall%"), gpu = header.find("gpu%");
  ASSERT_NE(gpu, std::string::npos) << table;
  ASSERT_LT(stall, gpu) << table;  // beside it: only spaces between
  EXPECT_EQ(header.substr(stall + 6, gpu - stall - 6).find_first_not_of(' '), std::string::npos) << table;
  EXPECT_NE(table.find("85.00"), std::string::npos) << table;
  const nlohmann::json out = report_to_json(report);
  EXPECT_EQ(out["benchmarks"][0]["gpu_util_pct"], 85.0);
  EXPECT_TRUE(out["benchmarks"][1]["gpu_util_pct"].is_null());

  report.benches.erase(report.benches.begin());
  EXPECT_EQ(format_bench_table(report).find("gpu%"), std::string::npos);
}

TEST(ReportInstance, RunDirectoryNames) {
  EXPECT_EQ(run_number("R0"), 0);
  EXPECT_EQ(run_number("R12"), 12);
  EXPECT_EQ(run_number("output7"), 7);
  EXPECT_EQ(run_number("Rx"), -1);
  EXPECT_EQ(run_number("results"), -1);
}

TEST(ReportTargets, ParsesNumbersAndObjects) {
  const Targets t = parse_targets(nlohmann::json::parse(R"({"model": "RTX", "benchmarks": {"a": 1200,
      "b": {"target": 50, "perf_target": 0.8, "sd_target": 2}}})"),
                                  "x.json");
  EXPECT_EQ(t.model, "RTX");
  EXPECT_DOUBLE_EQ(t.benchmarks.at("a").items_per_s, 1200.0);
  EXPECT_DOUBLE_EQ(t.benchmarks.at("a").perf_target, 0.5);
  EXPECT_DOUBLE_EQ(t.benchmarks.at("b").perf_target, 0.8);
  EXPECT_DOUBLE_EQ(t.benchmarks.at("b").sd_target, 2.0);
  EXPECT_THROW(parse_targets(nlohmann::json::parse(R"({"benchmarks": {"a": -1}})"), "x.json"), InputError);
  EXPECT_THROW(parse_targets(nlohmann::json::parse(R"({"benchmarks": {"a": "fast"}})"), "x.json"), InputError);
  EXPECT_THROW(parse_targets(nlohmann::json::parse(R"({"model": "x"})"), "x.json"), InputError);
}

TEST(ReportTargets, RepositoryTargetFilesAreValidAndFoundCaseInsensitively) {
  const std::filesystem::path dir = std::filesystem::path(MLBENCH_SOURCE_DIR) / "configs" / "targets";
  const std::filesystem::path rtx = find_targets_file("rtx", {dir});
  EXPECT_EQ(rtx.filename(), "rtx.json");
  EXPECT_EQ(find_targets_file("RTX", {dir}), rtx);
  const Targets t = load_targets_file(rtx);
  EXPECT_DOUBLE_EQ(t.benchmarks.at("loader").items_per_s, 1200.0);
  EXPECT_DOUBLE_EQ(t.benchmarks.at("toy_reg").items_per_s, 300000.0);
  EXPECT_NO_THROW(load_targets_file(find_targets_file("CPU", {dir})));
  EXPECT_THROW(find_targets_file("no-such-gpu", {dir}), InputError);
}

TEST(ReportStall, ParsesTheAnalyzerResult) {
  const StallAnalysis a = parse_stall_json(
      nlohmann::json::parse(R"({"bench": "loader", "split": {"compute_pct": 40, "prep_pct": 35, "fetch_pct": 25},
                               "rates": {"G": 900, "P": 500, "F_obs": 360, "C": 2000, "S": 400}})"),
      "stall.json");
  EXPECT_EQ(a.bench, "loader");
  EXPECT_DOUBLE_EQ(a.fetch_pct, 25.0);
  EXPECT_DOUBLE_EQ(a.rates["G"].get<double>(), 900.0);
  EXPECT_TRUE(a.self_check.is_null()) << "a stall.json older than the self-check has none";
  const StallAnalysis checked = parse_stall_json(
      nlohmann::json::parse(R"({"bench": "loader", "split": {"compute_pct": 40, "prep_pct": 35, "fetch_pct": 25},
                               "self_check": {"passed": false, "max_error_pct": 20.6, "threshold_pct": 5,
                                              "text": "self-check failed: ..."}})"),
      "stall.json");
  EXPECT_EQ(checked.self_check["passed"], false);
  EXPECT_DOUBLE_EQ(checked.self_check["max_error_pct"].get<double>(), 20.6);
  EXPECT_THROW(parse_stall_json(nlohmann::json::parse(R"({"bench": "x", "split": {"compute_pct": 1}})"), "s"),
               InputError);
}

Report small_report() {
  Report r;
  r.suite = "fast";
  r.runs = {"R0", "R1", "R2", "R3"};
  BenchResult b;
  b.name = "toy_reg";
  b.target = Target{1000.0};
  b.result = 1100.5;
  b.sd = 11.005;
  b.sd_frac = 0.01;
  b.diff = 0.1005;
  b.n = 4;
  b.enough_runs = true;
  b.instances = 4;
  b.stall_pct = 12.5;
  b.runs = {{"R0", 1000.0, 1, 0}, {"R1", 1100.0, 1, 0}, {"R2", 1101.0, 1, 0}, {"R3", 1200.0, 1, 0}};
  r.benches.push_back(b);
  r.stats = summarize_suite(r.benches, {"toy_reg"});
  return r;
}

TEST(ReportFormat, BenchTableInThePandasLayout) {
  const std::string table = format_bench_table(small_report());
  EXPECT_EQ(table,
            "         target  result      sd   sd%    diff  n  fail  stall%\n"
            "bench                                                         \n"
            "toy_reg  1000.0  1100.5  11.005  0.01  0.1005  4     0   12.50\n");
}

TEST(ReportFormat, CsvAndJsonCarryEveryNumber) {
  const Report r = small_report();
  std::ostringstream csv;
  CsvReporter().write(r, csv);
  EXPECT_NE(csv.str().find("bench,target,result,sd,sd_frac,diff,n,failures,instances,stall_pct"), std::string::npos);
  EXPECT_NE(csv.str().find("toy_reg,1000,1100.5,11.005,0.01,0.1005,4,0,4,12.5,"), std::string::npos);
  EXPECT_NE(csv.str().find(",1000,1100,1101,1200\n"), std::string::npos);
  EXPECT_NE(csv.str().find("performance_pct,10.05"), std::string::npos);
  const nlohmann::json j = report_to_json(r);
  EXPECT_DOUBLE_EQ(j["benchmarks"][0]["result"].get<double>(), 1100.5);
  EXPECT_DOUBLE_EQ(j["benchmarks"][0]["runs"][3]["items_per_s"].get<double>(), 1200.0);
  EXPECT_TRUE(j["benchmarks"][0]["stall_analysis"].is_null());
  EXPECT_TRUE(j["statistics"]["bench_passes"]["pass"].get<bool>());
  EXPECT_NEAR(j["statistics"]["performance"]["value_pct"].get<double>(), 10.05, 1e-9);
}

TEST(ReportFormat, SvgHasOneBarGroupPerBench) {
  Report r = small_report();
  BenchResult other = r.benches[0];
  other.name = "a<b";
  r.benches.push_back(other);
  const std::string svg = time_split_svg(r.benches);
  std::size_t groups = 0;
  for (std::size_t p = svg.find("class=\"bar-group\""); p != std::string::npos;
       p = svg.find("class=\"bar-group\"", p + 1))
    ++groups;
  EXPECT_EQ(groups, 2u);
  EXPECT_NE(svg.find("data-bench=\"a&lt;b\""), std::string::npos);
  EXPECT_EQ(core::base64("Man"), "TWFu");
  EXPECT_EQ(core::base64("Ma"), "TWE=");
  EXPECT_EQ(core::base64("M"), "TQ==");
}

}  // namespace
}  // namespace mlbench::report
