// Slots and instance planning (see plan.h).
#include "plan.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "core/byte_size.h"
#include "core/credentials.h"
#include "core/report.h"
#include "core/sysinfo.h"

namespace mlbench::runner {

std::vector<Slot> make_slots(const std::vector<int>& cpus, std::uint64_t ram_total, int n,
                             std::optional<std::uint64_t> memory_per_slot) {
  if (n < 1) throw std::invalid_argument("slots must be at least 1");
  if (cpus.empty()) throw std::invalid_argument("no CPUs to share out");
  std::vector<Slot> slots;
  const int total = static_cast<int>(cpus.size());
  const int per = total / n;
  for (int i = 0; i < n; ++i) {
    Slot s;
    s.index = i;
    if (per >= 1) {
      s.cpus.assign(cpus.begin() + i * per, cpus.begin() + (i + 1) * per);
    } else {
      s.cpus = {cpus[static_cast<std::size_t>(i % total)]};
    }
    s.memory_bytes = memory_per_slot ? *memory_per_slot : ram_total / static_cast<std::uint64_t>(n);
    slots.push_back(std::move(s));
  }
  return slots;
}

int default_slot_count(int gpus, int cpus) {
  return gpus > 0 ? gpus : std::max(1, cpus / 2);
}

std::string format_bytes(std::optional<std::uint64_t> bytes) {
  if (!bytes) return "unlimited";
  const double b = static_cast<double>(*bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.1f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.0f} MiB", b / (1024.0 * 1024));
  return fmt::format("{} B", *bytes);
}

std::uint64_t parse_size(const std::string& text) {
  const std::uint64_t bytes = core::parse_byte_size(text);
  if (bytes == 0) throw std::invalid_argument("'" + text + "': a size must be positive");
  return bytes;
}

std::map<std::string, std::string> instance_variables(const Instance& inst, int slots, const PlanSettings& s) {
  const std::uint64_t kib = 1024;
  const std::uint64_t ram_kib = s.ram_total / kib;
  std::map<std::string, std::string> env = {
      {"JOB_ID", std::to_string(inst.slot)},
      {"CPU_COUNT", std::to_string(inst.cpus.size())},
      {"CPU_TOTAL", std::to_string(s.all_cpus.size())},
      {"DEVICE_TOTAL", std::to_string(s.gpus > 0 ? s.gpus : slots)},
      {"RAM_TOTAL", std::to_string(ram_kib)},
      {"RAM_CONSTRAINT", std::to_string(inst.memory_bytes ? *inst.memory_bytes / kib : ram_kib)},
      {"BENCH_NAME", inst.name},
      {"RUN_ID", std::to_string(s.run_id)},
      {"SUITE_NAME", s.suite},
      {"OUTPUT_DIRECTORY", s.output_directory},
      {"DATA_DIRECTORY", s.data_directory},
      // A pthread OpenBLAS sizes its pool from these when it loads, before the
      // benchmark's --cpu-cores applies: one thread per slot CPU.
      {"OMP_NUM_THREADS", std::to_string(inst.cpus.size())},
      {"OPENBLAS_NUM_THREADS", std::to_string(inst.cpus.size())}};
  if (s.gpus > 0) {
    std::string vcd = std::to_string(inst.slot);
    if (inst.whole_machine) {
      vcd.clear();
      for (int g = 0; g < s.gpus; ++g) vcd += (g ? "," : "") + std::to_string(g);
    }
    env["CUDA_VISIBLE_DEVICES"] = vcd;
  }
  return env;
}

namespace {

// Instance `i` of job `job` before its sweep point is known: slot, CPUs, memory,
// seed, timeout, cgroup and the variables its $VARS expand from.
Instance slot_instance(const JobSpec& job, int i, const std::vector<Slot>& slots, const PlanSettings& s) {
  const int nslots = static_cast<int>(slots.size());
  const bool all = job.cgroup == CgroupKind::All;
  Instance inst;
  inst.slot = all ? 0 : i;
  inst.whole_machine = all;
  inst.name = job.name;
  inst.seed = all ? s.uid + nslots : s.uid + (i + 1) * 100LL;
  inst.cpus = all ? s.all_cpus : slots[static_cast<std::size_t>(i)].cpus;
  inst.memory_bytes = all ? std::nullopt : slots[static_cast<std::size_t>(i)].memory_bytes;
  inst.timeout = (job.timeout && !s.timeout_forced) ? *job.timeout : s.default_timeout;
  inst.cgroup = all ? "all" : "student" + std::to_string(i);
  inst.report_prefix = fmt::format("{}.{}.R{}.D{}.", s.suite, job.name, s.run_id, inst.slot);
  inst.env = instance_variables(inst, nslots, s);
  return inst;
}

// `base` (from slot_instance) at one sweep point of `step`.
Instance point_instance(const Instance& base, const JobSpec& job, const PlannedStep& step, const SweepPoint& point,
                        const std::string& executable, const PlanSettings& s) {
  const bool has_seed =
      std::any_of(job.args.begin(), job.args.end(), [](const auto& a) { return a.first == "--seed"; });
  Instance inst = base;
  inst.job = step.job;
  inst.point = step.point;
  inst.points = step.points;
  inst.label = point.label;
  inst.executable = executable;
  inst.argv = point.argv;
  if (!has_seed) {
    inst.argv.push_back("--seed");
    inst.argv.push_back(std::to_string(inst.seed));
  }
  const std::string sweep = step.points > 1 ? fmt::format(".S{}", step.point) : "";
  inst.log_name = fmt::format("{}{}.R{}.D{}.log", job.name, sweep, s.run_id, inst.slot);
  return inst;
}

}  // namespace

std::vector<PlannedStep> make_plan(const std::vector<JobSpec>& jobs, const std::vector<std::string>& executables,
                                   const std::vector<Slot>& slots, const PlanSettings& s,
                                   const std::map<std::string, std::string>& env, const std::string& file) {
  std::vector<PlannedStep> plan;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const JobSpec& job = jobs[j];
    const int count = job.cgroup == CgroupKind::All ? 1 : static_cast<int>(slots.size());
    // Each instance expands the job's $VARS from its own values (its CPU_COUNT, JOB_ID, ...),
    // as each instance of the Mila suite sources its own config; the rest from the runner's.
    std::vector<Instance> bases;
    std::vector<std::vector<SweepPoint>> points;
    for (int i = 0; i < count; ++i) {
      bases.push_back(slot_instance(job, i, slots, s));
      std::map<std::string, std::string> vars = bases.back().env;
      vars.insert(env.begin(), env.end());  // insert keeps the instance's own values
      points.push_back(sweep_points(job, vars, file));
    }
    for (std::size_t p = 0; p < points.front().size(); ++p) {
      PlannedStep step;
      step.job = static_cast<int>(j);
      step.point = static_cast<int>(p);
      step.points = static_cast<int>(points.front().size());
      const std::string& label = points.front()[p].label;
      step.title = label.empty() ? job.name : job.name + " [" + label + "]";
      for (int i = 0; i < count; ++i) {
        step.instances.push_back(point_instance(bases[static_cast<std::size_t>(i)], job, step,
                                                points[static_cast<std::size_t>(i)][p], executables[j], s));
      }
      plan.push_back(std::move(step));
    }
  }
  return plan;
}

std::string shell_line(const Instance& inst) {
  auto quote = [](const std::string& s) {
    if (!s.empty() && s.find_first_of(" \t\"'$\\;&|<>*?()") == std::string::npos) return s;
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  std::string line;
  for (const auto& [k, v] : inst.env) line += k + "=" + quote(v) + " ";
  line += quote(inst.executable);
  for (const auto& a : inst.argv) line += " " + quote(a);
  // What is shown and written (the log's header, the report's runner block, --dry), never what
  // runs: a password in a job's arguments is masked.
  return core::mask_credentials(line);
}

}  // namespace mlbench::runner
