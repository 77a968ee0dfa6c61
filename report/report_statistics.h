// The statistics of mlbench-report as plain functions over numbers (no I/O),
// documented one by one in docs/report.md. Built on core/statistics.h.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "report/report_model.h"

namespace mlbench::report {

// The Mila rule: fewer runs than this is an error unless --min-runs lowers it.
inline constexpr int kDefaultMinRuns = 4;
inline constexpr double kDeviationQuantile = 0.8;
inline constexpr double kDeviationLimitPct = 5.0;  // Deviation Quantile passes below this
inline constexpr double kMaxFailureRate = 0.01;    // milabench: the score is 0 above 1% failures

// The finite values of xs, in order (NaN and infinities dropped).
std::vector<double> finite_values(std::span<const double> xs);

// Mean of train_item.avg over the non-failed instances of one run (NaN when none).
double run_value(const RunInstances& run);

// `result`: mean of the run values with one minimum and one maximum run dropped
// (>= 3 values); with 1 or 2 values (only reachable through --min-runs) the plain mean.
// Non-finite values are ignored; NaN when none is left.
double trimmed_result(std::span<const double> run_values);
// Sample sd of the finite run values (NaN with fewer than 2).
double run_sd(std::span<const double> run_values);
// sd / result as a fraction (the Mila "sd%" column).
double sd_fraction(double sd, double result);
// result / target - 1.
double target_diff(double result, double target);

// 80% linear quantile of sd% x 100 over the finite values (NaN when none).
double deviation_quantile_pct(std::span<const double> sd_fracs);
// Mean of diff x 100 over the finite values (NaN when none).
double performance_pct(std::span<const double> diffs);
bool deviation_passes(double quantile_pct);   // < 5 (false for NaN)
bool performance_passes(double performance);  // >= 0 (false for NaN)

// One benchmark's row: run values, result, sd, sd%, diff, failures, stall columns.
BenchResult summarize_bench(const BenchInput& input, const std::optional<Target>& target, int min_runs);

// Suite lines: Bench Passes, Deviation Quantile, Performance, the milabench score.
// `expected`: benchmarks that must have results (the targets' list).
SuiteStatistics summarize_suite(const std::vector<BenchResult>& benches, const std::vector<std::string>& expected);

// The significance columns of one --compare row: a two-sided Mann-Whitney U test
// (report/significance.h) of this tree's run values against the other's at
// kSignificanceAlpha; the verdict says "faster"/"slower" only when significant.
void test_significance(CompareRow& row, std::span<const double> a_runs, std::span<const double> b_runs);

// Side by side, A (this tree) against B, by benchmark name (union of both): ratio,
// change, the combined-sd flag, and test_significance over the benches' run values.
std::vector<CompareRow> compare_results(const std::vector<BenchResult>& a, const std::vector<BenchResult>& b);

}  // namespace mlbench::report
