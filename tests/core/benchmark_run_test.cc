#include "core/benchmark_run.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <system_error>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace mlbench::core {
namespace {

namespace fs = std::filesystem;

// A workload whose every loss is NaN: the run ends as failed.
Workload nan_loss_workload() {
  Workload w;
  w.items_per_iteration = 8;
  w.step = [](Iteration& it) { it.set_loss([] { return std::nan(""); }); };
  return w;
}

class BenchmarkRunTest : public testing::Test {
 protected:
  // dir_: the report directory, not made yet (the benchmark makes it).
  void SetUp() override { dir_ = tmp_.path() / "reports"; }

  int run(const std::function<Workload()>& setup, std::vector<std::string> extra = {}) {
    return run_with({"fake", "--repeat", "3", "--number", "2"}, setup, std::move(extra));
  }
  int run_with(std::vector<std::string> args, const std::function<Workload()>& setup,
               std::vector<std::string> extra = {}) {
    args.insert(args.end(), {"--report", dir_.string()});
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<const char*> argv;
    for (auto& a : args) argv.push_back(a.c_str());
    cli_ = std::make_unique<BenchCli>("fake", "fake", BenchDefaults{.batch_size = 8});
    EXPECT_FALSE(cli_->parse(static_cast<int>(argv.size()), argv.data(), {{"SUITE_NAME", "t"}}).has_value());
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    BenchmarkRun run(*cli_, "hash", runtime_);
    if (gpu_factory_) run.set_gpu_monitor(gpu_factory_, gpu_hooks_);
    const int rc = run.run(setup);
    stdout_ = testing::internal::GetCapturedStdout();
    stderr_ = testing::internal::GetCapturedStderr();
    return rc;
  }

  std::vector<fs::path> reports() const {
    std::vector<fs::path> out;
    if (!fs::exists(dir_)) return out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path());
    return out;
  }
  nlohmann::json only_report() const {
    const auto files = reports();
    EXPECT_EQ(files.size(), 1u);
    std::ifstream in(files.at(0));
    return nlohmann::json::parse(in);
  }

  testing_support::TempDir tmp_{"benchmark_run"};
  fs::path dir_;
  std::unique_ptr<BenchCli> cli_;
  std::string stdout_, stderr_;
  RuntimeInfo runtime_;
  GpuSourceFactory gpu_factory_;  // unset: the real NVML
  GpuMonitor::Hooks gpu_hooks_;
};

// The GPU monitor's fake: a constant reading.
class ConstantGpu : public GpuSource {
 public:
  std::string device_name() const override { return "Fake GPU"; }
  GpuReading read() override { return {60, 1024, 250, 1410}; }
};

Workload steady_workload() {
  Workload w;
  w.items_per_iteration = 8;
  w.step = [](Iteration& it) { it.set_loss([] { return 0.5; }); };
  return w;
}

TEST_F(BenchmarkRunTest, CompletedRunWritesEveryContractField) {
  const int rc = run([] {
    Workload w;
    w.items_per_iteration = 8;
    w.step = [](Iteration& it) { it.set_loss([] { return 0.5; }); };
    w.finish = [](nlohmann::json& r) { r["pipeline"] = {{"source", "test"}}; };
    return w;
  });
  EXPECT_EQ(rc, 0);
  const auto files = reports();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].filename().string().rfind("t.fake.R0.D0.2", 0), 0u) << files[0];
  EXPECT_EQ(files[0].string().find(".FAIL."), std::string::npos);
  const auto r = only_report();
  for (const char* key : {"name",       "suite",      "run_id",     "vcd",      "jr_id",     "batch_size", "workers",
                          "cpu_cores",  "repeat",     "number",     "seed",     "hostname",  "gpu",        "version",
                          "unique_id",  "batch_loss", "epoch_loss", "metrics",  "train",     "train_item", "completed",
                          "start_time", "end_time",   "stall",      "pipeline", "resources", "machine",    "args"}) {
    EXPECT_TRUE(r.contains(key)) << key;
  }
  EXPECT_EQ(r["completed"], true);
  EXPECT_FALSE(r.contains("reason"));
  EXPECT_EQ(r["train"]["count"], 2);  // 3 repeats, warm-up min(10, 3/2) = 1
  EXPECT_EQ(r["epoch_loss"].size(), 3u);
  EXPECT_EQ(r["pipeline"]["source"], "test");
  EXPECT_EQ(r["version"]["source"], "hash");
  EXPECT_NE(stdout_.find("Report: "), std::string::npos);
}

