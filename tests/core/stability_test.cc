// The report's stability block: spread, warm-up trend and short observations of
// fixed observation series.
#include "core/stability.h"

#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {

TEST(Stability, FlatObservationsAreStableAndNotTrending) {
  const std::vector<double> xs{0.30, 0.31, 0.30, 0.29, 0.30, 0.31, 0.30, 0.29};
  const Stability s = stability_of(xs);
  EXPECT_EQ(s.observations, 8);
  EXPECT_LT(s.sd_pct, 5.0);
  EXPECT_FALSE(s.unstable());
  EXPECT_FALSE(s.warmup_trending);
  EXPECT_FALSE(s.short_observations);
  EXPECT_DOUBLE_EQ(s.min_s, 0.29);
  EXPECT_DOUBLE_EQ(s.max_s, 0.31);
  EXPECT_DOUBLE_EQ(s.median_s, 0.30);
  EXPECT_NEAR(s.trend_pct, 0.0, 1e-9);
}

TEST(Stability, ObservationsThatKeepFallingAreWarmupTrending) {
  const std::vector<double> xs{0.50, 0.47, 0.44, 0.42, 0.40, 0.39, 0.38, 0.37};
  const Stability s = stability_of(xs);
  EXPECT_TRUE(s.warmup_trending);
  EXPECT_LT(s.trend_pct, -kWarmupTrendPct);
  EXPECT_DOUBLE_EQ(s.rho, -1.0);
  // median(0.40, 0.39, 0.38, 0.37) / median(0.50, 0.47, 0.44, 0.42) - 1
  EXPECT_NEAR(s.trend_pct, 100.0 * (0.385 / 0.455 - 1.0), 1e-9);
}

TEST(Stability, ASlowingRunTrendsUpwards) {
  const std::vector<double> xs{0.30, 0.31, 0.33, 0.34, 0.36, 0.38};
  const Stability s = stability_of(xs);
  EXPECT_TRUE(s.warmup_trending);
  EXPECT_GT(s.trend_pct, kWarmupTrendPct);
}

TEST(Stability, OneOutlierIsSpreadNotATrend) {
  const std::vector<double> xs{0.30, 0.30, 0.45, 0.30, 0.31, 0.30, 0.30, 0.30};
  const Stability s = stability_of(xs);
  EXPECT_TRUE(s.unstable());
  EXPECT_FALSE(s.warmup_trending);
}

TEST(Stability, AStepWithinNoiseIsNotATrend) {
  // Falls monotonically but by 1%: below the trend threshold.
  const std::vector<double> xs{0.303, 0.302, 0.301, 0.300, 0.299, 0.298};
  EXPECT_FALSE(stability_of(xs).warmup_trending);
}

TEST(Stability, TooFewObservationsGiveNoTrendVerdict) {
  const std::vector<double> xs{0.5, 0.4, 0.3, 0.2};
  const Stability s = stability_of(xs);
  EXPECT_LT(s.trend_pct, -kWarmupTrendPct);
  EXPECT_FALSE(s.warmup_trending);
}

TEST(Stability, ShortObservationsAreFlagged) {
  const std::vector<double> xs(6, 0.0008);  // toy_reg's 20 iterations: 0.8 ms
  const Stability s = stability_of(xs);
  EXPECT_TRUE(s.short_observations);
  EXPECT_FALSE(stability_of(std::vector<double>(6, kShortObservationS)).short_observations);
}

TEST(Stability, NoObservationsGiveNoStatistics) {
  const StabilityInfo s = stability_of({}).info();
  EXPECT_EQ(s.observations, 0);
  EXPECT_FALSE(s.sd_pct);
  EXPECT_FALSE(s.median_s);
  EXPECT_FALSE(s.warmup_trending);
  EXPECT_FALSE(s.short_observations);
}

TEST(Stability, TheReportBlockHasTheSchemaFields) {
  const std::vector<double> xs{0.2, 0.3};
  InstanceReport r;
  r.stability = stability_of(xs).info();
  const nlohmann::json j = to_json(r)["stability"];
  for (const char* key :
       {"observations", "sd_pct", "min_s", "max_s", "median_s", "trend_pct", "warmup_trending", "short_observations"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_NEAR(j["sd_pct"].get<double>(), 20.0, 1e-9);  // population sd 0.05 over mean 0.25
}

TEST(Stability, SpearmanGivesTiesTheirMeanRank) {
  const std::vector<double> rising{1, 2, 2, 3};
  EXPECT_GT(spearman_vs_index(rising), 0.9);
  const std::vector<double> flat{1, 1, 1};
  EXPECT_EQ(spearman_vs_index(flat), 0.0);
}

}  // namespace
}  // namespace mlbench::core
