// mlbench-run: jobs file -> plan -> parallel instances in slices -> reports,
// summary.txt and machine.json (Contracts 2 and 3). `run` is the whole program
// after flag parsing; main.cc only parses flags.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mlbench::runner {

struct Options {
  std::string jobs = "fast.json";
  std::vector<std::string> names;
  std::vector<std::string> exclude;
  std::string outdir;  // "" = $OUTPUT_DIRECTORY, else $BASE/output, else ./output
  long long uid = 0;
  int repeat_suite = 1;
  int slots = 0;  // 0 = default
  bool dry = false;
  bool show = false;
  bool no_cgroup = false;
  std::optional<double> timeout;  // overrides every job's timeout
  double default_timeout = 1800;
  double kill_grace = 10;
  bool raise_error = false;
  std::string resume;  // run directory to complete
  std::string suite;   // "" = the jobs file's stem
  std::string slot_memory;  // "" = RAM_TOTAL / slots
  std::string bench_dir;    // "" = <dir of mlbench-run>/../benchmarks
  std::string self;         // path of this executable (argv[0] resolved)
  std::string launcher = "local";  // "local" or "slurm" (each instance a job step; docs/runner.md)
  bool sbatch = false;             // write and submit a batch script that reruns these arguments under Slurm
  std::string sbatch_args;         // sbatch options for it (default "--nodes=1 --exclusive")
  std::vector<std::string> args;   // the command line after argv[0], as given (for --sbatch)
  std::string store;               // results store: a file or postgresql:// URL; "" = <outdir>/results.db
  bool no_store = false;           // record nothing in a store
};

// Exit codes: 0 all passed, 1 an instance failed or a result file (report,
// summary.txt) could not be written, 2 usage or jobs-file error
// (nothing ran), 130 interrupted.
int run(const Options& options);

// Where the jobs file is: the path as given, else configs/<name> under the working
// directory, else under the source tree; ".json" may be left out. "" when not found.
std::string find_jobs_file(const std::string& name, const std::string& configs_dir);

// The executable for a job's `cmd`: with a '/', a path (relative to the jobs file's
// directory); else <bench_dir>/<cmd>, then PATH. "" when not found.
std::string resolve_command(const std::string& cmd, const std::string& jobs_dir, const std::string& bench_dir);

}  // namespace mlbench::runner