TEST_F(BenchmarkRunTest, NaNLossWritesFailReportAndExitsOne) {
  const int rc = run(nan_loss_workload);
  EXPECT_EQ(rc, 1);
  const auto files = reports();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(files[0].string().find(".FAIL."), std::string::npos);
  const auto r = only_report();
  EXPECT_EQ(r["completed"], false);
  EXPECT_EQ(r["reason"], "loss is nan at repeat 0 iteration 0");
  EXPECT_NE(stderr_.find("fake: error: loss is nan"), std::string::npos);
}

TEST_F(BenchmarkRunTest, AfterLoopRunsOnceAfterACompletedLoopBeforeFinish) {
  auto calls = std::make_shared<std::vector<std::string>>();
  const int rc = run([calls] {
    Workload w;
    w.items_per_iteration = 8;
    w.step = [calls](Iteration& it) {
      calls->push_back("step");
      it.set_loss([] { return 0.5; });
    };
    w.after_loop = [calls] { calls->push_back("after"); };
    w.finish = [calls](nlohmann::json& r) {
      calls->push_back("finish");
      r["metrics"]["seen"] = calls->size();
    };
    return w;
  });
  EXPECT_EQ(rc, 0);
  ASSERT_EQ(calls->size(), 8u);  // 3 repeats x 2 iterations, then after, then finish
  EXPECT_EQ((*calls)[6], "after");
  EXPECT_EQ((*calls)[7], "finish");
  EXPECT_EQ(only_report()["metrics"]["seen"], 8);
}

TEST_F(BenchmarkRunTest, AfterLoopIsSkippedWhenTheLoopFailsAndItsOwnFailureIsAFailReport) {
  bool after = false;
  int rc = run([&after] {
    Workload w = nan_loss_workload();
    w.after_loop = [&after] { after = true; };
    return w;
  });
  EXPECT_EQ(rc, 1);
  EXPECT_FALSE(after);
  fs::remove_all(dir_);
  rc = run([] {
    Workload w;
    w.items_per_iteration = 8;
    w.step = [](Iteration& it) { it.set_loss([] { return 0.5; }); };
    w.after_loop = [] { throw std::runtime_error("evaluation failed"); };
    return w;
  });
  EXPECT_EQ(rc, 1);
  const auto r = only_report();
  EXPECT_EQ(r["completed"], false);
  EXPECT_EQ(r["reason"], "evaluation failed");
}

TEST_F(BenchmarkRunTest, SetupFailureStillWritesFailReport) {
  const int rc = run([]() -> Workload { throw std::runtime_error("dataset data/x not found"); });
  EXPECT_EQ(rc, 1);
  const auto r = only_report();
  EXPECT_EQ(r["completed"], false);
  EXPECT_EQ(r["reason"], "dataset data/x not found");
}

