// The report's `stability` block: how much the kept (post-warm-up) timed observations
// of one run spread, whether they still trend (a warm-up longer than the dropped
// observations), and whether they are too short to time well. Thresholds are
// documented in docs/report-format.md.
#pragma once

#include <span>

#include "instance_report.h"

namespace mlbench::core {

// Mila's rule: a benchmark's spread is acceptable up to 5% sd/mean. A run whose own
// observations spread more is unstable within the run.
inline constexpr double kUnstableSdPct = 5.0;
// Warm-up still under way: the second half's median differs from the first half's by
// more than this (percent) ...
inline constexpr double kWarmupTrendPct = 3.0;
// ... and the time-vs-index Spearman rank correlation is at least this far from 0 in
// the same direction (0.7: the one-sided 5% critical value for 7 observations is 0.714,
// for 10 it is 0.564; a steady drift easily passes, noise rarely does) ...
inline constexpr double kWarmupTrendRho = 0.7;
// ... over at least this many kept observations (with 3 or 4, a random order is
// monotonic with probability 1/3 or 1/12: no verdict).
inline constexpr int kWarmupTrendMinObservations = 5;
// An observation shorter than this is dominated by timer and wake-up noise: half of
// kDefaultMinTime, since a calibrated observation lands near --min-time give or take
// the probe's error.
inline constexpr double kShortObservationS = 0.1;

struct Stability {
  int observations = 0;
  double sd_pct = 0, min_s = 0, max_s = 0, median_s = 0;  // NaN-free only when observations > 0
  double trend_pct = 0;  // 100 * (median of the second half / median of the first half - 1); 0 below 2 observations
  double rho = 0;        // Spearman rank correlation of time vs index; 0 below 2 observations
  bool warmup_trending = false;
  bool short_observations = false;

  bool unstable() const { return sd_pct > kUnstableSdPct; }
  // The report's stability block; the statistics are unset without observations.
  StabilityInfo info() const;
};

// Of the kept observations (seconds, in the order they were taken).
Stability stability_of(std::span<const double> kept);

// Spearman's rank correlation of xs against their index 0..n-1 (ties share their
// mean rank); 0 when n < 2 or all values are equal.
double spearman_vs_index(std::span<const double> xs);

}  // namespace mlbench::core
