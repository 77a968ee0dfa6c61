// What else used an instance's CPUs while it ran (the report's `interference`
// block): per-CPU busy and steal time of the slot's CPUs from /proc/stat, less the
// instance's own CPU time; the load average at start and end; and a fixed CPU probe
// timed before and after the job, so a slow run can be told apart from a slow
// machine. Reading /proc goes through a root path, so tests feed fixed snapshots.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/instance_report.h"

namespace mlbench::runner {

// One CPU's counters from a /proc/stat "cpuN" line, in clock ticks (USER_HZ).
struct CpuTicks {
  std::uint64_t busy = 0;   // user + nice + system + irq + softirq (guest time is inside user)
  std::uint64_t idle = 0;   // idle + iowait
  std::uint64_t steal = 0;  // taken by the hypervisor for other guests
};

struct ProcSnapshot {
  std::map<int, CpuTicks> cpus;   // by CPU number
  std::optional<double> loadavg;  // 1-minute load average
};

// The "cpuN ..." lines of /proc/stat (the "cpu" total line is skipped). Throws
// std::runtime_error naming the line when one is malformed.
std::map<int, CpuTicks> parse_proc_stat(const std::string& text);
// The first field of /proc/loadavg; nullopt when it is not a number.
std::optional<double> parse_loadavg(const std::string& text);
// Reads <proc_root>/stat and <proc_root>/loadavg; throws std::runtime_error naming a
// file it cannot read or parse.
ProcSnapshot read_proc_snapshot(const std::filesystem::path& proc_root);

// A fixed amount of integer work (kProbeSteps dependent xorshift steps: tens of milliseconds, long
// enough to time, short beside an instance; docs/runner.md, "Interference"), timed with the
// thread's CPU clock and the wall clock.
inline constexpr std::uint64_t kProbeSteps = 25'000'000;
struct ProbeTime {
  double cpu_s = 0;   // CLOCK_THREAD_CPUTIME_ID: how fast the CPU runs this code
  double wall_s = 0;  // steady clock: also counts waiting for a CPU others use
};
// Runs the probe in a thread confined to `cpus` (empty: anywhere).
ProbeTime run_cpu_probe(const std::vector<int>& cpus);
// Runs the probe on every CPU of `cpus` at once, one thread pinned to each: cpu_s is
// the slowest thread's CPU time, wall_s the whole. Beside run_cpu_probe it shows what
// one thread cannot: CPUs that compete when all are busy (two vCPUs on one host core,
// a shared frequency limit), which is how a multi-threaded benchmark runs.
ProbeTime run_parallel_probe(const std::vector<int>& cpus);

// Everything interference_of needs, so the arithmetic is testable on fixed numbers.
struct InterferenceSample {
  std::vector<int> slot_cpus;
  ProcSnapshot before, after;       // taken after the first probe and before the second
  double wall_s = 0;                // between the two snapshots
  std::optional<double> own_cpu_s;  // the instance's process tree (cgroup cpuacct, else rusage)
  ProbeTime probe_before, probe_after;
  std::optional<ProbeTime> parallel_before, parallel_after;  // slots of 2+ CPUs only
  double ticks_per_second = 100;                             // sysconf(_SC_CLK_TCK)
};

// The report's interference block (docs/runner.md): the slot's CPUs, the wall time, the
// instance's own CPU time, the other processes' and the hypervisor's (steal) share, the load
// average and the probes before and after. Figures that cannot be computed (no own CPU time, a
// CPU missing from a snapshot) are unset (null in the report).
core::InterferenceInfo interference_of(const InterferenceSample& s);

// Samples one instance: begin() before it starts (probe, then snapshot), end() once it
// ended (snapshot, then probe). `proc_root` and `probe` are seams for tests.
class InterferenceSampler {
 public:
  using Probe = std::function<ProbeTime(const std::vector<int>&)>;
  explicit InterferenceSampler(std::filesystem::path proc_root = "/proc", Probe probe = run_cpu_probe,
                               Probe parallel_probe = run_parallel_probe);

  struct Running {
    std::vector<int> cpus;
    std::optional<ProcSnapshot> before;  // nullopt: /proc unreadable (the block is then null)
    ProbeTime probe_before;
    std::optional<ProbeTime> parallel_before;  // slots of 2+ CPUs only
    std::chrono::steady_clock::time_point started;
    std::string error;
  };
  // `cpus`: the slot's CPUs; empty means the CPUs this process may use.
  Running begin(std::vector<int> cpus) const;
  // The block for an instance that used `own_cpu_s`; none when /proc could not be read
  // (one warning on stderr says why).
  std::optional<core::InterferenceInfo> end(const Running& running, std::optional<double> own_cpu_s) const;

 private:
  std::filesystem::path proc_root_;
  Probe probe_;
  Probe parallel_probe_;
};

}  // namespace mlbench::runner