// A write to a pipe or socket whose other end is gone (a crashed rank's gloo connection: the
// scaling benchmark's rank 0 died of SIGPIPE, exit 141, with no report) is an error of the run,
// with a FAIL report, not the end of the process.
TEST_F(BenchmarkRunTest, AWriteToAClosedPipeIsAFailReportNotADeathBySigpipe) {
  const int rc = run([] {
    Workload w;
    w.items_per_iteration = 8;
    w.step = [](Iteration& it) {
      int fds[2];
      if (pipe(fds) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
      close(fds[0]);
      const char byte = 'x';
      const ssize_t n = write(fds[1], &byte, 1);
      const int err = errno;
      close(fds[1]);
      if (n < 0) throw std::system_error(err, std::generic_category(), "write to the peer");
      it.set_loss([] { return 0.5; });
    };
    return w;
  });
  EXPECT_EQ(rc, 1);
  const auto r = only_report();
  EXPECT_EQ(r["completed"], false);
  EXPECT_NE(r["reason"].get<std::string>().find("write to the peer: Broken pipe"), std::string::npos) << r["reason"];
}

TEST_F(BenchmarkRunTest, UsageErrorExitsTwoWithoutReport) {
  const int rc = run([]() -> Workload { throw UsageError("--cuda given but no CUDA"); });
  EXPECT_EQ(rc, 2);
  EXPECT_TRUE(reports().empty());
  EXPECT_NE(stderr_.find("--cuda given"), std::string::npos);
}

TEST_F(BenchmarkRunTest, UnwritableReportDirectoryIsAnError) {
  std::ofstream(dir_) << "a file, not a directory";
  const int rc = run([] {
    Workload w;
    w.items_per_iteration = 1;
    w.step = [](Iteration&) {};
    return w;
  });
  EXPECT_EQ(rc, 1);
  EXPECT_NE(stderr_.find(dir_.string()), std::string::npos) << stderr_;
  fs::remove(dir_);
}

TEST_F(BenchmarkRunTest, ExplicitNumberIsUsedAndReportSaysNotCalibrated) {
  const int rc = run([] {
    Workload w;
    w.items_per_iteration = 8;
    w.step = [](Iteration& it) { it.set_loss([] { return 0.5; }); };
    return w;
  });
  EXPECT_EQ(rc, 0);
  const auto r = only_report();
  EXPECT_EQ(r["number"], 2);
  EXPECT_EQ(r["iterations"], 6);
  ASSERT_TRUE(r.contains("min_time"));
  EXPECT_TRUE(r["min_time"].is_null());
  ASSERT_TRUE(r.contains("calibration"));
  EXPECT_TRUE(r["calibration"].is_null());
  ASSERT_TRUE(r["stability"].is_object());
  EXPECT_EQ(r["stability"]["observations"], 2);  // 3 repeats less 1 warm-up
  for (const char* key :
       {"sd_pct", "min_s", "max_s", "median_s", "trend_pct", "warmup_trending", "short_observations"}) {
    EXPECT_TRUE(r["stability"].contains(key)) << key;
  }
  EXPECT_EQ(r["stability"]["short_observations"], true);  // empty steps: microseconds per observation
}

TEST_F(BenchmarkRunTest, MinTimeCalibratesAndRecordsTheNumberUsed) {
  const int rc = run_with({"fake", "--repeat", "3", "--min-time", "0.02"}, [] {
    Workload w;
    w.items_per_iteration = 8;
    w.step = [](Iteration& it) {
      it.compute([] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
      it.set_loss([] { return 0.5; });
    };
    return w;
  });
  EXPECT_EQ(rc, 0);
  const auto r = only_report();
  EXPECT_EQ(r["min_time"], 0.02);
  ASSERT_TRUE(r["calibration"].is_object());
  const int number = r["calibration"]["number"];
  EXPECT_GE(number, 1);
  EXPECT_EQ(r["number"], number);  // the number used everywhere else
  EXPECT_EQ(r["calibration"]["target_s"], 0.02);
  const long probe = r["calibration"]["probe_iterations"];
  EXPECT_GE(probe, 2);
  // 1 warm-up observation (which may have refined the number) and 2 kept ones of `number`.
  const long warm = r["stall"]["warmup_iterations"];
  EXPECT_GE(warm, 1);
  EXPECT_EQ(r["iterations"], probe + warm + 2L * number);
  EXPECT_TRUE(r["args"]["number"].is_null());
  EXPECT_EQ(r["stability"]["observations"], 2);
  EXPECT_NE(stdout_.find("--min-time 0.02 s: --number " + std::to_string(number)), std::string::npos) << stdout_;
}

// On a CUDA device the monitor samples through the timed loop (here: 3 samples,
// the injected wait ending the sampler after 2 waits) and the report holds its block;
// the factory is asked for the device's GPU (cuda:1, the process's CUDA_VISIBLE_DEVICES).
TEST_F(BenchmarkRunTest, CudaDeviceWritesTheGpuMonitorBlock) {
  runtime_.device = "cuda:1";
  runtime_.cuda_available = true;
  auto asked = std::make_shared<std::vector<int>>();
  gpu_factory_ = [asked](const std::string&, int ordinal) {
    asked->push_back(ordinal);
    return GpuSourceOrReason{std::make_unique<ConstantGpu>(), ""};
  };
  auto clock = std::make_shared<double>(0.0);
  auto waits = std::make_shared<int>(0);
  gpu_hooks_.now_s = [clock] { return *clock; };
  gpu_hooks_.wait_for = [clock, waits](double seconds) {
    *clock += seconds;
    return ++*waits < 3;
  };
  const int rc = run_with({"fake", "--repeat", "3", "--number", "2", "--monitor-interval", "0.5"}, steady_workload);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(*asked, std::vector<int>{1});
  const auto r = only_report();
  ASSERT_TRUE(r.contains("gpu_monitor")) << r.dump();
  const nlohmann::json& g = r["gpu_monitor"];
  EXPECT_EQ(g["interval_s"], 0.5);
  EXPECT_EQ(g["device"], "Fake GPU");
  EXPECT_EQ(g["samples"], nlohmann::json::parse("[[0,60,1024,250,1410],[0.5,60,1024,250,1410],[1,60,1024,250,1410]]"));
  EXPECT_EQ(g["summary"]["samples"], 3);
  EXPECT_EQ(g["summary"]["util_pct"]["mean"], 60.0);
  EXPECT_EQ(r["args"]["monitor_interval"], 0.5);
  EXPECT_EQ(stderr_.find("gpu monitor"), std::string::npos) << stderr_;
}

// A failed run reports what the monitor sampled too.
TEST_F(BenchmarkRunTest, FailedCudaRunKeepsTheGpuMonitorBlock) {
  runtime_.device = "cuda:0";
  gpu_factory_ = [](const std::string&, int) { return GpuSourceOrReason{std::make_unique<ConstantGpu>(), ""}; };
  gpu_hooks_.now_s = [] { return 0.0; };
  gpu_hooks_.wait_for = [](double) { return false; };  // one sample
  const int rc = run(nan_loss_workload);
  EXPECT_EQ(rc, 1);
  const auto r = only_report();
  EXPECT_EQ(r["completed"], false);
  ASSERT_TRUE(r.contains("gpu_monitor"));
  EXPECT_EQ(r["gpu_monitor"]["summary"]["samples"], 1);
}

// Without NVML: the reason once on stderr, no block, and the run goes on.
TEST_F(BenchmarkRunTest, CudaDeviceWithoutNvmlSaysWhyOnceAndWritesNoBlock) {
  runtime_.device = "cuda:0";
  gpu_factory_ = [](const std::string&, int) {
    return GpuSourceOrReason{nullptr, "gpu monitor off: libnvidia-ml.so.1: cannot open shared object file"};
  };
  const int rc = run(steady_workload);
  EXPECT_EQ(rc, 0);
  EXPECT_FALSE(only_report().contains("gpu_monitor"));
  const std::string line = "fake: gpu monitor off: libnvidia-ml.so.1: cannot open shared object file\n";
  ASSERT_NE(stderr_.find(line), std::string::npos) << stderr_;
  EXPECT_EQ(stderr_.find(line, stderr_.find(line) + 1), std::string::npos) << stderr_;
}

// The real factory on this machine: a block when NVML sees a GPU, else one reason
// line; either way the run completes (the default wait: stop() ends it at once).
TEST_F(BenchmarkRunTest, CudaDeviceWithTheRealNvmlWritesABlockOrOneReason) {
  runtime_.device = "cuda:0";
  const int rc = run(steady_workload);
  EXPECT_EQ(rc, 0);
  const auto r = only_report();
  if (r.contains("gpu_monitor")) {
    EXPECT_GE(r["gpu_monitor"]["summary"]["samples"].get<int>(), 1);
    EXPECT_EQ(stderr_.find("gpu monitor off"), std::string::npos) << stderr_;
  } else {
    EXPECT_NE(stderr_.find("fake: gpu monitor off: "), std::string::npos) << stderr_;
  }
}

// A CPU device, or --monitor-interval 0: no monitor, no line, no block.
TEST_F(BenchmarkRunTest, CpuDeviceOrIntervalZeroRunsNoMonitor) {
  auto calls = std::make_shared<int>(0);
  gpu_factory_ = [calls](const std::string&, int) {
    ++*calls;
    return GpuSourceOrReason{nullptr, "gpu monitor off: should not be asked"};
  };
  EXPECT_EQ(run(steady_workload), 0);
  EXPECT_FALSE(only_report().contains("gpu_monitor"));
  fs::remove_all(dir_);
  runtime_.device = "cuda:0";
  EXPECT_EQ(run_with({"fake", "--repeat", "3", "--number", "2", "--monitor-interval", "0"}, steady_workload), 0);
  EXPECT_FALSE(only_report().contains("gpu_monitor"));
  EXPECT_EQ(*calls, 0);
  EXPECT_EQ(stderr_.find("gpu monitor"), std::string::npos) << stderr_;
}

}  // namespace
}  // namespace mlbench::core
