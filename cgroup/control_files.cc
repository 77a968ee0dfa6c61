// v1/v2 control-file names and content parsers (see control_files.h).
#include "control_files.h"

#include <sstream>
#include <stdexcept>

namespace mlbench::cgroup {

const char* to_string(Version v) { return v == Version::V1 ? "cgroup-v1" : "cgroup-v2"; }

ControlFile control_file(Version v, Knob k) {
  const bool v1 = v == Version::V1;
  switch (k) {
    case Knob::CpusetCpus: return {"cpuset", "cpuset.cpus"};
    case Knob::CpusetMems: return {"cpuset", "cpuset.mems"};
    case Knob::MemoryLimit: return {"memory", v1 ? "memory.limit_in_bytes" : "memory.max"};
    case Knob::MemoryPeak: return {"memory", v1 ? "memory.max_usage_in_bytes" : "memory.peak"};
    case Knob::OomEvents: return {"memory", v1 ? "memory.oom_control" : "memory.events"};
    case Knob::CpuUsage: return v1 ? ControlFile{"cpuacct", "cpuacct.usage"} : ControlFile{"cpu", "cpu.stat"};
    case Knob::IoStat: return v1 ? ControlFile{"blkio", "blkio.throttle.io_service_bytes"} : ControlFile{"io", "io.stat"};
  }
  throw std::logic_error("unknown cgroup knob");
}

std::vector<std::string> slice_controllers(Version v, bool with_io) {
  std::vector<std::string> out = v == Version::V1 ? std::vector<std::string>{"cpuset", "cpu", "cpuacct", "memory"}
                                                  : std::vector<std::string>{"cpuset", "cpu", "memory"};
  if (with_io) out.push_back(v == Version::V1 ? "blkio" : "io");
  return out;
}

std::string memory_limit_value(Version v, std::optional<std::uint64_t> bytes) {
  // The kernel keeps limits as a signed 64-bit count: a larger value wraps (to a 0-byte
  // limit and an OOM kill of everything), so it is written as what it means, no limit.
  constexpr std::uint64_t kKernelMax = std::uint64_t{1} << 62;
  if (bytes && *bytes < kKernelMax) return std::to_string(*bytes);
  return v == Version::V1 ? "-1" : "max";
}

std::uint64_t parse_integer(const std::string& text, const std::string& what) {
  std::istringstream in(text);
  std::uint64_t value = 0;
  if (!(in >> value)) throw std::invalid_argument(what + ": expected an integer, got '" + text + "'");
  return value;
}

namespace {
// The value of `key N` in a flat-keyed file; nullopt when absent.
std::optional<std::uint64_t> keyed_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string k;
    std::uint64_t v = 0;
    if (ls >> k >> v && k == key) return v;
  }
  return std::nullopt;
}
}  // namespace

double parse_cpu_seconds(Version v, const std::string& text) {
  if (v == Version::V1) return static_cast<double>(parse_integer(text, "cpuacct.usage")) / 1e9;
  auto usec = keyed_value(text, "usage_usec");
  if (!usec) throw std::invalid_argument("cpu.stat: no usage_usec line");
  return static_cast<double>(*usec) / 1e6;
}

std::uint64_t parse_oom_kills(const std::string& text) { return keyed_value(text, "oom_kill").value_or(0); }

std::uint64_t parse_bytes_read(Version v, const std::string& text) {
  std::uint64_t total = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string device;
    if (!(ls >> device)) continue;
    if (v == Version::V1) {
      std::string op;
      std::uint64_t n = 0;
      if (ls >> op >> n && op == "Read") total += n;
    } else {
      for (std::string field; ls >> field;) {
        if (field.rfind("rbytes=", 0) == 0) total += parse_integer(field.substr(7), "io.stat rbytes");
      }
    }
  }
  return total;
}

}  // namespace mlbench::cgroup
