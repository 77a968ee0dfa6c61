// The values mlbench-report works on: what was read from a reports tree
// (per benchmark, per run), the targets, the stall analyses, and the computed
// results that every reporter (console, CSV, JSON, HTML) prints. Plain structs,
// no I/O, so statistics and reporters can be tested on numbers alone.
#pragma once

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlbench::report {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One benchmark's target on one machine model (configs/targets/<model>.json).
struct Target {
  double items_per_s = kNaN;  // the baseline speed
  double perf_target = 0.5;   // a bench "meets performance" when result/target >= this (milabench's PM)
  double sd_target = 5.0;     // a bench is "stable" when sd% (in percent) <= this (milabench's ST)
};

struct Targets {
  std::string model;   // e.g. "RTX"
  std::string source;  // the file read ("" when none)
  std::string note;    // where the numbers come from
  std::map<std::string, Target> benchmarks;
};

// mlbench-stall's result for one benchmark (DIR/stall.json, Contract of issue 8).
struct StallAnalysis {
  std::string bench;
  std::string dir;            // the folder holding stall.json
  double compute_pct = kNaN;  // T_G / T_cold
  double prep_pct = kNaN;     // (T_P - T_G) / T_cold
  double fetch_pct = kNaN;    // (T_cold - T_P) / T_cold
  nlohmann::json rates;       // {"G","P","F_obs","C","S"} as written
  std::string split_svg;      // contents of split.svg ("" when absent)
  std::string whatif_svg;     // contents of whatif.svg ("" when absent)
};

// One instance report reduced to what the report needs.
struct Instance {
  std::string file;
  int slot = 0;
  bool failed = false;
  std::string reason;         // why it counts as failed
  double items_per_s = kNaN;  // train_item.avg
  double stall_pct = kNaN;    // stall.stall_pct (percent)
  double wait_s = kNaN;       // stall.wait.avg (per iteration)
  double h2d_s = kNaN;        // stall.h2d.avg
  double compute_s = kNaN;    // stall.compute.avg
  std::string blas;           // machine.blas.name ("" in reports older than that field)
};

// All instances of one benchmark in one run directory.
struct RunInstances {
  std::string run;  // "R3" / "output3"
  std::vector<Instance> instances;
};

// Everything read for one benchmark, runs in order.
struct BenchInput {
  std::string name;
  std::vector<RunInstances> runs;  // only runs that hold at least one instance of this bench
};

// Per-run value of one benchmark.
struct RunValue {
  std::string run;
  double items_per_s = kNaN;  // mean of train_item.avg over the run's non-failed instances
  int instances = 0;
  int failures = 0;
};

// One row of the report table.
struct BenchResult {
  std::string name;
  std::optional<Target> target;
  double result = kNaN;   // mean of the run values without the min and max runs
  double sd = kNaN;       // sample sd of the run values
  double sd_frac = kNaN;  // sd / result (a fraction; the Mila "sd%")
  double diff = kNaN;     // result / target - 1
  int n = 0;              // runs with a value
  int instances = 0;
  int failures = 0;
  std::vector<std::string> failure_reasons;  // "R2/D1: NaN in batch_loss"
  double stall_pct = kNaN;                   // mean of the instances' stall_pct
  // Mean per-iteration phase times over the non-failed instances, as fractions of their sum.
  double wait_frac = kNaN, h2d_frac = kNaN, compute_frac = kNaN;
  std::optional<StallAnalysis> analysis;  // fetch/prep split from mlbench-stall
  std::vector<RunValue> runs;
  double min_run = kNaN, max_run = kNaN;
  bool enough_runs = false;  // n >= the minimum number of runs
  bool expected = false;     // listed in the targets
};

struct SuiteStatistics {
  bool bench_passes = false;
  std::vector<std::string> missing;  // expected benches without (enough) results
  std::vector<std::string> failed;   // benches with at least one failed instance
  double deviation_q80_pct = kNaN;   // 80% linear quantile of sd% x 100
  bool deviation_passes = false;     // < 5
  double performance_pct = kNaN;     // mean of diff x 100
  bool performance_passes = false;   // >= 0
  // milabench-style score
  double geomean_ratio = kNaN;  // geometric mean of result/target
  int ratio_benches = 0;        // benches in the geometric mean
  int total_instances = 0;
  int failed_instances = 0;
  double failure_rate = kNaN;      // failed / total instances
  double meets_perf_share = kNaN;  // share of benches with result/target >= perf_target (PM)
  double stable_share = kNaN;      // share of benches with sd% <= sd_target (ST)
  double milabench_score = kNaN;   // (failure rate <= 1%) * (2 PM + ST + 5 PG)
};

// --compare: this tree (A) against another (B).
struct CompareRow {
  std::string name;
  double a_result = kNaN, a_sd = kNaN;
  double b_result = kNaN, b_sd = kNaN;
  double ratio = kNaN;        // a / b
  double change_pct = kNaN;   // (a / b - 1) * 100
  double combined_sd = kNaN;  // sqrt(a_sd^2 + b_sd^2)
  bool significant = false;   // |a - b| > combined_sd
};

struct Comparison {
  std::string other_dir;
  std::vector<std::string> other_runs;
  std::vector<CompareRow> rows;
};

// Counts of what the loader skipped, and one line per problem worth telling.
struct LoadNotes {
  int other_suite = 0;  // reports of another suite
  int not_reports = 0;  // JSON files that are not instance reports (machine.json, ...)
  int unreadable = 0;   // files that could not be parsed
  std::vector<std::string> warnings;
};

struct Report {
  std::string suite;
  std::string reports_dir;
  std::vector<std::string> runs;  // run directories that hold reports of the suite
  int min_runs = 4;
  Targets targets;
  std::vector<BenchResult> benches;  // sorted by name
  SuiteStatistics stats;
  LoadNotes notes;
  // One-line notes on how to read it: statistics that need repeated passes, runs of
  // different machines grouped together (report_input.h).
  std::vector<std::string> info;
  std::optional<Comparison> comparison;
};

}  // namespace mlbench::report
