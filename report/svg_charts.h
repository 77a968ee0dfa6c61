// The HTML report's charts as inline SVG strings (pure functions, no I/O):
// per benchmark one bar group of where the time went, result vs target with
// the run-to-run spread, and per-run items/s to show drift.
#pragma once

#include <string>
#include <vector>

#include "report/report_model.h"

namespace mlbench::report {

// One <g class="bar-group" data-bench="NAME"> per benchmark: a 100% stacked bar
// of compute / fetch stall / prep stall (mlbench-stall's split), or of
// compute / copy (h2d) / data wait from the reports when no analysis exists.
std::string time_split_svg(const std::vector<BenchResult>& benches);
// A job of several ranks (stall.json's `ranks` and `job`, docs/stall.md "Distributed jobs"): one
// <g class="rank-bar" data-rank="K"> per rank, a 100% stacked bar of its step: compute / prep
// stall / fetch stall / sync wait (its differential split; without one, compute / data wait /
// sync), the straggler's labelled so. "" when `ranks` is not an array.
std::string ranks_svg(const std::string& bench, const nlohmann::json& ranks, const nlohmann::json& job);
// Per benchmark (<g class="result-group">): result/target as a bar, the sd as a
// box and the min..max run as a whisker, with the target line at 1.0 (a bench
// without target is shown against its own result).
std::string result_svg(const std::vector<BenchResult>& benches);
// Per benchmark (<g class="drift-group">): run values / result, one point per run in run order.
std::string drift_svg(const std::vector<BenchResult>& benches, const std::vector<std::string>& runs);

// The results store's history of one benchmark (mlbench-report --history --html): items/s
// over its runs in time order, one line per machine; a run with a failed instance is a red
// ring (<g class="failed-run">), one with no value at all a red cross on the axis.
struct TrendPoint {
  std::string run_id, when;
  double items_per_s = kNaN;
  int failures = 0;
  std::string change;  // "regression", "improvement" or "" (drawn as the point's colour)
};
struct TrendSeries {
  std::string label;               // the machine
  std::vector<TrendPoint> points;  // time order
};
// One <svg class="chart trend" data-bench="NAME">.
std::string trend_svg(const std::string& bench, const std::vector<TrendSeries>& series);

}  // namespace mlbench::report
