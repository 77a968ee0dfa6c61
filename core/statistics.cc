#include "statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void require(std::span<const double> xs, std::size_t at_least, const char* what) {
  if (xs.size() < at_least) {
    throw std::invalid_argument(std::string(what) + " needs at least " + std::to_string(at_least) +
                                " value(s), got " + std::to_string(xs.size()));
  }
}
}  // namespace

nlohmann::json number_or_null(double x) {
  return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json();
}

void StatAccumulator::add(double x) {
  ++seen_;
  if (seen_ <= drop_first_) return;
  ++count_;
  sum_ += x;
  if (count_ == 1) {
    min_ = max_ = x;
  } else {
    min_ = std::min(min_, x);
    max_ = std::max(max_, x);
  }
  const double delta = x - mean_;
  mean_ += delta / static_cast<double>(count_);
  m2_ += delta * (x - mean_);
}

double StatAccumulator::mean() const { return count_ ? mean_ : kNaN; }
double StatAccumulator::sd() const { return count_ ? std::sqrt(m2_ / static_cast<double>(count_)) : kNaN; }
double StatAccumulator::min() const { return count_ ? min_ : kNaN; }
double StatAccumulator::max() const { return count_ ? max_ : kNaN; }

nlohmann::json StatAccumulator::to_json(const char* unit) const {
  return {{"avg", number_or_null(mean())}, {"min", number_or_null(min())}, {"max", number_or_null(max())},
          {"sd", number_or_null(sd())},    {"count", count_},              {"unit", unit}};
}

double mean(std::span<const double> xs) {
  require(xs, 1, "mean");
  return std::accumulate(xs.begin(), xs.end(), 0.0) / static_cast<double>(xs.size());
}

static double sum_sq_dev(std::span<const double> xs) {
  const double m = mean(xs);
  double s = 0.0;
  for (double x : xs) s += (x - m) * (x - m);
  return s;
}

double sd_sample(std::span<const double> xs) {
  require(xs, 2, "sample sd");
  return std::sqrt(sum_sq_dev(xs) / static_cast<double>(xs.size() - 1));
}

double sd_population(std::span<const double> xs) {
  require(xs, 1, "population sd");
  return std::sqrt(sum_sq_dev(xs) / static_cast<double>(xs.size()));
}

double median(std::span<const double> xs) { return quantile(xs, 0.5); }

double quantile(std::span<const double> xs, double q) {
  require(xs, 1, "quantile");
  if (!(q >= 0.0 && q <= 1.0)) throw std::invalid_argument("quantile q must be in [0, 1]");
  std::vector<double> v(xs.begin(), xs.end());
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

double trimmed_mean(std::span<const double> xs) {
  require(xs, 3, "trimmed mean");
  // Sum only the middle values: subtracting min and max from the full sum cancels
  // (one 1e308 among values near 1000 gave 0.0).
  std::vector<double> sorted(xs.begin(), xs.end());
  std::sort(sorted.begin(), sorted.end());
  const double total = std::accumulate(sorted.begin() + 1, sorted.end() - 1, 0.0);
  return total / static_cast<double>(sorted.size() - 2);
}

double geometric_mean(std::span<const double> xs) {
  require(xs, 1, "geometric mean");
  double log_sum = 0.0;
  for (double x : xs) {
    if (!(x > 0.0)) throw std::invalid_argument("geometric mean needs values > 0");
    log_sum += std::log(x);
  }
  return std::exp(log_sum / static_cast<double>(xs.size()));
}

}  // namespace mlbench::core
