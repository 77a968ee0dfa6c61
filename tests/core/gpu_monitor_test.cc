// The GPU monitor without a GPU: a fake source, an injected wait and clock (no
// test sleeps or depends on the machine's speed), and NVML's factory on a library
// that cannot load.
#include "core/gpu_monitor.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Hands out the readings it was given, in turn (the last one again when they run out).
class FakeSource : public GpuSource {
 public:
  explicit FakeSource(std::vector<GpuReading> readings, int* reads = nullptr)
      : readings_(std::move(readings)), reads_(reads) {}
  std::string device_name() const override { return "Fake GPU 80GB"; }
  GpuReading read() override {
    if (reads_ != nullptr) ++*reads_;
    const GpuReading r = readings_.at(std::min(next_, readings_.size() - 1));
    ++next_;
    return r;
  }

 private:
  std::vector<GpuReading> readings_;
  std::size_t next_ = 0;
  int* reads_;
};

std::vector<GpuSample> samples_of(const std::vector<GpuReading>& readings) {
  std::vector<GpuSample> out;
  for (std::size_t i = 0; i < readings.size(); ++i) out.push_back(GpuSample{static_cast<double>(i), readings[i]});
  return out;
}

TEST(GpuMonitor, SummaryOfFakeSamplesIsExact) {
  const auto samples = samples_of({{10, 1000, 100, 1200}, {50, 2000, 200, 1400}, {90, 3000, 300, 1990}});
  const GpuSummary s = summarize_gpu(samples, 0.5, "Fake GPU");
  EXPECT_EQ(s.samples, 3u);
  EXPECT_EQ(s.interval_s, 0.5);
  EXPECT_EQ(s.device, "Fake GPU");
  EXPECT_DOUBLE_EQ(s.util_pct.mean, 50.0);
  EXPECT_DOUBLE_EQ(s.util_pct.max, 90.0);
  EXPECT_DOUBLE_EQ(s.mem_used_mib.mean, 2000.0);
  EXPECT_DOUBLE_EQ(s.mem_used_mib.max, 3000.0);
  EXPECT_DOUBLE_EQ(s.power_w.mean, 200.0);
  EXPECT_DOUBLE_EQ(s.power_w.max, 300.0);
  EXPECT_DOUBLE_EQ(s.sm_mhz.mean, 1530.0);
  EXPECT_DOUBLE_EQ(s.sm_mhz.min, 1200.0);
  EXPECT_DOUBLE_EQ(s.sm_mhz.max, 1990.0);

  const nlohmann::json j = gpu_monitor_json(samples, 0.5, "Fake GPU");
  EXPECT_EQ(j["interval_s"], 0.5);
  EXPECT_EQ(j["device"], "Fake GPU");
  EXPECT_EQ(j["decimated"], 1);
  EXPECT_EQ(j["columns"], nlohmann::json({"t_s", "util_pct", "mem_used_mib", "power_w", "sm_mhz"}));
  EXPECT_EQ(j["samples"], nlohmann::json::parse("[[0,10,1000,100,1200],[1,50,2000,200,1400],[2,90,3000,300,1990]]"));
  const nlohmann::json& sum = j["summary"];
  EXPECT_EQ(sum["samples"], 3);
  EXPECT_EQ(sum["interval_s"], 0.5);
  EXPECT_EQ(sum["device"], "Fake GPU");
  EXPECT_EQ(sum["util_pct"], nlohmann::json({{"mean", 50.0}, {"max", 90.0}}));
  EXPECT_EQ(sum["mem_used_mib"], nlohmann::json({{"mean", 2000.0}, {"max", 3000.0}}));
  EXPECT_EQ(sum["power_w"], nlohmann::json({{"mean", 200.0}, {"max", 300.0}}));
  EXPECT_EQ(sum["sm_mhz"], nlohmann::json({{"mean", 1530.0}, {"min", 1200.0}, {"max", 1990.0}}));
}

