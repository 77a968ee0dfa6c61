// Runs one benchmark instance end to end, framework-free: prints the config
// block, runs the TrainLoop, and writes the Contract 1 report atomically —
// also when set-up or the loop fails, is interrupted, or the loss turns NaN
// (a `.FAIL.` report with `completed: false` and a `reason`).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "gpu_monitor.h"
#include "instance_report.h"
#include "train_loop.h"

namespace mlbench::core {

// What the framework side knows (LibTorch version, device).
struct RuntimeInfo {
  std::string framework = "none";
  std::string framework_version;
  std::string device = "cpu";  // "cpu" or "cuda:N"
  bool cuda_available = false;
  std::vector<std::string> gpus;  // device names as the framework reports them
};

// What a benchmark's set-up returns: the step, and how many items one iteration trains on.
struct Workload {
  std::function<void(Iteration&)> step;
  double items_per_iteration = 0;
  // Device phase times (a GPU's events: LoopConfig::device_timeline); none = the host's clock.
  std::shared_ptr<DeviceTimeline> device_timeline;
  // Called after the loop (also after a failure) to fill report blocks such as
  // "pipeline" and "metrics".
  std::function<void(nlohmann::json& report)> finish;
  // Optional: called once after the loop has completed (not after a failure or
  // an interruption), untimed, before `finish`: e.g. atari's --eval-episodes.
  // An exception from it fails the run as one from the loop would.
  std::function<void()> after_loop;
  // Optional: called after every iteration (index over the run, its phases), e.g. for --trace.
  std::function<void(long, const Iteration&)> on_iteration;
};

// Errors that are the user's doing (exit 2, no report): e.g. --cuda without CUDA.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Input the user named that cannot be used (a dataset whose listing or shards are refused, a
// missing dataset): exit 2 as a UsageError, and a FAIL report with the reason, as for any
// failure once the run's set-up has begun.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class BenchmarkRun {
 public:
  // `source_hash`: sha256 of the benchmark's sources (MLBENCH_SOURCE_HASH).
  BenchmarkRun(const BenchCli& cli, std::string source_hash, RuntimeInfo runtime, Chrono::SyncHook sync = {});

  // Runs set-up and the loop; returns the process exit code: 0 completed,
  // 1 failed (report written), 2 usage error (no report) or InputError (report written),
  // 128+signal when interrupted.
  int run(const std::function<Workload()>& setup);

  // The report's file path once written ("" when printed to stdout or not yet written).
  const std::string& report_path() const { return report_path_; }

  // Where the GPU monitor reads (default: open_nvml_source) and its wait and clock
  // (default: real ones); for tests. The monitor runs only on a "cuda" device with
  // --monitor-interval > 0.
  void set_gpu_monitor(GpuSourceFactory factory, GpuMonitor::Hooks hooks = {}) {
    gpu_source_factory_ = std::move(factory);
    gpu_monitor_hooks_ = std::move(hooks);
  }

 private:
  InstanceReport base_report() const;
  void print_config(std::ostream& out) const;
  int finish(InstanceReport report, bool completed, const std::string& reason, int exit_code);
  // The started monitor, or null (CPU device, --monitor-interval 0, or no NVML: one line on stderr).
  std::unique_ptr<GpuMonitor> start_gpu_monitor() const;

  const BenchCli& cli_;
  std::string source_hash_;
  RuntimeInfo runtime_;
  Chrono::SyncHook sync_;
  std::string start_time_;
  std::string report_path_;
  GpuSourceFactory gpu_source_factory_;
  GpuMonitor::Hooks gpu_monitor_hooks_;
};

}  // namespace mlbench::core
