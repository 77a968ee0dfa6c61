#include "gpu_monitor.h"

#include <dlfcn.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "statistics.h"

namespace mlbench::core {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The few parts of NVML's C ABI (nvml.h, stable since the _v2 entry points of
// CUDA 5) that the monitor needs, declared here so that building needs no NVML.
namespace nvml {
using Return = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
struct DeviceSt;
using Device = DeviceSt*;  // nvmlDevice_t
struct Utilization {       // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};
struct Memory {  // nvmlMemory_t (v1)
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr int kClockSm = 1;               // NVML_CLOCK_SM
constexpr unsigned int kNameBuffer = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE

using InitFn = Return (*)();
using ShutdownFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using HandleByIndexFn = Return (*)(unsigned int, Device*);
using HandleByUuidFn = Return (*)(const char*, Device*);
using UtilizationFn = Return (*)(Device, Utilization*);
using MemoryFn = Return (*)(Device, Memory*);
using PowerFn = Return (*)(Device, unsigned int*);
using ClockFn = Return (*)(Device, int, unsigned int*);
using NameFn = Return (*)(Device, char*, unsigned int);
}  // namespace nvml

class NvmlSource : public GpuSource {
 public:
  NvmlSource(void* library, nvml::ShutdownFn shutdown, nvml::Device device, std::string name, nvml::UtilizationFn util,
             nvml::MemoryFn memory, nvml::PowerFn power, nvml::ClockFn clock)
      : library_(library),
        shutdown_(shutdown),
        device_(device),
        name_(std::move(name)),
        util_(util),
        memory_(memory),
        power_(power),
        clock_(clock) {}
  ~NvmlSource() override {
    shutdown_();
    dlclose(library_);
  }
  NvmlSource(const NvmlSource&) = delete;
  NvmlSource& operator=(const NvmlSource&) = delete;

  std::string device_name() const override { return name_; }

  GpuReading read() override {
    GpuReading r{kNaN, kNaN, kNaN, kNaN};
    nvml::Utilization u{};
    if (util_(device_, &u) == 0) r.util_pct = u.gpu;
    nvml::Memory m{};
    if (memory_(device_, &m) == 0) r.mem_used_mib = static_cast<double>(m.used) / (1024.0 * 1024.0);
    unsigned int milliwatts = 0;
    if (power_(device_, &milliwatts) == 0) r.power_w = milliwatts / 1000.0;
    unsigned int mhz = 0;
    if (clock_(device_, nvml::kClockSm, &mhz) == 0) r.sm_mhz = mhz;
    return r;
  }

 private:
  void* library_;
  nvml::ShutdownFn shutdown_;
  nvml::Device device_;
  std::string name_;
  nvml::UtilizationFn util_;
  nvml::MemoryFn memory_;
  nvml::PowerFn power_;
  nvml::ClockFn clock_;
};

std::string trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

template <class Get>
GpuCounter over_finite(const std::vector<GpuSample>& samples, Get get) {
  GpuCounter out;
  double sum = 0;
  std::size_t n = 0;
  for (const GpuSample& s : samples) {
    const double v = get(s.reading);
    if (!std::isfinite(v)) continue;
    sum += v;
    out.min = n == 0 ? v : std::min(out.min, v);
    out.max = n == 0 ? v : std::max(out.max, v);
    ++n;
  }
  if (n > 0) out.mean = sum / static_cast<double>(n);
  return out;
}

nlohmann::json mean_max(const GpuCounter& c) {
  return {{"mean", number_or_null(c.mean)}, {"max", number_or_null(c.max)}};
}

}  // namespace

GpuSelection select_gpu(const std::string& cuda_visible_devices, int ordinal) {
  GpuSelection sel;
  if (ordinal < 0) {
    sel.error = fmt::format("device ordinal {} names no GPU", ordinal);
    return sel;
  }
  const std::string all = trimmed(cuda_visible_devices);
  if (all.empty()) {
    sel.index = static_cast<unsigned>(ordinal);
    return sel;
  }
  std::vector<std::string> entries;
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = all.find(',', begin);
    entries.push_back(trimmed(all.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin)));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  if (static_cast<std::size_t>(ordinal) >= entries.size()) {
    sel.error = fmt::format("CUDA_VISIBLE_DEVICES={} has no entry {}", cuda_visible_devices, ordinal);
    return sel;
  }
  const std::string& entry = entries[static_cast<std::size_t>(ordinal)];
  if (entry.rfind("GPU-", 0) == 0 || entry.rfind("MIG-", 0) == 0) {
    sel.uuid = entry;
    return sel;
  }
  unsigned value = 0;
  const auto [ptr, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), value);
  if (entry.empty() || ec != std::errc() || ptr != entry.data() + entry.size()) {
    sel.error = fmt::format("CUDA_VISIBLE_DEVICES={}: entry '{}' is neither a GPU index nor a GPU- UUID",
                            cuda_visible_devices, entry);
    return sel;
  }
  sel.index = value;
  return sel;
}

