#include "sysinfo.h"

#include <sched.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <linux/magic.h>
#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {
std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  const auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// Value after "key<spaces>:" in a /proc style file, or "".
std::string field_value(const std::string& line) {
  const auto colon = line.find(':');
  return colon == std::string::npos ? std::string() : trim(line.substr(colon + 1));
}
}  // namespace

const char* to_string(CgroupMode mode) {
  switch (mode) {
    case CgroupMode::V1:
      return "v1";
    case CgroupMode::V2:
      return "v2";
    case CgroupMode::None:
      break;
  }
  return "none";
}

CgroupMode cgroup_mode(const std::string& mount_point) {
  struct statfs fs {};
  if (statfs(mount_point.c_str(), &fs) != 0) return CgroupMode::None;
  if (fs.f_type == CGROUP2_SUPER_MAGIC) return CgroupMode::V2;
  if (fs.f_type == TMPFS_MAGIC) {
    // v1: a tmpfs holding one mount per controller hierarchy.
    if (statfs((mount_point + "/cpuset").c_str(), &fs) == 0 && fs.f_type == CGROUP_SUPER_MAGIC) return CgroupMode::V1;
    if (statfs((mount_point + "/memory").c_str(), &fs) == 0 && fs.f_type == CGROUP_SUPER_MAGIC) return CgroupMode::V1;
  }
  return CgroupMode::None;
}

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return field_value(line);
  }
  return "unknown";
}

int logical_cores() {
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

int physical_cores() {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string physical_id, core_id;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("physical id", 0) == 0) physical_id = field_value(line);
    if (line.rfind("core id", 0) == 0) {
      core_id = field_value(line);
      cores.emplace(physical_id, core_id);
    }
  }
  return cores.empty() ? logical_cores() : static_cast<int>(cores.size());
}

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int i = 0; i < CPU_SETSIZE; ++i) {
      if (CPU_ISSET(i, &set)) cpus.push_back(i);
    }
  }
  return cpus;
}

namespace {
// A "Key: N kB" line of /proc/meminfo, in bytes (0 when absent).
std::uint64_t meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) return std::stoull(field_value(line)) * 1024ULL;
  }
  return 0;
}
}  // namespace

std::uint64_t memory_total_bytes() {
  return meminfo_bytes("MemTotal:");
}
std::uint64_t memory_available_bytes() {
  return meminfo_bytes("MemAvailable:");
}

std::string kernel_release() {
  struct utsname u {};
  if (uname(&u) != 0) return "unknown";
  return std::string(u.sysname) + " " + u.release;
}

std::vector<std::string> gpu_names() {
  std::vector<std::string> names;
  std::error_code ec;
  const std::filesystem::path root("/proc/driver/nvidia/gpus");
  if (!std::filesystem::is_directory(root, ec)) return names;
  std::vector<std::filesystem::path> dirs;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    std::ifstream in(dir / "information");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("Model:", 0) == 0) names.push_back(field_value(line));
    }
  }
  return names;
}

std::string format_cpu_list(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::ostringstream out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (i > 0) out << ',';
    out << cpus[i];
    if (j > i) out << '-' << cpus[j];
    i = j + 1;
  }
  return out.str();
}

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream ss(trim(text));
  auto number = [&](const std::string& s) {
    std::size_t pos = 0;
    int v = -1;
    try {
      v = std::stoi(s, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos != s.size() || v < 0) throw std::invalid_argument("bad CPU list '" + text + "'");
    return v;
  };
  for (std::string part; std::getline(ss, part, ',');) {
    part = trim(part);
    if (part.empty()) continue;
    const auto dash = part.find('-');
    if (dash == std::string::npos) {
      cpus.push_back(number(part));
    } else {
      const int a = number(part.substr(0, dash));
      const int b = number(part.substr(dash + 1));
      if (b < a) throw std::invalid_argument("bad CPU list '" + text + "'");
      for (int c = a; c <= b; ++c) cpus.push_back(c);
    }
  }
  return cpus;
}

MachineInfo machine_info() {
  MachineInfo m;
  m.hostname = hostname();
  m.cpu_model = cpu_model();
  m.logical_cores = logical_cores();
  m.physical_cores = physical_cores();
  m.affinity = format_cpu_list(affinity_cpus());
  m.memory_bytes = static_cast<std::int64_t>(memory_total_bytes());
  m.kernel = kernel_release();
  m.cgroup_mode = to_string(cgroup_mode());
  m.gpus = gpu_names();
  return m;
}

nlohmann::json machine_description() {
  // The report's machine block without what only a benchmark knows (its framework, CUDA, BLAS).
  nlohmann::json j = to_json(machine_info());
  for (const char* key : {"framework", "framework_version", "cuda_available"}) j.erase(key);
  return j;
}

}  // namespace mlbench::core
