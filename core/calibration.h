// --min-time: calibrating `number` (iterations per timed observation) so that one
// observation lasts at least a minimum time, as google/benchmark's MinTime and
// pyperf's loop calibration do. Probe rounds of 1, 2, 4, ... iterations run until
// one takes a measurable time; number = ceil(min_time / seconds per iteration).
// The probe iterations are extra warm-up: run, never timed into the report.
#pragma once

#include <functional>

#include "instance_report.h"

namespace mlbench::core {

// The --min-time a user gets by giving the flag without a value, and the value
// configs/fast.json uses: 0.2 s is 200,000x the steady clock's resolution and
// thousands of scheduler ticks of a loaded machine's wake-up noise, yet keeps a
// 10-observation job near 2 s on a CPU; a GPU iteration (ms) still spans tens of
// iterations, so a kernel launch or a sync at the edges weighs < 1%.
inline constexpr double kDefaultMinTime = 0.2;
// A probe round counts as measurable once it lasts this share of min_time (as
// google/benchmark's 10%): long enough that clock and wake-up noise stay below 1%.
inline constexpr double kProbeMeasurableFraction = 0.1;
// The largest calibrated number: a step that takes nanoseconds (or a clock that
// does not move) must not turn into billions of iterations per observation.
inline constexpr int kMaxCalibratedNumber = 1'000'000;

struct Calibration {
  int number = 1;                    // iterations per observation, as used
  long probe_iterations = 0;         // iterations run by the probe (warm-up, untimed)
  double seconds_per_iteration = 0;  // measured by the last probe round, or the last warm-up observation
  double target_s = 0;               // the --min-time asked for
  int refinements = 0;               // warm-up observations that re-estimated number after the probe

  // The report's calibration block.
  CalibrationInfo info() const;
};

// Runs probe rounds through `run_round(n)`, which runs n iterations and returns the
// seconds they took. Rounds double n until a round lasts at least
// kProbeMeasurableFraction * min_time; at least two rounds run, so the estimate never
// rests on the very first iteration alone (allocations, caches, lazy set-up make it
// slow). number = ceil(min_time / (last round's seconds / its n)), in
// [1, kMaxCalibratedNumber]. `min_time` > 0.
Calibration calibrate_number(double min_time, const std::function<double(int)>& run_round);

// ceil(min_time / seconds_per_iteration) in [1, kMaxCalibratedNumber] (the cap when the
// iteration took no measurable time).
int number_for(double min_time, double seconds_per_iteration);

}  // namespace mlbench::core
