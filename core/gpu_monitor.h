// The GPU monitor: a background sampler of one GPU's utilisation, memory used,
// power and SM clock during a benchmark's timed loop (the report's `gpu_monitor`
// block, docs/report-format.md). The counters come from NVML, loaded at run time
// with dlopen: no build dependency, no NVML header, and a machine without the
// NVIDIA driver only loses the block. Framework-free: no LibTorch here.
//
// Three parts, each testable alone: GpuSource (one reading; NVML or a test's fake),
// GpuMonitor (the sampling thread, its wait and clock injectable) and the pure
// functions that reduce samples to the summary and the JSON block.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mlbench::core {

// One reading of the counters; NaN for a counter the GPU does not report
// (e.g. power on some boards), written as null.
struct GpuReading {
  double util_pct = 0;      // nvmlDeviceGetUtilizationRates: .gpu
  double mem_used_mib = 0;  // nvmlDeviceGetMemoryInfo: .used / 2^20
  double power_w = 0;       // nvmlDeviceGetPowerUsage / 1000
  double sm_mhz = 0;        // nvmlDeviceGetClockInfo(NVML_CLOCK_SM)
};

struct GpuSample {
  double t_s = 0;  // seconds since the monitor started
  GpuReading reading;
};

// Where readings come from: NVML (open_nvml_source) or a test's fake.
class GpuSource {
 public:
  virtual ~GpuSource() = default;
  virtual std::string device_name() const = 0;
  virtual GpuReading read() = 0;
};

// A source, or the one line saying why there is none ("gpu monitor off: ...").
struct GpuSourceOrReason {
  std::unique_ptr<GpuSource> source;
  std::string reason;
};

// Which GPU NVML should read: the entry of CUDA_VISIBLE_DEVICES that CUDA calls
// device `ordinal` ("cuda:N"), an integer index or a "GPU-..."/"MIG-..." UUID; index
// `ordinal` when the variable is unset or empty. `error` is set (and the rest
// meaningless) when the entry names no GPU (e.g. "-1", or fewer entries than ordinal + 1).
// NVML counts GPUs in PCI bus order: an index means the same GPU to CUDA only under
// CUDA_DEVICE_ORDER=PCI_BUS_ID or on a machine of one GPU model, which is why a UUID,
// when given, is used as such.
struct GpuSelection {
  unsigned index = 0;
  std::string uuid;  // non-empty: select by UUID
  std::string error;
};
GpuSelection select_gpu(const std::string& cuda_visible_devices, int ordinal = 0);

// The device ordinal of a framework device string: "cuda:2" -> 2, "cuda" -> 0.
int cuda_ordinal(const std::string& device);

// Opens NVML (`library`, dlopen RTLD_NOW), initialises it and finds the GPU
// select_gpu names; every failure is the returned reason, e.g.
// "gpu monitor off: libnvidia-ml.so.1: cannot open shared object file: No such file or directory".
GpuSourceOrReason open_nvml_source(const std::string& cuda_visible_devices, int ordinal = 0,
                                   const std::string& library = "libnvidia-ml.so.1");

// What BenchmarkRun calls to get a source (open_nvml_source unless a test says otherwise).
using GpuSourceFactory = std::function<GpuSourceOrReason(const std::string& cuda_visible_devices, int ordinal)>;

// One counter over the finite values of the samples (NaN when it has none).
struct GpuCounter {
  double mean = std::numeric_limits<double>::quiet_NaN();
  double min = std::numeric_limits<double>::quiet_NaN();
  double max = std::numeric_limits<double>::quiet_NaN();
};

// The summary of the samples: counts and each counter (the JSON has mean and max,
// and the SM clock's min too).
struct GpuSummary {
  std::size_t samples = 0;
  double interval_s = 0;
  std::string device;
  GpuCounter util_pct, mem_used_mib, power_w, sm_mhz;
};
GpuSummary summarize_gpu(const std::vector<GpuSample>& samples, double interval_s, const std::string& device);

// At most this many rows in the JSON's `samples`; the summary always covers every sample.
inline constexpr std::size_t kMaxGpuSampleRows = 3600;

// The step that keeps at most `max_rows` of `n` rows (every k-th, the first included): ceil(n / max_rows), >= 1.
std::size_t gpu_decimation(std::size_t n, std::size_t max_rows = kMaxGpuSampleRows);

// The `gpu_monitor` block: {"interval_s", "device", "columns", "samples": [[t_s, util, mem_mib,
// power_w, sm_mhz], ...], "decimated": k, "summary": {...}}.
nlohmann::json gpu_monitor_json(const std::vector<GpuSample>& samples, double interval_s, const std::string& device,
                                std::size_t max_rows = kMaxGpuSampleRows);

// Samples a GpuSource every `interval_s` on its own thread, from start() to stop():
// one sample at once, then one after each wait. Deadlines are k × interval from the
// start, so a slow read does not shift the ones after it.
class GpuMonitor {
 public:
  struct Hooks {
    // Waits up to `seconds`; false when the sampler must end. Default: a
    // condition_variable wait that stop() ends at once. An injected wait is the
    // only way the sampler ends (stop() then waits for it): it must return false
    // in the end.
    std::function<bool(double seconds)> wait_for;
    // Seconds since an arbitrary origin. Default: std::chrono::steady_clock.
    std::function<double()> now_s;
  };

  GpuMonitor(std::unique_ptr<GpuSource> source, double interval_s, Hooks hooks = {});
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  void start();
  // Ends the sampling thread and waits for it; returns at once with the default
  // wait. Idempotent. A started monitor has at least its first sample.
  void stop();

  std::vector<GpuSample> samples() const;
  const std::string& device_name() const { return device_; }
  double interval_s() const { return interval_s_; }
  // gpu_monitor_json of the samples so far.
  nlohmann::json to_json() const;

 private:
  void loop();
  bool default_wait(double seconds);

  std::unique_ptr<GpuSource> source_;
  double interval_s_;
  Hooks hooks_;
  std::string device_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<bool> stopping_{false};
  std::vector<GpuSample> samples_;
  std::thread thread_;
};

}  // namespace mlbench::core