// The example of docs/report-format.md ("GPU monitor") is what the monitor writes
// (t_s rounded to the millisecond).
TEST(GpuMonitor, DocumentedExampleIsWhatTheMonitorWrites) {
  const std::vector<GpuSample> samples{{0.0002, {0, 2731, 118.412, 1980}},
                                       {1.0004, {97, 10915, 402.771, 1980}},
                                       {2.0001, {98, 10915, 411.052, 1980}},
                                       {3.0003, {96, 10915, 398.64, 1965}}};
  const nlohmann::json documented = nlohmann::json::parse(R"({
  "interval_s": 1.0,
  "device": "NVIDIA H100 80GB HBM3",
  "columns": ["t_s", "util_pct", "mem_used_mib", "power_w", "sm_mhz"],
  "samples": [[0.0, 0.0, 2731.0, 118.412, 1980.0],
              [1.0, 97.0, 10915.0, 402.771, 1980.0],
              [2.0, 98.0, 10915.0, 411.052, 1980.0],
              [3.0, 96.0, 10915.0, 398.64, 1965.0]],
  "decimated": 1,
  "summary": {"samples": 4, "interval_s": 1.0, "device": "NVIDIA H100 80GB HBM3",
              "util_pct": {"mean": 72.75, "max": 98.0},
              "mem_used_mib": {"mean": 8869.0, "max": 10915.0},
              "power_w": {"mean": 332.71875, "max": 411.052},
              "sm_mhz": {"mean": 1976.25, "min": 1965.0, "max": 1980.0}}
})");
  const nlohmann::json written = gpu_monitor_json(samples, 1.0, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(written.dump(), documented.dump()) << written.dump(2);
}

// A counter the GPU does not report (NaN) is null in the rows and left out of its
// summary; with no value at all its summary is null.
TEST(GpuMonitor, MissingCountersAreNullAndLeftOut) {
  const auto samples = samples_of({{20, 100, kNaN, 1000}, {kNaN, 300, kNaN, 1500}});
  const nlohmann::json j = gpu_monitor_json(samples, 1.0, "");
  EXPECT_TRUE(j["samples"][0][3].is_null());
  EXPECT_TRUE(j["samples"][1][1].is_null());
  EXPECT_EQ(j["summary"]["util_pct"]["mean"], 20.0);
  EXPECT_EQ(j["summary"]["mem_used_mib"]["mean"], 200.0);
  EXPECT_TRUE(j["summary"]["power_w"]["mean"].is_null());
  EXPECT_TRUE(j["summary"]["power_w"]["max"].is_null());

  const nlohmann::json none = gpu_monitor_json({}, 1.0, "x");
  EXPECT_EQ(none["summary"]["samples"], 0);
  EXPECT_TRUE(none["samples"].empty());
  EXPECT_TRUE(none["summary"]["util_pct"]["mean"].is_null());
  EXPECT_TRUE(none["summary"]["sm_mhz"]["min"].is_null());
}

// Past the cap every k-th row is kept (the first included), k = ceil(n / cap); the
// summary still covers every sample.
TEST(GpuMonitor, LongRunsAreDecimatedAndSaySo) {
  EXPECT_EQ(gpu_decimation(0), 1u);
  EXPECT_EQ(gpu_decimation(3600), 1u);
  EXPECT_EQ(gpu_decimation(3601), 2u);
  EXPECT_EQ(gpu_decimation(7200), 2u);
  EXPECT_EQ(gpu_decimation(7201), 3u);
  EXPECT_EQ(gpu_decimation(10, 4), 3u);

  std::vector<GpuReading> readings;
  for (int i = 0; i < 10; ++i) readings.push_back({static_cast<double>(i), 0, 0, 0});
  const nlohmann::json j = gpu_monitor_json(samples_of(readings), 1.0, "x", 4);
  EXPECT_EQ(j["decimated"], 3);
  ASSERT_EQ(j["samples"].size(), 4u);  // rows 0, 3, 6, 9
  for (std::size_t r = 0; r < 4; ++r) EXPECT_EQ(j["samples"][r][0], 3.0 * static_cast<double>(r)) << r;
  EXPECT_EQ(j["summary"]["samples"], 10);
  EXPECT_EQ(j["summary"]["util_pct"]["mean"], 4.5);
  EXPECT_EQ(j["summary"]["util_pct"]["max"], 9.0);

  std::vector<GpuReading> hour;
  for (int i = 0; i < 7201; ++i) hour.push_back({1, 1, 1, 1});
  const nlohmann::json capped = gpu_monitor_json(samples_of(hour), 1.0, "x");
  EXPECT_EQ(capped["decimated"], 3);
  EXPECT_EQ(capped["samples"].size(), 2401u);
  EXPECT_LE(capped["samples"].size(), kMaxGpuSampleRows);
}

