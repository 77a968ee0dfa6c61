// --min-time calibration: probe rounds and the number they lead to, with the
// round's duration given by the test (no clock).
#include "core/calibration.h"

#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {

// Rounds whose iterations each take `per_iteration` seconds; records every round's n.
struct FakeRounds {
  double per_iteration;
  std::vector<int> rounds;
  double operator()(int n) {
    rounds.push_back(n);
    return per_iteration * n;
  }
};

TEST(Calibration, ShortIterationsGrowTheProbeGeometricallyThenFillMinTime) {
  FakeRounds f{40e-6, {}};  // toy_reg-like: 40 us per iteration
  const Calibration c = calibrate_number(0.2, std::ref(f));
  // Rounds double until one lasts >= 10% of 0.2 s = 20 ms: 512 * 40 us = 20.48 ms.
  EXPECT_EQ(f.rounds, (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}));
  EXPECT_EQ(c.probe_iterations, 1023);
  EXPECT_DOUBLE_EQ(c.seconds_per_iteration, 40e-6);
  EXPECT_EQ(c.number, 5000);  // ceil(0.2 / 40e-6)
  EXPECT_DOUBLE_EQ(c.target_s, 0.2);
}

TEST(Calibration, LongIterationsProbeTwiceAndGiveOne) {
  FakeRounds f{0.5, {}};
  const Calibration c = calibrate_number(0.2, std::ref(f));
  // Measurable at once, but the estimate is taken from a second round, not the first iteration.
  EXPECT_EQ(f.rounds, (std::vector<int>{1, 1}));
  EXPECT_EQ(c.number, 1);
  EXPECT_EQ(c.probe_iterations, 2);
}

TEST(Calibration, SlowFirstIterationDoesNotShrinkTheNumber) {
  // The first iteration pays for set-up (1 s), the rest take 30 ms.
  std::vector<int> rounds;
  bool first = true;
  const Calibration c = calibrate_number(0.2, [&](int n) {
    rounds.push_back(n);
    const double s = (first ? 1.0 + 0.03 * (n - 1) : 0.03 * n);
    first = false;
    return s;
  });
  EXPECT_EQ(rounds, (std::vector<int>{1, 1}));
  EXPECT_EQ(c.number, 7);  // ceil(0.2 / 0.03), not 1
}

TEST(Calibration, NumberIsCeilOfMinTimeOverSecondsPerIteration) {
  FakeRounds f{0.003, {}};
  const Calibration c = calibrate_number(0.5, std::ref(f));
  // 0.1 * 0.5 = 50 ms measurable: 16 * 3 ms = 48 ms is not, 32 * 3 ms = 96 ms is.
  EXPECT_EQ(f.rounds.back(), 32);
  EXPECT_EQ(c.number, 167);  // ceil(0.5 / 0.003) = ceil(166.67)
}

TEST(Calibration, AClockThatNeverMovesIsCappedNotEndless) {
  FakeRounds f{0.0, {}};
  const Calibration c = calibrate_number(0.2, std::ref(f));
  EXPECT_EQ(c.number, kMaxCalibratedNumber);
  EXPECT_EQ(f.rounds.back(), kMaxCalibratedNumber);
}

TEST(Calibration, TheReportBlockHasTheSchemaFields) {
  FakeRounds f{0.01, {}};
  InstanceReport r;
  r.calibration = calibrate_number(0.2, std::ref(f)).info();
  const nlohmann::json j = to_json(r)["calibration"];
  for (const char* key : {"number", "probe_iterations", "seconds_per_iteration", "target_s", "refinements"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["number"], 20);
}

TEST(Calibration, MinTimeMustBePositive) {
  FakeRounds f{0.01, {}};
  EXPECT_THROW(calibrate_number(0.0, std::ref(f)), std::invalid_argument);
}

}  // namespace
}  // namespace mlbench::core
