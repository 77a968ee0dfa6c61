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
// Per benchmark (<g class="result-group">): result/target as a bar, the sd as a
// box and the min..max run as a whisker, with the target line at 1.0 (a bench
// without target is shown against its own result).
std::string result_svg(const std::vector<BenchResult>& benches);
// Per benchmark (<g class="drift-group">): run values / result, one point per run in run order.
std::string drift_svg(const std::vector<BenchResult>& benches, const std::vector<std::string>& runs);

}  // namespace mlbench::report
