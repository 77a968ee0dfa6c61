#include "core/statistics.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {

TEST(StatAccumulator, KnownVectorWithoutWarmup) {
  StatAccumulator acc;
  for (double x : {2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0}) acc.add(x);
  EXPECT_EQ(acc.count(), 8u);
  EXPECT_DOUBLE_EQ(acc.mean(), 5.0);
  EXPECT_DOUBLE_EQ(acc.sd(), 2.0);  // population sd of the textbook example
  EXPECT_DOUBLE_EQ(acc.min(), 2.0);
  EXPECT_DOUBLE_EQ(acc.max(), 9.0);
  EXPECT_DOUBLE_EQ(acc.sum(), 40.0);
}

TEST(StatAccumulator, DropsWarmupFromEveryStatisticIncludingMinMax) {
  StatAccumulator acc(2);
  // The dropped observations are the extremes: min and max must not see them.
  for (double x : {100.0, 0.001, 3.0, 5.0, 4.0}) acc.add(x);
  EXPECT_EQ(acc.seen(), 5u);
  EXPECT_EQ(acc.count(), 3u);
  EXPECT_EQ(acc.dropped(), 2u);
  EXPECT_DOUBLE_EQ(acc.mean(), 4.0);
  EXPECT_DOUBLE_EQ(acc.min(), 3.0);
  EXPECT_DOUBLE_EQ(acc.max(), 5.0);
  EXPECT_NEAR(acc.sd(), std::sqrt(2.0 / 3.0), 1e-12);
}

TEST(StatAccumulator, SingleObservation) {
  StatAccumulator acc;
  acc.add(3.5);
  EXPECT_EQ(acc.count(), 1u);
  EXPECT_DOUBLE_EQ(acc.mean(), 3.5);
  EXPECT_DOUBLE_EQ(acc.sd(), 0.0);
  EXPECT_DOUBLE_EQ(acc.min(), 3.5);
  EXPECT_DOUBLE_EQ(acc.max(), 3.5);
}

TEST(StatAccumulator, ZeroObservationsAreNaNAndNullInJson) {
  StatAccumulator acc(3);
  acc.add(1.0);
  acc.add(2.0);
  EXPECT_EQ(acc.count(), 0u);
  EXPECT_TRUE(std::isnan(acc.mean()));
  EXPECT_TRUE(std::isnan(acc.sd()));
  EXPECT_TRUE(std::isnan(acc.min()));
  const nlohmann::json j = acc.to_json();
  EXPECT_TRUE(j["avg"].is_null());
  EXPECT_EQ(j["count"], 0);
  EXPECT_EQ(j["unit"], "s");
}

TEST(StatAccumulator, StableForLargeOffsets) {
  StatAccumulator acc;
  for (double x : {1e9 + 4, 1e9 + 7, 1e9 + 13, 1e9 + 16}) acc.add(x);
  EXPECT_DOUBLE_EQ(acc.mean(), 1e9 + 10);
  EXPECT_NEAR(acc.sd(), std::sqrt(22.5), 1e-6);
}

TEST(Statistics, MeanAndSd) {
  const std::vector<double> xs{2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(mean(xs), 5.0);
  EXPECT_DOUBLE_EQ(sd_population(xs), 2.0);
  EXPECT_NEAR(sd_sample(xs), std::sqrt(32.0 / 7.0), 1e-12);
}

TEST(Statistics, MedianOddAndEven) {
  EXPECT_DOUBLE_EQ(median(std::vector<double>{3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median(std::vector<double>{4, 1, 3, 2}), 2.5);
}

TEST(Statistics, QuantileIsLinearBetweenClosestRanks) {
  const std::vector<double> xs{10, 20, 30, 40, 50};
  EXPECT_DOUBLE_EQ(quantile(xs, 0.0), 10.0);
  EXPECT_DOUBLE_EQ(quantile(xs, 1.0), 50.0);
  EXPECT_DOUBLE_EQ(quantile(xs, 0.8), 42.0);   // position 3.2
  EXPECT_DOUBLE_EQ(quantile(xs, 0.25), 20.0);  // position 1.0
  EXPECT_DOUBLE_EQ(quantile(std::vector<double>{1, 2}, 0.5), 1.5);
  EXPECT_THROW(quantile(xs, 1.5), std::invalid_argument);
}

TEST(Statistics, TrimmedMeanDropsOneMinAndOneMax) {
  // Four runs, as mlbench-report's smallest accepted set.
  EXPECT_DOUBLE_EQ(trimmed_mean(std::vector<double>{1, 100, 10, 20}), 15.0);
  // Ties: only one copy of the extreme is dropped.
  EXPECT_DOUBLE_EQ(trimmed_mean(std::vector<double>{5, 5, 5, 9}), 5.0);
  EXPECT_THROW(trimmed_mean(std::vector<double>{1, 2}), std::invalid_argument);
}

TEST(Statistics, GeometricMean) {
  EXPECT_NEAR(geometric_mean(std::vector<double>{1, 4, 16}), 4.0, 1e-12);
  EXPECT_THROW(geometric_mean(std::vector<double>{1, 0}), std::invalid_argument);
}

TEST(Statistics, EmptyInputsThrow) {
  const std::vector<double> none;
  EXPECT_THROW(mean(none), std::invalid_argument);
  EXPECT_THROW(median(none), std::invalid_argument);
  EXPECT_THROW(sd_population(none), std::invalid_argument);
  EXPECT_THROW(sd_sample(std::vector<double>{1}), std::invalid_argument);
}

}  // namespace
}  // namespace mlbench::core
