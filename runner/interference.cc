// Sampling what else used an instance's CPUs (see interference.h).
#include "interference.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <latch>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/process.h"
#include "core/sysinfo.h"

namespace mlbench::runner {

namespace fs = std::filesystem;

std::map<int, CpuTicks> parse_proc_stat(const std::string& text) {
  std::map<int, CpuTicks> cpus;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    std::uint64_t v[8] = {};
    fields >> cpu;
    for (auto& x : v) fields >> x;
    if (!fields || cpu < 0) throw std::runtime_error("malformed /proc/stat line: " + line);
    cpus[cpu] = CpuTicks{v[0] + v[1] + v[2] + v[5] + v[6], v[3] + v[4], v[7]};
  }
  return cpus;
}

std::optional<double> parse_loadavg(const std::string& text) {
  std::istringstream in(text);
  double load = 0;
  if (in >> load && std::isfinite(load)) return load;
  return std::nullopt;
}

namespace {
std::string read_file(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double thread_cpu_seconds() {
  return 1e-9 * static_cast<double>(core::this_thread_cpu_ns());
}

// Each step depends on the last (no vectorising, no closed form); the result is
// consumed so the loop cannot be dropped.
std::uint64_t xorshift_steps(std::uint64_t steps) {
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (std::uint64_t i = 0; i < steps; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  return x;
}

}  // namespace

ProcSnapshot read_proc_snapshot(const fs::path& proc_root) {
  ProcSnapshot s;
  s.cpus = parse_proc_stat(read_file(proc_root / "stat"));
  if (s.cpus.empty()) throw std::runtime_error("no cpuN lines in " + (proc_root / "stat").string());
  s.loadavg = parse_loadavg(read_file(proc_root / "loadavg"));
  return s;
}

ProbeTime run_cpu_probe(const std::vector<int>& cpus) {
  ProbeTime t;
  std::thread worker([&] {
    if (!cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : cpus) {
        if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
      }
      pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort: else where it may run
    }
    const auto w0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_seconds();
    volatile std::uint64_t sink = xorshift_steps(kProbeSteps);
    (void)sink;
    t.cpu_s = thread_cpu_seconds() - c0;
    t.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  });
  worker.join();
  return t;
}

ProbeTime run_parallel_probe(const std::vector<int>& cpus) {
  const std::size_t n = std::max<std::size_t>(1, cpus.size());
  std::vector<ProbeTime> each(n);
  std::latch ready(static_cast<std::ptrdiff_t>(n) + 1);
  std::latch go(1);
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < n; ++k) {
    threads.emplace_back([&, k] {
      if (k < cpus.size() && cpus[k] >= 0 && cpus[k] < CPU_SETSIZE) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpus[k], &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort
      }
      ready.count_down();
      go.wait();  // all start together, so all CPUs are busy at once
      const auto w0 = std::chrono::steady_clock::now();
      const double c0 = thread_cpu_seconds();
      volatile std::uint64_t sink = xorshift_steps(kProbeSteps);
      (void)sink;
      each[k].cpu_s = thread_cpu_seconds() - c0;
      each[k].wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    });
  }
  ready.arrive_and_wait();
  const auto w0 = std::chrono::steady_clock::now();
  go.count_down();
  for (auto& t : threads) t.join();
  ProbeTime t;
  for (const ProbeTime& e : each) t.cpu_s = std::max(t.cpu_s, e.cpu_s);
  t.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  return t;
}

