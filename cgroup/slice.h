// CPU/RAM slices as cgroups (v1 through libcgroup, v2 through the unified
// filesystem), the per-instance resource usage read back from them, and the
// isolation mode the runner falls back to when it may not create cgroups.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "control_files.h"

namespace mlbench::cgroup {

class CgroupError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What confines an instance: a cgroup, or only sched_setaffinity.
enum class Isolation { Affinity, CgroupV1, CgroupV2 };
const char* to_string(Isolation i);  // "affinity", "cgroup-v1", "cgroup-v2"

struct Limits {
  std::vector<int> cpus;                      // empty = all CPUs of the parent
  std::vector<int> mems;                      // NUMA nodes; empty = all online nodes
  std::optional<std::uint64_t> memory_bytes;  // nullopt = no limit
};

// What an instance used, read from its cgroup after it ended.
struct Usage {
  double cpu_seconds = 0;
  std::uint64_t memory_peak_bytes = 0;
  std::uint64_t oom_kills = 0;
  std::uint64_t bytes_read = 0;
  // {"cpu_seconds", "memory_peak_bytes", "oom_kills", "bytes_read"}
  nlohmann::json to_json() const;
};

// A mounted cgroup filesystem we may create groups in.
class Hierarchy {
 public:
  // Detects v1/v2 and where each controller lives. nullopt (with `why`) when
  // cgroups are missing, a controller is not mounted, or we lack permission.
  static std::optional<Hierarchy> open(std::string* why);

  Version version() const { return version_; }
  Isolation isolation() const { return version_ == Version::V1 ? Isolation::CgroupV1 : Isolation::CgroupV2; }
  bool has_io() const { return has_io_; }
  // The directory of `group` (e.g. "mlbench/run/student0") in `controller`'s hierarchy.
  std::filesystem::path dir(const std::string& controller, const std::string& group) const;

  // Creates `group` in every slice controller with these limits; its parent must exist
  // (create parents first, outermost first). Throws CgroupError naming the group.
  void create(const std::string& group, const Limits& limits) const;
  // Removes `group` from every controller, one controller at a time (libcgroup's
  // multi-controller delete removes only the first). Absent directories are fine.
  // Returns false when a directory stayed (busy), after retrying briefly.
  bool remove(const std::string& group) const;
  // The files a process writes its pid into to join `group` (one per v1 hierarchy).
  // Plain paths, so a forked child can attach itself with open/write only.
  std::vector<std::string> procs_files(const std::string& group) const;
  // Moves `pid` into `group` (libcgroup on v1).
  void attach(const std::string& group, int pid) const;
  // Reads the usage of `group`; unreadable counters stay 0.
  Usage usage(const std::string& group) const;

 private:
  Version version_ = Version::V1;
  bool has_io_ = false;
  std::vector<std::pair<std::string, std::filesystem::path>> mounts_;  // controller -> mount point
};

// Writes `pid` into each file (async-signal-safe: open/write/close only).
// Returns 0 or the errno of the first failure. For use between fork and exec.
int attach_self_to(const std::vector<std::string>& procs_files, int pid);

}  // namespace mlbench::cgroup
