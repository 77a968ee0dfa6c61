#include "core/train_loop.h"

#include <cmath>
#include <thread>
#include <utility>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {

void spin_for(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
  }
}

TEST(TrainLoop, RunsRepeatTimesNumberIterationsAndDropsWarmup) {
  LoopConfig cfg;
  cfg.repeat = 5;
  cfg.number = 4;
  cfg.warmup = 2;
  int calls = 0;
  LoopResult r;
  TrainLoop(cfg).run(
      [&](Iteration& it) {
        ++calls;
        it.set_loss([] { return 1.0; });
      },
      r);
  EXPECT_EQ(calls, 20);
  EXPECT_EQ(r.iterations, 20);
  EXPECT_EQ(r.chrono.stage("train").seen(), 5u);
  EXPECT_EQ(r.chrono.stage("train").count(), 3u);
  EXPECT_EQ(r.iteration.count(), 12u);  // (5 - 2) * 4
  EXPECT_EQ(r.phases().warmup_iterations, 8);
  EXPECT_EQ(r.epoch_loss.size(), 5u);
  EXPECT_EQ(r.batch_loss.size(), 20u);
}

// A clock that moves only when the test says: phase durations and the stall
// share are exact, whatever the machine's load.
SteadyTime fake_time;
SteadyTime fake_now() {
  return fake_time;
}
void advance(double seconds) {
  fake_time += std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

// A process CPU clock that moves only when the test says.
ProcessCpu fake_cpu;
ProcessCpu fake_cpu_now() {
  return fake_cpu;
}

TEST(TrainLoop, ProcessCpuCountsOnlyTheKeptObservations) {
  LoopConfig cfg;
  cfg.repeat = 4;
  cfg.number = 2;
  cfg.warmup = 1;
  cfg.now = &fake_now;
  cfg.cpu_now = &fake_cpu_now;
  fake_cpu = {10.0, 5.0, std::nullopt};
  LoopResult r;
  int calls = 0;
  TrainLoop(cfg).run(
      [&](Iteration& it) {
        // The warm-up's two iterations burn 100 s of CPU that must not count; every
        // kept iteration 0.5 s user and 0.25 s system.
        const bool warm = calls++ < 2;
        fake_cpu.user_s += warm ? 100.0 : 0.5;
        fake_cpu.sys_s += warm ? 100.0 : 0.25;
        advance(0.25);
        it.set_loss([] { return 1.0; });
      },
      r);
  EXPECT_NEAR(r.kept_cpu.user_s, 3.0, 1e-9);  // 3 kept observations x 2 iterations x 0.5
  EXPECT_NEAR(r.kept_cpu.sys_s, 1.5, 1e-9);
}

// A device timeline that checks the loop's contract: marks only on the kept
// iterations, in phase order, and read only after the observation's sync.
class FakeTimeline : public DeviceTimeline {
 public:
  explicit FakeTimeline(const int& syncs) : syncs_(syncs) {}
  void begin(PhaseKind p) override { open_.push_back(static_cast<int>(p)); }
  void end(PhaseKind p) override {
    ASSERT_FALSE(open_.empty());
    EXPECT_EQ(open_.back(), static_cast<int>(p));
    const int k = static_cast<int>(p);
    current_[k] = 0.001 * (k + 1) * static_cast<double>(ended_ + 1);  // wait 1, h2d 2, compute 3 ms x iteration
  }
  void end_iteration() override {
    pending_.push_back(current_);
    current_ = {};
    ++ended_;
  }
  std::vector<std::array<double, 3>> take() override {
    EXPECT_GT(syncs_, syncs_at_last_take_) << "marks read before the device was synchronised";
    syncs_at_last_take_ = syncs_;
    ++takes;
    return std::exchange(pending_, {});
  }
  int takes = 0;
  std::vector<int> open_;

 private:
  const int& syncs_;
  int syncs_at_last_take_ = 0;
  int ended_ = 0;
  std::array<double, 3> current_{};
  std::vector<std::array<double, 3>> pending_;
};

TEST(TrainLoop, DeviceTimelineTimesTheKeptPhasesAfterEachObservationsSync) {
  int syncs = 0;
  auto timeline = std::make_shared<FakeTimeline>(syncs);
  LoopConfig cfg;
  cfg.repeat = 3;
  cfg.number = 2;
  cfg.warmup = 1;
  cfg.now = &fake_now;
  cfg.sync = [&] { ++syncs; };
  cfg.device_timeline = timeline;
  LoopResult r;
  TrainLoop(cfg).run(
      [&](Iteration& it) {
        it.wait([] { advance(1.0); });  // host times that must not be used
        it.h2d([] { advance(1.0); });
        it.compute([] { advance(1.0); });
      },
      r);
  // Warm-up iterations mark nothing: 2 kept observations x 2 iterations x 3 phases.
  EXPECT_EQ(timeline->open_.size(), 12u);
  EXPECT_EQ(timeline->takes, 2);
  EXPECT_EQ(r.wait.count(), 4u);
  EXPECT_NEAR(r.wait.sum(), 0.001 * (1 + 2 + 3 + 4), 1e-12);
  EXPECT_NEAR(r.h2d.sum(), 0.002 * 10, 1e-12);
  EXPECT_NEAR(r.compute.sum(), 0.003 * 10, 1e-12);
  EXPECT_NEAR(r.iteration.sum(), 0.006 * 10, 1e-12);
  EXPECT_NEAR(r.stall_pct(), 100.0 / 6.0, 1e-9);
  EXPECT_EQ(r.phases().phase_clock, "device");
}

TEST(TrainLoop, PhasesAreTimedAndStallPctIsWaitShare) {
  LoopConfig cfg;
  cfg.repeat = 2;
  cfg.number = 3;
  cfg.now = &fake_now;
  LoopResult r;
  TrainLoop(cfg).run(
      [&](Iteration& it) {
        const int v = it.wait([] {
          advance(0.003);
          return 7;
        });
        EXPECT_EQ(v, 7);
        it.h2d([] { advance(0.0005); });
        it.compute([] { advance(0.0015); });
        advance(0.25);  // time outside the phases belongs to no phase
      },
      r);
  EXPECT_DOUBLE_EQ(r.wait.min(), 0.003);
  EXPECT_DOUBLE_EQ(r.wait.max(), 0.003);
  EXPECT_DOUBLE_EQ(r.h2d.mean(), 0.0005);
  EXPECT_DOUBLE_EQ(r.compute.mean(), 0.0015);
  EXPECT_DOUBLE_EQ(r.iteration.mean(), 0.005);
  EXPECT_EQ(r.iteration.count(), 6u);
  const double pct = r.stall_pct();
  EXPECT_NEAR(pct, 60.0, 1e-9);  // 3 ms of 5 ms
  EXPECT_DOUBLE_EQ(r.phases().stall_pct.value_or(0), pct);
  // The train stage reads the same clock: 3 iterations of 255 ms each.
  EXPECT_NEAR(r.chrono.stage("train").mean(), 3 * 0.255, 1e-12);
  EXPECT_EQ(r.phases().phase_clock, "host");  // no device timeline: the host's clock
}

TEST(TrainLoop, RealClockTimesEveryPhase) {
  // The default clock: lower bounds only, which hold however loaded the machine.
  LoopConfig cfg;
  cfg.repeat = 2;
  cfg.number = 3;
  LoopResult r;
  TrainLoop(cfg).run(
      [&](Iteration& it) {
        it.wait([] { spin_for(0.003); });
        it.h2d([] {});
        it.compute([] { spin_for(0.001); });
      },
      r);
  EXPECT_GE(r.wait.min(), 0.003);
  EXPECT_GE(r.compute.min(), 0.001);
  EXPECT_GE(r.iteration.min(), 0.004);
  EXPECT_GT(r.stall_pct(), 0.0);
  EXPECT_LT(r.stall_pct(), 100.0);
  EXPECT_GE(r.chrono.stage("train").min(), 3 * 0.004);
  // And the process CPU clock saw the spinning (24 ms of it in the kept observations).
  EXPECT_GT(r.kept_cpu.user_s + r.kept_cpu.sys_s, 0.0);
}

TEST(TrainLoop, BatchLossKeepsTheLastHundred) {
  LoopConfig cfg;
  cfg.repeat = 3;
  cfg.number = 50;
  LoopResult r;
  int i = 0;
  TrainLoop(cfg).run([&](Iteration& it) { it.set_loss([v = i++] { return static_cast<double>(v); }); }, r);
  ASSERT_EQ(r.batch_loss.size(), 100u);
  EXPECT_EQ(r.batch_loss.front(), 50.0);
  EXPECT_EQ(r.batch_loss.back(), 149.0);
  EXPECT_DOUBLE_EQ(r.epoch_loss[0], 24.5);
}

TEST(TrainLoop, NonFiniteLossEndsTheRunNamingWhere) {
  LoopConfig cfg;
  cfg.repeat = 4;
  cfg.number = 2;
  LoopResult r;
  int i = 0;
  try {
    TrainLoop(cfg).run(
        [&](Iteration& it) {
          const int k = i++;
          it.set_loss([k] { return k == 5 ? std::nan("") : 1.0; });
        },
        r);
    FAIL() << "expected NonFiniteLoss";
  } catch (const NonFiniteLoss& e) {
    EXPECT_STREQ(e.what(), "loss is nan at repeat 2 iteration 1");
  }
  EXPECT_EQ(r.epoch_loss.size(), 2u);  // what was measured before stays
}

TEST(TrainLoop, InterruptStopsBeforeTheNextIteration) {
  LoopConfig cfg;
  cfg.repeat = 10;
  cfg.number = 10;
  int calls = 0;
  cfg.interrupted = [&] { return calls >= 7 ? 2 : 0; };
  LoopResult r;
  EXPECT_THROW(TrainLoop(cfg).run([&](Iteration&) { ++calls; }, r), Interrupted);
  EXPECT_EQ(calls, 7);
}

TEST(TrainLoop, StepExceptionsPropagate) {
  LoopConfig cfg;
  LoopResult r;
  EXPECT_THROW(TrainLoop(cfg).run([](Iteration&) { throw std::runtime_error("corrupt batch"); }, r),
               std::runtime_error);
}

TEST(TrainLoop, OnIterationSeesEveryIterationInOrder) {
  LoopConfig cfg;
  cfg.repeat = 2;
  cfg.number = 3;
  std::vector<long> seen;
  cfg.on_iteration = [&](long i, const Iteration&) { seen.push_back(i); };
  LoopResult r;
  TrainLoop(cfg).run([](Iteration&) {}, r);
  EXPECT_EQ(seen, (std::vector<long>{0, 1, 2, 3, 4, 5}));
}

TEST(TrainLoop, MinTimeCalibratesNumberWithUntimedProbeIterations) {
  LoopConfig cfg;
  cfg.repeat = 4;
  cfg.number = 3;  // ignored: calibrated
  cfg.warmup = 1;
  cfg.min_time = 0.2;
  cfg.now = &fake_now;
  int syncs = 0;
  cfg.sync = [&] { ++syncs; };
  std::vector<long> seen;
  cfg.on_iteration = [&](long i, const Iteration&) { seen.push_back(i); };
  LoopResult r;
  TrainLoop(cfg).run(
      [&](Iteration& it) {
        it.compute([] { advance(0.004); });  // 4 ms per iteration
        it.set_loss([] { return 1.0; });
      },
      r);
  ASSERT_TRUE(r.calibration.has_value());
  // Probe rounds 1, 2, 4 (16 ms < 20 ms), 8 (32 ms): 15 iterations; ceil(0.2 / 0.004) = 50.
  EXPECT_EQ(r.calibration->probe_iterations, 15);
  EXPECT_DOUBLE_EQ(r.calibration->seconds_per_iteration, 0.004);
  EXPECT_EQ(r.calibration->number, 50);
  EXPECT_EQ(r.number, 50);
  EXPECT_EQ(r.iterations, 15 + 4 * 50);
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(r.iterations));
  // Probe and warm-up iterations are in no statistic; the warm-up observation is counted.
  EXPECT_EQ(r.iteration.count(), 150u);
  EXPECT_EQ(r.calibration->refinements, 1);  // the warm-up observation confirmed 50
  EXPECT_EQ(r.phases().warmup_iterations, 50);
  EXPECT_EQ(r.batch_loss.size(), 100u);  // the last 100 of the timed iterations only
  ASSERT_EQ(r.observations.size(), 4u);
  for (double o : r.observations) EXPECT_NEAR(o, 0.2, 1e-9);
  EXPECT_EQ(r.kept_observations().size(), 3u);
  EXPECT_NEAR(r.chrono.stage("train").mean(), 0.2, 1e-9);
  EXPECT_GE(syncs, 8);  // each probe round is synchronised at both edges
}