// The injected wait ends the sampler after N - 1 waits: exactly N samples, at the
// injected clock's times, each wait asked for the time to the next deadline.
TEST(GpuMonitor, SamplerWithInjectedWaitTakesNSamplesAndStops) {
  int reads = 0;
  auto source = std::make_unique<FakeSource>(
      std::vector<GpuReading>{{10, 1, 1, 1}, {20, 2, 2, 2}, {30, 3, 3, 3}, {40, 4, 4, 4}}, &reads);
  double clock = 100.0;
  std::vector<double> waits;
  GpuMonitor::Hooks hooks;
  hooks.now_s = [&clock] { return clock; };
  hooks.wait_for = [&](double seconds) {
    waits.push_back(seconds);
    clock += seconds;  // the wait lasts what it was asked
    return waits.size() < 4;
  };
  GpuMonitor monitor(std::move(source), 0.5, hooks);
  EXPECT_EQ(monitor.device_name(), "Fake GPU 80GB");
  monitor.start();
  monitor.stop();  // joins: the loop ends by itself after the 4th wait
  const auto samples = monitor.samples();
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(reads, 4);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(samples[i].t_s, 0.5 * static_cast<double>(i)) << i;
    EXPECT_EQ(samples[i].reading.util_pct, 10.0 * static_cast<double>(i + 1)) << i;
    EXPECT_DOUBLE_EQ(waits[i], 0.5) << i;
  }
  const nlohmann::json j = monitor.to_json();
  EXPECT_EQ(j["summary"]["samples"], 4);
  EXPECT_EQ(j["summary"]["util_pct"]["mean"], 25.0);
  EXPECT_EQ(j["device"], "Fake GPU 80GB");
  monitor.stop();  // idempotent
}

// A read that overran the interval skips the deadlines it missed instead of sampling in a burst.
TEST(GpuMonitor, SlowReadSkipsMissedDeadlines) {
  double clock = 0.0;
  std::vector<double> waits;
  GpuMonitor::Hooks hooks;
  hooks.now_s = [&clock] { return clock; };
  hooks.wait_for = [&](double seconds) {
    waits.push_back(seconds);
    clock += seconds;
    if (waits.size() == 1) clock += 2.25;  // the next read is late by 2.25 intervals
    return waits.size() < 3;
  };
  GpuMonitor monitor(std::make_unique<FakeSource>(std::vector<GpuReading>{{1, 1, 1, 1}}), 1.0, hooks);
  monitor.start();
  monitor.stop();
  ASSERT_EQ(waits.size(), 3u);
  EXPECT_DOUBLE_EQ(waits[0], 1.0);
  EXPECT_DOUBLE_EQ(waits[1], 0.75);  // t = 3.25 -> next deadline 4
  EXPECT_DOUBLE_EQ(waits[2], 1.0);
  const auto samples = monitor.samples();
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_DOUBLE_EQ(samples[1].t_s, 3.25);
  EXPECT_DOUBLE_EQ(samples[2].t_s, 4.0);
}

// With the real wait, stop() ends an hour-long interval at once: the first sample
// is taken at start, the stop wakes the wait (no sleep in the test: stop waits
// for the first sample by polling the sampler's own state).
TEST(GpuMonitor, StopEndsTheRealWaitAtOnce) {
  GpuMonitor monitor(std::make_unique<FakeSource>(std::vector<GpuReading>{{7, 1, 1, 1}}), 3600.0);
  monitor.start();
  while (monitor.samples().empty()) std::this_thread::yield();
  const auto before = std::chrono::steady_clock::now();
  monitor.stop();
  // Generous: an hour-long wait that stop() did not end would hang the test, not pass it.
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(60));
  EXPECT_EQ(monitor.samples().size(), 1u);
}

