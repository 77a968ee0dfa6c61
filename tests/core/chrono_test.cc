#include "core/chrono.h"

#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {

TEST(Chrono, NestedStagesRecordParentAndDurations) {
  Chrono chrono;
  for (int i = 0; i < 3; ++i) {
    auto outer = chrono.time("train");
    {
      auto inner = chrono.time("compute");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  EXPECT_EQ(chrono.stage("train").count(), 3u);
  EXPECT_EQ(chrono.stage("compute").count(), 3u);
  EXPECT_EQ(chrono.parent("compute"), "train");
  EXPECT_EQ(chrono.parent("train"), "");
  EXPECT_GE(chrono.stage("compute").min(), 0.002);
  EXPECT_GE(chrono.stage("train").mean(), chrono.stage("compute").mean());
  const auto names = chrono.names();
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0], "train");
  const nlohmann::json j = chrono.to_json();
  EXPECT_EQ(j["compute"]["parent"], "train");
  EXPECT_FALSE(j["train"].contains("parent"));
  EXPECT_EQ(j["train"]["count"], 3);
}

TEST(Chrono, WarmupIsDroppedPerStage) {
  Chrono chrono(2);
  for (int i = 0; i < 5; ++i) auto s = chrono.time("train");
  EXPECT_EQ(chrono.stage("train").seen(), 5u);
  EXPECT_EQ(chrono.stage("train").count(), 3u);
}

TEST(Chrono, SyncHookRunsAtEveryStageEdge) {
  int calls = 0;
  Chrono chrono(0, [&] { ++calls; });
  {
    auto a = chrono.time("a");
    auto b = chrono.time("b");
  }
  EXPECT_EQ(calls, 4);  // two starts, two stops
}

TEST(Chrono, StopEndsOnceAndReturnsDuration) {
  Chrono chrono;
  auto s = chrono.time("x");
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GE(s.stop(), 0.001);
  EXPECT_EQ(s.stop(), 0.0);
  EXPECT_EQ(chrono.stage("x").count(), 1u);
}

SteadyTime fake_time;
SteadyTime fake_now() {
  return fake_time;
}

TEST(Chrono, InjectedClockGivesExactDurations) {
  Chrono chrono(0, {}, &fake_now);
  for (int i = 1; i <= 3; ++i) {
    auto outer = chrono.time("train");
    fake_time += std::chrono::milliseconds(1);
    {
      auto inner = chrono.time("compute");
      fake_time += std::chrono::milliseconds(2 * i);
    }
  }
  EXPECT_DOUBLE_EQ(chrono.stage("compute").min(), 0.002);
  EXPECT_DOUBLE_EQ(chrono.stage("compute").max(), 0.006);
  EXPECT_DOUBLE_EQ(chrono.stage("train").mean(), 0.005);
  auto s = chrono.time("x");
  fake_time += std::chrono::microseconds(250);
  EXPECT_DOUBLE_EQ(s.stop(), 0.00025);
}

TEST(Chrono, UnknownStageThrows) {
  Chrono chrono;
  EXPECT_THROW(chrono.stage("nope"), std::out_of_range);
}

}  // namespace
}  // namespace mlbench::core