TEST(TrainLoop, WarmupObservationsRefineANumberTheSlowStartMisjudged) {
  // The first 4 iterations take 1/64 s (a pipeline filling, cold caches), the rest
  // 1/256 s: binary fractions, so every sum below is exact.
  LoopConfig cfg;
  cfg.repeat = 5;
  cfg.warmup = 2;
  cfg.min_time = 0.25;
  cfg.now = &fake_now;
  long index = 0;
  LoopResult r;
  TrainLoop(cfg).run(
      [&](Iteration& it) {
        it.compute([&] { advance(index++ < 4 ? 1.0 / 64 : 1.0 / 256); });
      },
      r);
  ASSERT_TRUE(r.calibration.has_value());
  // Probe: 1 slow (< 10% of 0.25 s), then 2 slow (1/32 s): number ceil(0.25 * 64) = 16.
  EXPECT_EQ(r.calibration->probe_iterations, 3);
  // Warm-up 1: 1 slow + 15 fast = 19/256 s over 16 -> ceil(0.25 * 4096 / 19) = 54.
  // Warm-up 2: 54 fast -> 1/256 s each -> 64, the number of every kept observation.
  EXPECT_EQ(r.calibration->refinements, 2);
  EXPECT_EQ(r.calibration->number, 64);
  EXPECT_EQ(r.number, 64);
  EXPECT_DOUBLE_EQ(r.calibration->seconds_per_iteration, 1.0 / 256);
  ASSERT_EQ(r.observations.size(), 5u);
  EXPECT_DOUBLE_EQ(r.observations[0], 19.0 / 256);
  EXPECT_DOUBLE_EQ(r.observations[1], 54.0 / 256);
  for (double o : r.kept_observations()) EXPECT_DOUBLE_EQ(o, 0.25);
  EXPECT_EQ(r.warmup_iterations, 16 + 54);
  EXPECT_EQ(r.phases().warmup_iterations, 70);
  EXPECT_EQ(r.iteration.count(), 3u * 64u);
  EXPECT_EQ(r.iterations, 3 + 70 + 3 * 64);
  EXPECT_DOUBLE_EQ(r.chrono.stage("train").mean(), 0.25);
}

TEST(TrainLoop, WithoutMinTimeTheNumberIsKeptAndNotCalibrated) {
  LoopConfig cfg;
  cfg.repeat = 3;
  cfg.number = 7;
  cfg.now = &fake_now;
  LoopResult r;
  TrainLoop(cfg).run([](Iteration& it) { it.compute([] { advance(0.001); }); }, r);
  EXPECT_FALSE(r.calibration.has_value());
  EXPECT_EQ(r.number, 7);
  EXPECT_EQ(r.iterations, 21);
  ASSERT_EQ(r.observations.size(), 3u);
  EXPECT_NEAR(r.observations[0], 0.007, 1e-9);
}

TEST(TrainLoop, NonFiniteLossInTheProbeEndsTheRun) {
  LoopConfig cfg;
  cfg.repeat = 2;
  cfg.min_time = 0.1;
  cfg.now = &fake_now;
  LoopResult r;
  EXPECT_THROW(TrainLoop(cfg).run(
                   [](Iteration& it) {
                     advance(0.01);
                     it.set_loss([] { return std::nan(""); });
                   },
                   r),
               NonFiniteLoss);
}

}  // namespace
}  // namespace mlbench::core
