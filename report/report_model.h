// The values mlbench-report works on: what was read from a reports tree
// (per benchmark, per run), the targets, the stall analyses, and the computed
// results that every reporter (console, CSV, JSON, HTML) prints. Plain structs,
// no I/O, so statistics and reporters can be tested on numbers alone.
#pragma once

#include <cstdint>
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
  std::string model;  // e.g. "RTX", or "CPU"
  // A CPU targets file names the CPU it was made on ("cpu_model", "logical_cores"): a CPU report
  // compares only with targets of its own CPU. "" / 0 in files made before the fields (unknown kind).
  std::string cpu_model;
  std::int64_t logical_cores = 0;
  std::string source;  // the file read ("" when none)
  std::string note;    // where the numbers come from
  std::map<std::string, Target> benchmarks;
};

// mlbench-stall's result for one benchmark (DIR/stall.json; docs/stall.md, "Outputs").
struct StallAnalysis {
  std::string bench;
  std::string dir;            // the folder holding stall.json
  double compute_pct = kNaN;  // T_G / T_cold
  double prep_pct = kNaN;     // (T_P - T_G) / T_cold
  double fetch_pct = kNaN;    // (T_cold - T_P) / T_cold
  nlohmann::json rates;       // {"G","P","F_obs","C","S"} as written
  nlohmann::json self_check;  // the what-if's self-check as written (for the JSON export); null in older results
  std::string self_check_text;  // its one line ("" when absent)
  // What the analysis told its user to act on: the verdict, the remedy named (or why none) and the
  // advice lines (stall.json schema 13; older ones have the first two only).
  std::string verdict, remedy_text;
  std::vector<std::string> advice;
  // A job of several ranks (--exec; docs/stall.md, "Distributed jobs"): stall.json's `ranks` (an
  // array) and `job` as written; null when absent (one process, or older results).
  nlohmann::json ranks, job;
  std::string split_svg;      // contents of split.svg ("" when absent)
  std::string whatif_svg;     // contents of whatif.svg ("" when absent)
};

// The instance report's `stability` (newer reports): the within-run spread of the
// kept train observations (docs/report-format.md).
struct Stability {
  int observations = 0;
  double sd_pct = kNaN;     // 100 * sd / mean of the observation seconds
  double median_s = kNaN;   // median observation seconds
  double trend_pct = kNaN;  // second half's median over the first half's, in percent
  bool warmup_trending = false;
  bool short_observations = false;
};

// mlbench-run's `interference` of one instance: what else ran on its slot's CPUs.
struct Interference {
  double other_cpu_pct = kNaN;   // other processes' CPU time, percent of the slot's CPU time
  double steal_pct = kNaN;       // steal time on the slot's CPUs, percent of wall
  double probe_before_s = kNaN;  // fixed CPU probe before the job
  double probe_after_s = kNaN;
  double probe_drift_pct = kNaN;  // 100 * (after - before) / before
  // The same probe on every slot CPU at once (slowest thread); NaN for 1-CPU slots and
  // reports older than the field.
  double parallel_probe_before_s = kNaN;
  double parallel_probe_after_s = kNaN;
};

// One instance report reduced to what the report needs.
struct Instance {
  std::string file;
  int slot = 0;
  bool failed = false;
  std::string reason;         // why it counts as failed
  double items_per_s = kNaN;  // train_item.avg
  double stall_pct = kNaN;    // stall.stall_pct (percent)
  // Data-parallel runs (scaling): allreduce time per iteration not hidden by backward
  // (metrics.allreduce_exposed_s) in percent of the iteration (stall.iteration.avg).
  double allreduce_pct = kNaN;
  double gpu_util_pct = kNaN;  // gpu_monitor.summary.util_pct.mean (absent: no monitor, or an older report)
  double wait_s = kNaN;       // stall.wait.avg (per iteration)
  double h2d_s = kNaN;        // stall.h2d.avg
  double compute_s = kNaN;    // stall.compute.avg
  std::string blas;           // machine.blas.name ("" in reports older than that field)
  double observation_s = kNaN;               // train.avg: seconds of one timed observation
  double cpu_per_item_us = kNaN;             // process_cpu.per_item_us (absent in older reports)
  std::optional<Stability> stability;        // absent in reports older than the field
  std::optional<Interference> interference;  // absent/null when not run under mlbench-run
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

// Why a benchmark's sd% fails the 5 % rule, as measured (report/instability.h).
struct Instability {
  double sd_pct = kNaN;     // the benchmark's sd% x 100
  double limit_pct = kNaN;  // the rule it fails (sd_target, 5 by default)
  std::string cause;        // "short observations", "other load", "machine drift", "warm-up", "unexplained",
                            // "not recorded"
  std::string evidence;     // one line with the figure, e.g. "other load: 38% of the slot's CPU time ..."
};

// A pass or instance named in the report: dropped by the trimmed mean, or outside the spread.
struct NamedValue {
  std::string where;  // "R2" (a pass) or "R2/D1" (an instance)
  double items_per_s = kNaN;
  std::string why;  // "lowest pass, dropped by the trimmed mean", "above Q3 + 1.5 IQR (1210.5)"
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
  double allreduce_pct = kNaN;               // mean of the instances' allreduce_pct (scaling only)
  double gpu_util_pct = kNaN;                // mean of the instances' gpu_util_pct (GPU runs with the monitor)
  // Mean per-iteration phase times over the non-failed instances, as fractions of their sum.
  double wait_frac = kNaN, h2d_frac = kNaN, compute_frac = kNaN;
  std::optional<StallAnalysis> analysis;  // fetch/prep split from mlbench-stall
  std::vector<RunValue> runs;
  double min_run = kNaN, max_run = kNaN;
  bool enough_runs = false;  // n >= the minimum number of runs
  bool expected = false;     // listed in the targets
  std::optional<Instability> instability;  // set when sd% fails the rule
  std::vector<NamedValue> dropped;         // the passes the trimmed mean leaves out
  std::vector<NamedValue> outliers;        // passes / instances outside Tukey's fences
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
  bool beyond_combined_sd = false;  // |a - b| > combined_sd (the flag before the significance test)
  // The two-sided Mann-Whitney U test over both sides' run values (report/significance.h).
  int a_n = 0, b_n = 0;
  double u = kNaN;           // U of this side
  double p_value = kNaN;     // NaN when a side has no run value
  double min_p = kNaN;       // the smallest p these sample sizes allow
  std::string method;        // "exact", "exact (ties, midranks)", "normal approximation (tie-corrected)"
  bool significant = false;  // p_value < alpha
  std::string verdict;       // "faster", "slower", "no significant difference", "not compared"
  std::string note;          // e.g. "needs >= 4 passes a side", "" when none
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
