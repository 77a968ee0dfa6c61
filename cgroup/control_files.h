// The one place that knows how cgroup v1 and v2 name their control files and
// what their contents look like. Pure: no I/O, so unit tests feed text in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlbench::cgroup {

enum class Version { V1, V2 };
const char* to_string(Version v);  // "cgroup-v1" / "cgroup-v2" (the `isolation` value)

// What the runner sets or reads on a slice.
enum class Knob {
  CpusetCpus,   // CPUs of the slice
  CpusetMems,   // NUMA nodes of the slice
  MemoryLimit,  // hard memory limit
  MemoryPeak,   // peak memory use
  OomEvents,    // counter of OOM kills
  CpuUsage,     // CPU time used
  IoStat,       // bytes read from block devices
};

struct ControlFile {
  std::string controller;  // v1: the hierarchy ("memory"); v2: the controller to enable
  std::string file;        // "memory.limit_in_bytes" / "memory.max"
};

ControlFile control_file(Version v, Knob k);

// Controllers a slice is created in (v1: one hierarchy each; v2: enabled in
// the parent's cgroup.subtree_control). v1 "blkio" only when mounted.
std::vector<std::string> slice_controllers(Version v, bool with_io);

// The text written to the memory limit file: bytes, or "unlimited" as each version spells it
// (also for a value too large for the kernel, which would wrap).
std::string memory_limit_value(Version v, std::optional<std::uint64_t> bytes);

// Parsers of the files above. They throw std::invalid_argument naming the file on bad text.
// CPU seconds: v1 cpuacct.usage (ns), v2 cpu.stat (`usage_usec N`).
double parse_cpu_seconds(Version v, const std::string& text);
// OOM kills: v1 memory.oom_control, v2 memory.events (both `oom_kill N`).
std::uint64_t parse_oom_kills(const std::string& text);
// Bytes read: v1 blkio.throttle.io_service_bytes (`8:0 Read N` lines), v2 io.stat (`8:0 rbytes=N ...`).
std::uint64_t parse_bytes_read(Version v, const std::string& text);
// A single integer (memory.max_usage_in_bytes, memory.peak).
std::uint64_t parse_integer(const std::string& text, const std::string& what);

}  // namespace mlbench::cgroup
