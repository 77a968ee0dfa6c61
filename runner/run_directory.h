// The run directory (Contract 3) as the runner writes it: machine.json at the
// start of a pass, summary.txt after every step, and each instance's final report
// (its own, or one the runner writes) with the runner's blocks. File naming and
// --resume bookkeeping of the reports live in reports.h.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "launcher.h"
#include "outcome.h"
#include "plan.h"
#include "reports.h"

namespace mlbench::runner {

// What machine.json says about the run beside core::machine_description().
struct RunFacts {
  std::string isolation;                    // "cgroup-v1", "affinity", ...
  std::optional<std::string> cgroup_parent; // "mlbench/<run-id>"
  int gpus = 0;
  std::uint64_t memory_total_bytes = 0;
  std::vector<Slot> slots;
  std::string jobs_file;
  std::string data_directory;
  long long uid = 0;
  std::string run_key;  // machine.json's run_id (the results store's key of the run)
};

// Creates `dir` and writes dir/machine.json for pass `pass`; throws on I/O errors.
void write_machine_json(const std::filesystem::path& dir, const RunFacts& run, const PlanSettings& settings, int pass);

// summary.txt: the status lines, and with `final` the "Total Time" line.
void write_summary(const std::filesystem::path& dir, const std::vector<std::string>& lines, double total_seconds,
                   bool final);

// The report an instance wrote during its run: the newest of its reports not in `before`.
std::optional<std::filesystem::path> new_report(const std::filesystem::path& dir, const Instance& inst,
                                                const std::set<std::filesystem::path>& before);

// Writes the instance's final report: its own (`written`) or a new one, with the
// isolation, runner and resources blocks, and returns it. `ending`: nullopt when it was
// never launched.
FinalReport write_instance_report(const std::filesystem::path& dir, const Instance& inst, const PlanSettings& settings,
                                  const std::string& isolation, const std::optional<Ending>& ending,
                                  const std::optional<std::filesystem::path>& written, const Outcome& outcome);

}  // namespace mlbench::runner
