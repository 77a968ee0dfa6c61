// From selected jobs and the machine to the list of instances to launch:
// slots (CPU sets and memory per GPU or per group of cores), per-instance
// environment, seed, log and cgroup names. Pure: the machine is passed in.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "jobs.h"

namespace mlbench::runner {

struct Slot {
  int index = 0;
  std::vector<int> cpus;                      // contiguous share of the runner's affinity mask
  std::optional<std::uint64_t> memory_bytes;  // RAM_TOTAL / slots (or --slot-memory)
};

// Splits `cpus` (the runner's affinity mask, in order) into `n` contiguous sets of
// size(cpus)/n (the remainder stays unused, as CPU_COUNT*i..CPU_COUNT*(i+1)-1 in the
// Mila suite). With more slots than CPUs, slot i shares CPU cpus[i % size].
// Memory: `memory_per_slot` when given, else ram_total / n.
std::vector<Slot> make_slots(const std::vector<int>& cpus, std::uint64_t ram_total, int n,
                             std::optional<std::uint64_t> memory_per_slot);

// Slots when --slots is not given: one per GPU, else one per 2 CPUs (at least 1).
int default_slot_count(int gpus, int cpus);

struct PlanSettings {
  std::string suite;      // SUITE_NAME
  int run_id = 0;         // RUN_ID (uid + pass)
  long long uid = 0;      // seeds: uid + (slot+1)*100; `all` jobs: uid + slots
  int gpus = 0;           // > 0: CUDA_VISIBLE_DEVICES per slot
  std::string output_directory;
  std::string data_directory;
  double default_timeout = 1800;
  bool timeout_forced = false;  // --timeout given: overrides the jobs' own timeouts
  std::vector<int> all_cpus;    // for `all` jobs
  std::uint64_t ram_total = 0;  // bytes: RAM_TOTAL (in kB, as the Mila config)
  std::string run_key;          // the run's id ("<UTC timestamp>-<pid>"): reports' runner.run_id, the store's key
};

struct Instance {
  int job = 0;     // index into the selected jobs
  int point = 0;   // sweep point
  int points = 1;  // points of this job
  int slot = 0;    // JOB_ID; 0 for an `all` job
  bool whole_machine = false;
  std::string name;   // BENCH_NAME
  std::string label;  // sweep label ("" without a sweep)
  std::string executable;
  std::vector<std::string> argv;  // arguments after the executable (with --seed)
  std::map<std::string, std::string> env;  // variables the runner sets
  std::vector<int> cpus;
  std::optional<std::uint64_t> memory_bytes;
  long long seed = 0;
  double timeout = 1800;
  std::string cgroup;    // leaf name under the run's parent: "student<i>" or "all"
  std::string log_name;  // <name>[.S<point>].R<run>.D<slot>.log
  std::string report_prefix;  // <suite>.<name>.R<run>.D<slot>.
};

// One job at one sweep point, with its instances (run in parallel).
struct PlannedStep {
  int job = 0;
  int point = 0;
  int points = 1;
  std::string title;  // "loader" or "loader [--batch-size 64]"
  std::vector<Instance> instances;
};

// Every step of one pass over the selected jobs. `executables[i]` is job i's resolved path.
// A job's $VARS expand per instance (throws JobsError naming the job and the variable):
// the variables the runner defines for that instance (instance_variables) first, then
// `env` (the runner's own environment) for any other name.
std::vector<PlannedStep> make_plan(const std::vector<JobSpec>& jobs, const std::vector<std::string>& executables,
                                   const std::vector<Slot>& slots, const PlanSettings& settings,
                                   const std::map<std::string, std::string>& env, const std::string& file);

// The variables the runner defines for one instance, as the Mila config does per instance:
// JOB_ID, CPU_COUNT (its CPUs), CPU_TOTAL, DEVICE_TOTAL (GPUs, or slots without GPUs),
// RAM_TOTAL and RAM_CONSTRAINT (kB), BENCH_NAME, RUN_ID, SUITE_NAME, OUTPUT_DIRECTORY,
// DATA_DIRECTORY, and CUDA_VISIBLE_DEVICES with GPUs. Reads inst.slot, cpus,
// memory_bytes, whole_machine and name.
std::map<std::string, std::string> instance_variables(const Instance& inst, int slots, const PlanSettings& settings);

// The instance as a shell line: "JOB_ID=0 CPU_COUNT=1 ... /path/bench --flag value --seed 100".
std::string shell_line(const Instance& inst);

// "1.5 GiB", "512 MiB", "unlimited".
std::string format_bytes(std::optional<std::uint64_t> bytes);
// "512M", "2G", "1048576" (bytes), "1.5G" -> bytes; throws std::invalid_argument.
std::uint64_t parse_size(const std::string& text);

}  // namespace mlbench::runner
