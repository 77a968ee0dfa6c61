#include "core/report.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {

TEST(TrainItem, DerivedFromTrainStage) {
  StatAccumulator train;
  for (double t : {0.5, 1.0, 0.25}) train.add(t);  // mean 0.5833
  const TrainItem t = train_item(train, 100.0);
  EXPECT_NEAR(t.avg.value_or(0), 100.0 / (1.75 / 3), 1e-9);
  EXPECT_DOUBLE_EQ(t.max.value_or(0), 400.0);  // fastest observation
  EXPECT_DOUBLE_EQ(t.min.value_or(0), 100.0);  // slowest observation
  EXPECT_DOUBLE_EQ(t.range.value_or(0), 300.0);
  EXPECT_EQ(t.unit, "items/sec");
  EXPECT_FALSE(train_item(StatAccumulator(), 10.0).avg);
}

TEST(ProcessCpu, PerItemAndBusyCpusFromTheKeptObservations) {
  const ProcessCpuBlock c = process_cpu(3.0, 1.0, 2.0, 8000.0);
  EXPECT_DOUBLE_EQ(c.user_s.value_or(0), 3.0);
  EXPECT_DOUBLE_EQ(c.sys_s.value_or(0), 1.0);
  EXPECT_DOUBLE_EQ(c.busy_cpus.value_or(0), 2.0);            // 4 s of CPU in 2 s
  EXPECT_DOUBLE_EQ(c.per_item_us.value_or(0), 500.0);        // 4 s over 8,000 items
  EXPECT_FALSE(process_cpu(1.0, 1.0, 0.0, 10.0).busy_cpus);  // nothing kept
  EXPECT_FALSE(process_cpu(1.0, 1.0, 1.0, 0.0).per_item_us);
}

TEST(StatsOf, ATimerWithoutObservationsHasNoFigures) {
  StatAccumulator s;
  EXPECT_FALSE(stats_of(s).avg);
  EXPECT_EQ(stats_of(s).unit, "s");
  s.add(2.0);
  s.add(4.0);
  const Stats st = stats_of(s, "ms");
  EXPECT_DOUBLE_EQ(st.avg.value_or(0), 3.0);
  EXPECT_EQ(st.count, 2);
  EXPECT_EQ(st.unit, "ms");
}

}  // namespace
}  // namespace mlbench::core
