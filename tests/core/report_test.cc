#include "core/report.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {

TEST(TrainItem, DerivedFromTrainStage) {
  StatAccumulator train;
  for (double t : {0.5, 1.0, 0.25}) train.add(t);  // mean 0.5833
  const auto j = train_item(train, 100.0);
  EXPECT_NEAR(j["avg"].get<double>(), 100.0 / (1.75 / 3), 1e-9);
  EXPECT_DOUBLE_EQ(j["max"].get<double>(), 400.0);  // fastest observation
  EXPECT_DOUBLE_EQ(j["min"].get<double>(), 100.0);  // slowest observation
  EXPECT_DOUBLE_EQ(j["range"].get<double>(), 300.0);
  EXPECT_EQ(j["unit"], "items/sec");
  EXPECT_TRUE(train_item(StatAccumulator(), 10.0)["avg"].is_null());
}

TEST(ProcessCpu, PerItemAndBusyCpusFromTheKeptObservations) {
  const auto j = process_cpu(3.0, 1.0, 2.0, 8000.0);
  EXPECT_DOUBLE_EQ(j["user_s"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(j["sys_s"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["busy_cpus"].get<double>(), 2.0);                   // 4 s of CPU in 2 s
  EXPECT_DOUBLE_EQ(j["per_item_us"].get<double>(), 500.0);               // 4 s over 8,000 items
  EXPECT_TRUE(process_cpu(1.0, 1.0, 0.0, 10.0)["busy_cpus"].is_null());  // nothing kept
  EXPECT_TRUE(process_cpu(1.0, 1.0, 1.0, 0.0)["per_item_us"].is_null());
}

}  // namespace
}  // namespace mlbench::core
