// stall/executor.h's read_outcome: a run's rate from its report, and the median observation's
// rate where a stall of the host made one or two observations several times longer.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "stall/executor.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace mlbench::stall;

// A completed report of `seconds` per observation, each `number` batches of `batch` samples,
// with the fields a benchmark writes: train (seconds), train_item (samples/s) and stability.
nlohmann::json report_of(const std::vector<double>& seconds, int number, int batch) {
  const double items = static_cast<double>(number) * batch;
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0, rates = 0;
  for (double s : seconds) {
    sum += s;
    rates += items / s;
  }
  const double n = static_cast<double>(seconds.size()), mean = sum / n;
  double var = 0;
  for (double s : seconds) var += (s - mean) * (s - mean);
  const std::size_t m = sorted.size() / 2;
  const double median = sorted.size() % 2 ? sorted[m] : (sorted[m - 1] + sorted[m]) / 2;
  return {
      {"completed", true},
      {"number", number},
      {"batch_size", batch},
      {"train",
       {{"avg", mean},
        {"count", seconds.size()},
        {"min", sorted.front()},
        {"max", sorted.back()},
        {"sd", std::sqrt(var / (n - 1))},
        {"unit", "s"}}},
      {"train_item",
       {{"avg", rates / n}, {"min", items / sorted.back()}, {"max", items / sorted.front()}, {"unit", "items/sec"}}},
      {"stability",
       {{"median_s", median}, {"min_s", sorted.front()}, {"max_s", sorted.back()}, {"observations", seconds.size()}}}};
}

RunOutcome read(const nlohmann::json& report) {
  mlbench::testing_support::TempDir dir("read_outcome");
  std::ofstream(dir.path() / "mlbench.sim.R0.D0.json") << report.dump();
  return read_outcome(dir.path(), "cached");
}

TEST(ReadOutcome, AHostStallInTwoObservationsLeavesTheRateAtTheMedianObservation) {
  // A busy host stalls a few observations of a short run: stallsim's cached run (1,000/s injected:
  // 6 batches of 4 in 24 ms) then measured far less by the mean of its rates, and the split showed a
  // prep stall where there was none. Here 8 observations of 24 ms and 2 stalled to 80 ms: the mean of
  // the rates is 860/s, the median observation's 1,000/s.
  std::vector<double> seconds(8, 0.024);
  seconds.insert(seconds.begin() + 3, 0.080);
  seconds.push_back(0.080);
  const RunOutcome stalled = read(report_of(seconds, 6, 4));
  EXPECT_NEAR(stalled.rate, 1000.0, 1e-9);
  EXPECT_NE(stalled.rate_from.find("median observation (the slowest took 3.3x the median"), std::string::npos)
      << stalled.rate_from;
  EXPECT_NE(stalled.rate_from.find("mean of the observations 860.0/s"), std::string::npos) << stalled.rate_from;
  EXPECT_GT(stalled.cv, 0.5);  // the noise stays what it was
  // A steady run keeps the mean of its observations (the slowest 1.5x the median is no stall).
  const std::vector<double> steady{0.024, 0.025, 0.023, 0.036, 0.024};
  const auto steady_report = report_of(steady, 6, 4);
  const RunOutcome kept = read(steady_report);
  EXPECT_DOUBLE_EQ(kept.rate, steady_report["train_item"]["avg"].get<double>());
  EXPECT_TRUE(kept.rate_from.empty());
}

TEST(ReadOutcome, TheMeanStandsWhereTheMedianCannotBeTrusted) {
  std::vector<double> seconds(8, 0.024);
  seconds.push_back(0.080);
  // Two observations: no median apart from their mean.
  EXPECT_TRUE(read(report_of({0.024, 0.080}, 6, 4)).rate_from.empty());
  // Samples that are not number x batch_size (a benchmark counting frames, say): the fastest
  // observation's rate does not match, so the median observation's items are unknown.
  auto frames = report_of(seconds, 6, 4);
  frames["train_item"]["max"] = 4 * frames["train_item"]["max"].get<double>();
  frames["train_item"]["avg"] = 4 * frames["train_item"]["avg"].get<double>();
  const RunOutcome f = read(frames);
  EXPECT_TRUE(f.rate_from.empty());
  EXPECT_DOUBLE_EQ(f.rate, frames["train_item"]["avg"].get<double>());
  // A report written before `stability`: the mean.
  auto old = report_of(seconds, 6, 4);
  old.erase("stability");
  EXPECT_TRUE(read(old).rate_from.empty());
  EXPECT_FALSE(median_observation_rate(nlohmann::json::object()).has_value());
}

}  // namespace