TEST(GpuMonitor, StopWithoutStartAndBadArguments) {
  GpuMonitor idle(std::make_unique<FakeSource>(std::vector<GpuReading>{{1, 1, 1, 1}}), 1.0);
  idle.stop();
  EXPECT_TRUE(idle.samples().empty());
  EXPECT_THROW(GpuMonitor(std::make_unique<FakeSource>(std::vector<GpuReading>{{1, 1, 1, 1}}), 0.0),
               std::invalid_argument);
  EXPECT_THROW(GpuMonitor(nullptr, 1.0), std::invalid_argument);
}

TEST(GpuMonitor, FactoryOnALibraryThatCannotLoadGivesTheReason) {
  const GpuSourceOrReason r = open_nvml_source("", 0, "libmlbench-no-such-nvml.so.1");
  EXPECT_EQ(r.source, nullptr);
  EXPECT_EQ(r.reason.rfind("gpu monitor off: ", 0), 0u) << r.reason;
  EXPECT_NE(r.reason.find("libmlbench-no-such-nvml.so.1"), std::string::npos) << r.reason;
  EXPECT_EQ(r.reason.find('\n'), std::string::npos) << r.reason;
}

// A library that loads but is not NVML: the first missing entry point is named.
TEST(GpuMonitor, FactoryOnALibraryWithoutNvmlNamesTheMissingSymbol) {
  const GpuSourceOrReason r = open_nvml_source("", 0, "libm.so.6");
  EXPECT_EQ(r.source, nullptr);
  EXPECT_EQ(r.reason, "gpu monitor off: libm.so.6 has no nvmlInit_v2");
}

TEST(GpuMonitor, FactoryOnABadVisibleDeviceSaysSoBeforeLoading) {
  const GpuSourceOrReason r = open_nvml_source("-1", 0, "libmlbench-no-such-nvml.so.1");
  EXPECT_EQ(r.source, nullptr);
  EXPECT_NE(r.reason.find("CUDA_VISIBLE_DEVICES=-1"), std::string::npos) << r.reason;
}

TEST(GpuMonitor, CudaVisibleDevicesSelectsTheGpu) {
  const GpuSelection unset = select_gpu("");
  EXPECT_TRUE(unset.error.empty());
  EXPECT_EQ(unset.index, 0u);
  EXPECT_TRUE(unset.uuid.empty());
  EXPECT_EQ(select_gpu("", 2).index, 2u);  // cuda:2 with every GPU visible

  const GpuSelection index = select_gpu("3");
  EXPECT_TRUE(index.error.empty());
  EXPECT_EQ(index.index, 3u);
  EXPECT_TRUE(index.uuid.empty());
  EXPECT_EQ(select_gpu("5,1").index, 5u);      // the first entry
  EXPECT_EQ(select_gpu("5, 1", 1).index, 1u);  // cuda:1 is the second

  const GpuSelection uuid = select_gpu("GPU-8f3c6d1e-1b2a-4c5d-9e8f-0a1b2c3d4e5f,1");
  EXPECT_TRUE(uuid.error.empty());
  EXPECT_EQ(uuid.uuid, "GPU-8f3c6d1e-1b2a-4c5d-9e8f-0a1b2c3d4e5f");
  EXPECT_EQ(select_gpu("MIG-0d5d7a3c-aaaa-bbbb-cccc-111122223333").uuid, "MIG-0d5d7a3c-aaaa-bbbb-cccc-111122223333");

  EXPECT_FALSE(select_gpu("-1").error.empty());
  EXPECT_FALSE(select_gpu("abc").error.empty());
  EXPECT_FALSE(select_gpu("0,1", 2).error.empty());
  EXPECT_FALSE(select_gpu(",1").error.empty());

  EXPECT_EQ(cuda_ordinal("cuda"), 0);
  EXPECT_EQ(cuda_ordinal("cuda:0"), 0);
  EXPECT_EQ(cuda_ordinal("cuda:3"), 3);
}

}  // namespace
}  // namespace mlbench::core