int cuda_ordinal(const std::string& device) {
  const std::size_t colon = device.find(':');
  if (colon == std::string::npos) return 0;
  int value = 0;
  const char* end = device.data() + device.size();
  const auto [ptr, ec] = std::from_chars(device.data() + colon + 1, end, value);
  return ec == std::errc() && ptr == end ? value : 0;
}

GpuSourceOrReason open_nvml_source(const std::string& cuda_visible_devices, int ordinal, const std::string& library) {
  constexpr const char* kOff = "gpu monitor off: ";
  GpuSourceOrReason out;
  const GpuSelection sel = select_gpu(cuda_visible_devices, ordinal);
  if (!sel.error.empty()) {
    out.reason = kOff + sel.error;
    return out;
  }
  dlerror();
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    out.reason = kOff + (why != nullptr ? std::string(why) : library + ": cannot be loaded");
    return out;
  }
  std::string missing;
  auto sym = [&](const char* name) {
    void* p = dlsym(lib, name);
    if (p == nullptr && missing.empty()) missing = name;
    return p;
  };
  const auto init = reinterpret_cast<nvml::InitFn>(sym("nvmlInit_v2"));
  const auto shutdown = reinterpret_cast<nvml::ShutdownFn>(sym("nvmlShutdown"));
  const auto by_index = reinterpret_cast<nvml::HandleByIndexFn>(sym("nvmlDeviceGetHandleByIndex_v2"));
  const auto by_uuid = reinterpret_cast<nvml::HandleByUuidFn>(sym("nvmlDeviceGetHandleByUUID"));
  const auto util = reinterpret_cast<nvml::UtilizationFn>(sym("nvmlDeviceGetUtilizationRates"));
  const auto memory = reinterpret_cast<nvml::MemoryFn>(sym("nvmlDeviceGetMemoryInfo"));
  const auto power = reinterpret_cast<nvml::PowerFn>(sym("nvmlDeviceGetPowerUsage"));
  const auto clock = reinterpret_cast<nvml::ClockFn>(sym("nvmlDeviceGetClockInfo"));
  const auto name_of = reinterpret_cast<nvml::NameFn>(sym("nvmlDeviceGetName"));
  if (!missing.empty()) {
    dlclose(lib);
    out.reason = fmt::format("{}{} has no {}", kOff, library, missing);
    return out;
  }
  // Optional: only for the text of an error code.
  const auto error_string = reinterpret_cast<nvml::ErrorStringFn>(dlsym(lib, "nvmlErrorString"));
  auto error_text = [&](nvml::Return rc) {
    const char* text = error_string != nullptr ? error_string(rc) : nullptr;
    return text != nullptr ? fmt::format("NVML error {} ({})", rc, text) : fmt::format("NVML error {}", rc);
  };
  if (const nvml::Return rc = init(); rc != 0) {
    out.reason = fmt::format("{}nvmlInit_v2 failed: {}", kOff, error_text(rc));
    dlclose(lib);
    return out;
  }
  nvml::Device device = nullptr;
  const nvml::Return rc = sel.uuid.empty() ? by_index(sel.index, &device) : by_uuid(sel.uuid.c_str(), &device);
  if (rc != 0) {
    out.reason = fmt::format("{}no NVML device {}{}: {}", kOff, sel.uuid.empty() ? "at index " : "",
                             sel.uuid.empty() ? std::to_string(sel.index) : sel.uuid, error_text(rc));
    shutdown();
    dlclose(lib);
    return out;
  }
  char name[nvml::kNameBuffer] = {};
  if (name_of(device, name, sizeof(name)) != 0) name[0] = '\0';
  out.source = std::make_unique<NvmlSource>(lib, shutdown, device, name, util, memory, power, clock);
  return out;
}

