// Why a benchmark's numbers do not hold still, as measured: the likely cause of
// an sd% that fails the 5 % rule (from the instance reports' `stability`,
// `interference` and `train.avg`), and the passes and instances the report
// should name (those the trimmed mean drops, those outside Tukey's fences).
// Plain functions over numbers; the rules and thresholds are in docs/report.md.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "core/stability.h"
#include "report/report_model.h"

namespace mlbench::report {

// A timed observation shorter than this is too short to time reliably: the same
// minimum as the benchmarks' own `stability.short_observations` (core's
// kShortObservationS, half of --min-time's default of 0.2 s: one constant).
// Only used for reports without a `stability` field.
inline constexpr double kMinObservationS = core::kShortObservationS;
// Other processes' CPU time on the slot's CPUs, in percent of the slot's CPU time,
// above which a pass counts as disturbed ("other load").
inline constexpr double kOtherLoadPct = 10.0;
// Steal time on the slot's CPUs in percent of wall above which a pass counts as disturbed.
inline constexpr double kStealPct = 5.0;
// |probe_drift_pct| of one pass beyond this is "machine drift".
inline constexpr double kProbeDriftPct = 10.0;
// The probe before the job differing across passes by more than this (max / min - 1,
// in percent) is "machine drift" too.
inline constexpr double kProbeSpreadPct = 10.0;
// The same work's CPU time per item (the report's process_cpu.per_item_us) differing
// across instances by more than this (max / min - 1, in percent), the one that needed
// more being the slower, is "machine drift" too: the machine did the same work slower.
inline constexpr double kCpuPerItemSpreadPct = 5.0;
// Passes whose means spread more than this many times the spread their own
// observations explain (sd / sqrt(n), root-mean-square over the instances) differ
// "between passes"; otherwise the spread is "within-run noise". 2: with 4 passes the
// sample sd of the means exceeds twice its expected value with probability < 1%
// (chi-square, 3 degrees of freedom: P(chi2 > 12) = 0.007).
inline constexpr double kBetweenPassFactor = 2.0;
// Tukey's fences: outside [Q1 - k IQR, Q3 + k IQR] is an outlier; needs this many values.
inline constexpr double kTukeyK = 1.5;
inline constexpr int kMinValuesForOutliers = 4;

// The cause of an sd% of `sd_pct` (percent) above `limit_pct`, in this order of
// evidence: short observations, other load, machine drift, warm-up; else, with every
// cause measured and absent, where the spread lives: "between passes" (each pass
// steady, the passes apart) or "within-run noise" (the observations' own spread), from
// the instances' stability.sd_pct; "unexplained" when no instance records that; or not
// recorded (reports without the fields). Failed instances are not looked at.
Instability explain_instability(const BenchInput& input, double sd_pct, double limit_pct);

// The passes core::trimmed_mean leaves out (one lowest, one highest pass; none with
// fewer than 3 run values), by run name; a run without a value (NaN) is skipped.
std::vector<NamedValue> dropped_passes(const std::vector<RunValue>& runs);

// Values outside Tukey's fences over `values` (linear quartiles, core::quantile);
// nothing with fewer than kMinValuesForOutliers finite values.
std::vector<NamedValue> tukey_outliers(const std::vector<NamedValue>& values);

// The instances (R<k>/D<slot>) outside the fences over all non-failed instances of
// the benchmark, then, when some run has several instances, the passes (R<k>)
// outside the fences over the run values.
std::vector<NamedValue> find_outliers(const BenchInput& input, const std::vector<RunValue>& runs);

}  // namespace mlbench::report
