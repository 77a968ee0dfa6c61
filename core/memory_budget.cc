// The batch memory check's arithmetic and the memory figures it reads (see memory_budget.h).
#include "memory_budget.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace mlbench::core {

namespace {

std::string gib(double bytes) {
  const double g = bytes / (1024.0 * 1024.0 * 1024.0);
  return g >= 1024.0 ? fmt::format("{:.1f} TiB", g / 1024.0) : fmt::format("{:.1f} GiB", g);
}
// A per-sample size in the unit that shows it (27 bytes were "0.0 MiB").
std::string mib(double bytes) {
  if (bytes < 1024.0) return fmt::format("{:.0f} B", bytes);
  if (bytes < 1024.0 * 1024.0) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0));
}

// "Key:   1234 kB" of a /proc file, in bytes.
std::optional<std::uint64_t> proc_kib(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) != 0) continue;
    std::istringstream v(line.substr(key.size()));
    std::uint64_t kib = 0;
    if (v >> kib) return kib * 1024;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> read_number(const std::string& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    return std::stoull(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The memory limit of this process's cgroup (v2 "0::/path", v1 the memory controller's line).
std::optional<std::uint64_t> cgroup_limit() {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':');
    const auto b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    std::optional<std::uint64_t> limit;
    if (controllers.empty()) {
      limit = read_number("/sys/fs/cgroup" + path + "/memory.max");
      if (!limit) limit = read_number("/sys/fs/cgroup/unified" + path + "/memory.max");
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      limit = read_number("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes");
    }
    // v1 spells "no limit" as a huge page-rounded number.
    if (limit && *limit < (std::uint64_t{1} << 60)) return limit;
  }
  return std::nullopt;
}

}  // namespace

double bytes_per_sample(const StepMemory& small, const StepMemory& larger) {
  if (larger.batch_size <= small.batch_size || larger.growth_bytes <= small.growth_bytes) return 0.0;
  return static_cast<double>(larger.growth_bytes - small.growth_bytes) /
         static_cast<double>(larger.batch_size - small.batch_size);
}

std::uint64_t extrapolated_growth(const StepMemory& small, const StepMemory& larger, int batch_size) {
  const double extra = bytes_per_sample(small, larger) * std::max(0, batch_size - larger.batch_size);
  return larger.growth_bytes + static_cast<std::uint64_t>(std::min(extra, 1.8e19));
}

std::optional<std::string> batch_memory_refusal(const StepMemory& small, const StepMemory& larger, int batch_size,
                                                std::uint64_t resident, const MemoryLimit& limit) {
  const std::uint64_t growth = extrapolated_growth(small, larger, batch_size);
  const double need = static_cast<double>(resident) + static_cast<double>(growth);
  if (limit.bytes == 0 || need <= static_cast<double>(limit.bytes)) return std::nullopt;
  return fmt::format(
      "--batch-size {} needs about {} of memory ({} per sample, measured by one step at batch sizes {} and {}), "
      "more than the {} this process may use ({}); lower --batch-size",
      batch_size, gib(need), mib(bytes_per_sample(small, larger)), small.batch_size, larger.batch_size,
      gib(static_cast<double>(limit.bytes)), limit.source);
}

std::uint64_t resident_bytes() {
  return proc_kib("/proc/self/status", "VmRSS:").value_or(0);
}

MemoryLimit memory_limit() {
  MemoryLimit m;
  if (const auto available = proc_kib("/proc/meminfo", "MemAvailable:")) {
    m = {*available + resident_bytes(), "available memory (MemAvailable)"};
  }
  if (const auto cg = cgroup_limit(); cg && (m.bytes == 0 || *cg < m.bytes)) m = {*cg, "cgroup memory limit"};
  return m;
}

}  // namespace mlbench::core
