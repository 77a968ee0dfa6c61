#include "core/report.h"
#include "core/process.h"

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

namespace {
// The machine's busy CPU time: the aggregate "cpu" line's user + nice + system + irq + softirq.
TEST(Report, HostBusyCpusIsTheMachinesBusyTimeOverTheWindow) {
  using namespace mlbench::core;
  const auto busy = host_busy_seconds("cpu  100 20 30 1000 50 5 5 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n", 100);
  ASSERT_TRUE(busy);
  EXPECT_DOUBLE_EQ(*busy, 1.6);  // 160 ticks of user, nice, system, irq and softirq; idle and iowait not
  EXPECT_FALSE(host_busy_seconds("intr 1 2 3\n", 100));
  EXPECT_FALSE(host_busy_seconds("cpu  1 2\n", 100));
  EXPECT_FALSE(host_busy_seconds("cpu  1 2 3 4 5 6 7\n", 0));
  const ProcessCpuBlock c = process_cpu(1.0, 0.5, 2.0, 100.0, 3.0);
  EXPECT_DOUBLE_EQ(c.host_busy_cpus.value_or(0), 1.5);
  EXPECT_FALSE(process_cpu(1.0, 0.5, 2.0, 100.0).host_busy_cpus);  // not read
}
}  // namespace
