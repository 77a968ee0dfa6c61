// --min-time calibration of `number` (see calibration.h).
#include "calibration.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace mlbench::core {

CalibrationInfo Calibration::info() const {
  return {.number = number,
          .probe_iterations = probe_iterations,
          .refinements = refinements,
          .seconds_per_iteration = seconds_per_iteration,
          .target_s = target_s};
}

Calibration calibrate_number(double min_time, const std::function<double(int)>& run_round) {
  if (!(min_time > 0) || !std::isfinite(min_time)) throw std::invalid_argument("min_time must be > 0");
  Calibration c;
  c.target_s = min_time;
  const double measurable = kProbeMeasurableFraction * min_time;
  int n = 1;
  for (int round = 0;; ++round) {
    const double seconds = run_round(n);
    c.probe_iterations += n;
    const bool long_enough = seconds >= measurable;
    // Past the cap a longer probe changes nothing: number would be capped anyway.
    const bool capped = n >= kMaxCalibratedNumber;
    if ((long_enough && round >= 1) || capped) {
      c.seconds_per_iteration = std::max(seconds, 0.0) / n;
      break;
    }
    if (!long_enough) n = static_cast<int>(std::min<long>(2L * n, kMaxCalibratedNumber));
  }
  c.number = number_for(min_time, c.seconds_per_iteration);
  return c;
}

int number_for(double min_time, double seconds_per_iteration) {
  const double wanted = seconds_per_iteration > 0 ? std::ceil(min_time / seconds_per_iteration)
                                                  : static_cast<double>(kMaxCalibratedNumber);
  return static_cast<int>(std::clamp(wanted, 1.0, static_cast<double>(kMaxCalibratedNumber)));
}

}  // namespace mlbench::core