core::InterferenceInfo interference_of(const InterferenceSample& s) {
  const auto finite = [](std::optional<double> v) { return v && std::isfinite(*v) ? v : std::nullopt; };
  // Busy and steal ticks of the slot's CPUs between the snapshots; nullopt when a CPU is missing.
  std::optional<double> busy_s = 0.0, steal_s = 0.0;
  for (int cpu : s.slot_cpus) {
    const auto b = s.before.cpus.find(cpu);
    const auto a = s.after.cpus.find(cpu);
    if (b == s.before.cpus.end() || a == s.after.cpus.end()) {
      busy_s = steal_s = std::nullopt;
      break;
    }
    // Counters only grow; a smaller one (a CPU that went offline and back) counts 0.
    auto delta = [&](std::uint64_t after, std::uint64_t before) {
      return after > before ? static_cast<double>(after - before) / s.ticks_per_second : 0.0;
    };
    *busy_s += delta(a->second.busy, b->second.busy);
    *steal_s += delta(a->second.steal, b->second.steal);
  }
  const double cpu_wall = s.wall_s * static_cast<double>(s.slot_cpus.size());
  std::optional<double> other_s, other_pct, steal_pct;
  if (busy_s && s.own_cpu_s) {
    // Ticks are sampled (1/USER_HZ per CPU) while own CPU time is exact: clamp at 0.
    other_s = std::max(0.0, *busy_s - *s.own_cpu_s);
    if (cpu_wall > 0) other_pct = 100.0 * *other_s / cpu_wall;
  }
  if (steal_s && cpu_wall > 0) steal_pct = 100.0 * *steal_s / cpu_wall;
  std::optional<double> drift;
  if (s.probe_before.cpu_s > 0) drift = 100.0 * (s.probe_after.cpu_s - s.probe_before.cpu_s) / s.probe_before.cpu_s;
  core::InterferenceInfo i;
  i.slot_cpus.assign(s.slot_cpus.begin(), s.slot_cpus.end());
  i.wall_s = s.wall_s;
  i.own_cpu_s = finite(s.own_cpu_s);
  i.other_cpu_s = finite(other_s);
  i.other_cpu_pct = finite(other_pct);
  i.steal_pct = finite(steal_pct);
  i.loadavg_start = finite(s.before.loadavg);
  i.loadavg_end = finite(s.after.loadavg);
  i.probe_before_s = s.probe_before.cpu_s;
  i.probe_after_s = s.probe_after.cpu_s;
  i.probe_drift_pct = finite(drift);
  i.probe_before_wall_s = s.probe_before.wall_s;
  i.probe_after_wall_s = s.probe_after.wall_s;
  if (s.parallel_before) i.parallel_probe_before_s = s.parallel_before->cpu_s;
  if (s.parallel_after) i.parallel_probe_after_s = s.parallel_after->cpu_s;
  return i;
}

InterferenceSampler::InterferenceSampler(fs::path proc_root, Probe probe, Probe parallel_probe)
    : proc_root_(std::move(proc_root)), probe_(std::move(probe)), parallel_probe_(std::move(parallel_probe)) {}

InterferenceSampler::Running InterferenceSampler::begin(std::vector<int> cpus) const {
  Running r;
  r.cpus = cpus.empty() ? core::affinity_cpus() : std::move(cpus);
  r.probe_before = probe_(r.cpus);
  if (r.cpus.size() >= 2) r.parallel_before = parallel_probe_(r.cpus);
  try {
    r.before = read_proc_snapshot(proc_root_);
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  r.started = std::chrono::steady_clock::now();
  return r;
}

std::optional<core::InterferenceInfo> InterferenceSampler::end(const Running& running,
                                                               std::optional<double> own_cpu_s) const {
  InterferenceSample s;
  s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - running.started).count();
  std::string error = running.error;
  if (running.before) {
    try {
      s.after = read_proc_snapshot(proc_root_);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  s.probe_after = probe_(running.cpus);
  if (running.parallel_before) s.parallel_after = parallel_probe_(running.cpus);
  if (!error.empty()) {
    std::cerr << "mlbench-run: warning: no interference figures (" << error << ")" << std::endl;
    return std::nullopt;
  }
  s.slot_cpus = running.cpus;
  s.before = *running.before;
  s.own_cpu_s = own_cpu_s;
  s.probe_before = running.probe_before;
  s.parallel_before = running.parallel_before;
  const long hz = sysconf(_SC_CLK_TCK);
  s.ticks_per_second = hz > 0 ? static_cast<double>(hz) : 100.0;
  return interference_of(s);
}

}  // namespace mlbench::runner
