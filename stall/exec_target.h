// mlbench-stall --exec: the differential analysis of a user's own training command.
// The command runs unchanged in each state of the analysis; the probe (probe/mlbench_probe.py,
// or probe/probe.h in C++) times its loader and writes the run's report, and the environment
// set here tells the probe the mode, the iterations and where to write. The fetch rates S and C,
// which mlbench's benchmarks measure with --fetch-only, come from direct reads of the dataset.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/process.h"
#include "plan.h"

namespace mlbench::stall {

// The runs, in order: synthetic (the probe in compute-only mode), cached (warm), cold (cold; the
// probe evicts each file of the dataset before Python opens it), then the CPU sweep (warm, first N
// CPUs). `pipeline_depth`: batches the loader can hold ahead (its workers' prefetch), covered by
// warm-up. Cache fractions are not run: a user's loader has no item cache to size.
// The named alternative to the command's loader (docs/stall.md, "Advice in your script's terms"):
// mlbench's own loader over the same files, `workers` workers, the command's batch size, the
// dataset in the page cache, timed as the command's runs ("mlbench-loader").
RunSpec plan_exec_loader_run(const StallConfig& c, int workers, int batch_size);

std::vector<RunSpec> plan_exec_runs(const StallConfig& config, const ExecConfig& exec, int pipeline_depth = 0);

// The probe's variables of one run (MLBENCH_PROBE_*, PYTHONPATH with probe/autoprobe first)
// over `base`, the analyzer's environment.
core::Environment exec_environment(const RunSpec& spec, const ExecConfig& exec, const std::filesystem::path& report_dir,
                                   core::Environment base);

// `name` as execvp would find it: a path when it has a '/', else the first executable of that
// name on `path` (a PATH value); "" when there is none.
// Why `path` (a file named by --exec, with a '/') cannot be executed, "" when it can: no
// such file, a directory, or a file without execute permission (with the way to run it).
std::string executable_problem(const std::string& path);
std::string find_executable(const std::string& name, const std::string& path);

// The last `lines` non-empty lines of a file, joined by " | " ("" when unreadable).
std::string last_lines(const std::filesystem::path& file, int lines);

}  // namespace mlbench::stall