GpuSummary summarize_gpu(const std::vector<GpuSample>& samples, double interval_s, const std::string& device) {
  GpuSummary s;
  s.samples = samples.size();
  s.interval_s = interval_s;
  s.device = device;
  s.util_pct = over_finite(samples, [](const GpuReading& r) { return r.util_pct; });
  s.mem_used_mib = over_finite(samples, [](const GpuReading& r) { return r.mem_used_mib; });
  s.power_w = over_finite(samples, [](const GpuReading& r) { return r.power_w; });
  s.sm_mhz = over_finite(samples, [](const GpuReading& r) { return r.sm_mhz; });
  return s;
}

std::size_t gpu_decimation(std::size_t n, std::size_t max_rows) {
  if (max_rows == 0 || n <= max_rows) return 1;
  return (n + max_rows - 1) / max_rows;
}

nlohmann::json gpu_monitor_json(const std::vector<GpuSample>& samples, double interval_s, const std::string& device,
                                std::size_t max_rows) {
  const std::size_t k = gpu_decimation(samples.size(), max_rows);
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t i = 0; i < samples.size(); i += k) {
    const GpuSample& s = samples[i];
    // Milliseconds are plenty for a once-a-second clock and keep the rows short.
    rows.push_back({number_or_null(std::round(s.t_s * 1000.0) / 1000.0), number_or_null(s.reading.util_pct),
                    number_or_null(s.reading.mem_used_mib), number_or_null(s.reading.power_w),
                    number_or_null(s.reading.sm_mhz)});
  }
  const GpuSummary sum = summarize_gpu(samples, interval_s, device);
  return {{"interval_s", interval_s},
          {"device", device},
          {"columns", {"t_s", "util_pct", "mem_used_mib", "power_w", "sm_mhz"}},
          {"samples", rows},
          {"decimated", k},
          {"summary",
           {{"samples", sum.samples},
            {"interval_s", sum.interval_s},
            {"device", sum.device},
            {"util_pct", mean_max(sum.util_pct)},
            {"mem_used_mib", mean_max(sum.mem_used_mib)},
            {"power_w", mean_max(sum.power_w)},
            {"sm_mhz",
             {{"mean", number_or_null(sum.sm_mhz.mean)},
              {"min", number_or_null(sum.sm_mhz.min)},
              {"max", number_or_null(sum.sm_mhz.max)}}}}}};
}

GpuMonitor::GpuMonitor(std::unique_ptr<GpuSource> source, double interval_s, Hooks hooks)
    : source_(std::move(source)), interval_s_(interval_s), hooks_(std::move(hooks)) {
  if (!source_) throw std::invalid_argument("GpuMonitor needs a source");
  if (!(interval_s_ > 0))
    throw std::invalid_argument(fmt::format("GpuMonitor interval must be > 0 (got {})", interval_s_));
  device_ = source_->device_name();
  if (!hooks_.wait_for) hooks_.wait_for = [this](double seconds) { return default_wait(seconds); };
  if (!hooks_.now_s) {
    hooks_.now_s = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
  }
}

GpuMonitor::~GpuMonitor() {
  stop();
}

void GpuMonitor::start() {
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { loop(); });
}

void GpuMonitor::stop() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool GpuMonitor::default_wait(double seconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  return !wake_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return stopping_.load(); });
}

void GpuMonitor::loop() {
  const double origin = hooks_.now_s();
  double next = interval_s_;  // the next deadline, seconds after origin
  // The first sample always; then the wait decides (the default one ends at stop()).
  while (true) {
    const double t = hooks_.now_s() - origin;
    GpuReading reading;
    try {
      reading = source_->read();
    } catch (const std::exception&) {
      reading = GpuReading{kNaN, kNaN, kNaN, kNaN};  // a lost reading, not a lost run
    }
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      samples_.push_back(GpuSample{t, reading});
    }
    const double elapsed = hooks_.now_s() - origin;
    // Fallen behind (a stalled read): skip the missed deadlines rather than sample in a burst.
    if (next <= elapsed) next = (std::floor(elapsed / interval_s_) + 1.0) * interval_s_;
    if (!hooks_.wait_for(next - elapsed)) break;
    next += interval_s_;
  }
}

std::vector<GpuSample> GpuMonitor::samples() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return samples_;
}

nlohmann::json GpuMonitor::to_json() const {
  return gpu_monitor_json(samples(), interval_s_, device_);
}

}  // namespace mlbench::core
