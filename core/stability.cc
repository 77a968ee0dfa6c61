// The report's `stability` block (see stability.h).
#include "stability.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <boost/math/statistics/bivariate_statistics.hpp>
#include <nlohmann/json.hpp>

#include "statistics.h"

namespace mlbench::core {

namespace {
// Ranks 1..n, ties given their mean rank.
std::vector<double> ranks(std::span<const double> xs) {
  std::vector<std::size_t> order(xs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return xs[a] < xs[b]; });
  std::vector<double> r(xs.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && xs[order[j + 1]] == xs[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (std::size_t k = i; k <= j; ++k) r[order[k]] = mean_rank;
    i = j + 1;
  }
  return r;
}
}  // namespace

double spearman_vs_index(std::span<const double> xs) {
  if (xs.size() < 2) return 0.0;
  const std::vector<double> rx = ranks(xs);
  if (std::all_of(rx.begin(), rx.end(), [&](double r) { return r == rx.front(); })) return 0.0;
  std::vector<double> index(xs.size());
  std::iota(index.begin(), index.end(), 1.0);
  return boost::math::statistics::correlation_coefficient(index, rx);
}

Stability stability_of(std::span<const double> kept) {
  Stability s;
  s.observations = static_cast<int>(kept.size());
  if (kept.empty()) return s;
  const double m = mean(kept);
  s.sd_pct = m > 0 ? 100.0 * sd_population(kept) / m : 0.0;
  s.min_s = *std::min_element(kept.begin(), kept.end());
  s.max_s = *std::max_element(kept.begin(), kept.end());
  s.median_s = median(kept);
  s.short_observations = s.median_s < kShortObservationS;
  if (kept.size() >= 2) {
    const std::size_t half = kept.size() / 2;  // an odd middle observation belongs to neither half
    const double first = median(kept.first(half));
    const double second = median(kept.last(half));
    s.trend_pct = first > 0 ? 100.0 * (second / first - 1.0) : 0.0;
    s.rho = spearman_vs_index(kept);
  }
  s.warmup_trending = s.observations >= kWarmupTrendMinObservations && std::abs(s.trend_pct) > kWarmupTrendPct &&
                      std::abs(s.rho) >= kWarmupTrendRho && (s.trend_pct > 0) == (s.rho > 0);
  return s;
}

StabilityInfo Stability::info() const {
  auto stat = [this](double v) { return observations > 0 ? std::optional<double>(v) : std::nullopt; };
  return {.observations = observations,
          .sd_pct = stat(sd_pct),
          .min_s = stat(min_s),
          .max_s = stat(max_s),
          .median_s = stat(median_s),
          .trend_pct = stat(trend_pct),
          .rho = stat(rho),
          .warmup_trending = warmup_trending,
          .short_observations = short_observations};
}

}  // namespace mlbench::core
