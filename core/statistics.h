// Statistics used by every benchmark and by the report: a streaming
// accumulator that drops warm-up observations, and plain functions over vectors.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mlbench::core {

// A finite number as itself, NaN or infinity as null (JSON has neither).
nlohmann::json number_or_null(double x);

// Streaming mean / population sd / min / max over the observations kept after
// the first `drop_first` (the warm-up). min and max cover exactly the same
// observations as the mean (the Mila suite's accumulator leaked one dropped
// observation into them).
class StatAccumulator {
 public:
  explicit StatAccumulator(std::size_t drop_first = 0) : drop_first_(drop_first) {}

  void add(double x);

  std::size_t seen() const { return seen_; }      // every observation, warm-up included
  std::size_t count() const { return count_; }    // kept observations
  std::size_t dropped() const { return seen_ - count_; }
  double mean() const;                             // NaN when count() == 0
  double sd() const;                               // population sd; NaN when count() == 0
  double min() const;                              // NaN when count() == 0
  double max() const;                              // NaN when count() == 0
  double sum() const { return sum_; }              // of kept observations

  // {"avg","min","max","sd","count","unit"}; empty statistics are null.
  nlohmann::json to_json(const char* unit = "s") const;

 private:
  std::size_t drop_first_;
  std::size_t seen_ = 0;
  std::size_t count_ = 0;
  double mean_ = 0.0;
  double m2_ = 0.0;  // Welford's running sum of squared deviations
  double sum_ = 0.0;
  double min_ = 0.0;
  double max_ = 0.0;
};

// Plain functions. Each throws std::invalid_argument on an empty input (and
// where noted, on too few values) rather than returning a silent default.
double mean(std::span<const double> xs);
double sd_sample(std::span<const double> xs);      // n - 1 denominator; needs >= 2 values
double sd_population(std::span<const double> xs);  // n denominator
double median(std::span<const double> xs);
// Linear interpolation between closest ranks (numpy's default, pandas' quantile):
// position q * (n - 1) in the sorted values. q in [0, 1].
double quantile(std::span<const double> xs, double q);
// Mean after dropping one minimum and one maximum; needs >= 3 values.
double trimmed_mean(std::span<const double> xs);
// exp(mean(log x)); every value must be > 0.
double geometric_mean(std::span<const double> xs);

}  // namespace mlbench::core
