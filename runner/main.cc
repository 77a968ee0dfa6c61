// mlbench-run: runs the jobs of a jobs file, one instance per slot in parallel,
// each confined to its slice; writes reports, logs, summary.txt, machine.json.
// See docs/runner.md.
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>

#include "core/layout.h"
#include "core/cli.h"
#include "jobs.h"
#include "runner.h"

namespace {
// Longest --timeout and --kill-grace (seconds, ~31 years): longer ones overflow the clock's nanoseconds.
constexpr double kMaxTimeout = 1e9;

std::string self_path(const char* argv0) {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) return std::string(buf, static_cast<std::size_t>(n));
  return std::filesystem::absolute(argv0).string();
}
}  // namespace

int main(int argc, char** argv) {
  using namespace mlbench::runner;
  Options o;
  std::string names, exclude;
  double timeout = 0;
  CLI::App app{"mlbench-run: run the benchmarks of a jobs file, one instance per slot in parallel, each in its "
               "cgroup slice. Docs: docs/runner.md",
               "mlbench-run"};
  app.add_option("--jobs", o.jobs, "Jobs file (a path, or a name in configs/)")->capture_default_str();
  app.add_option("--name", names, "Only these jobs (comma list)");
  app.add_option("--exclude", exclude, "Skip these jobs (comma list)");
  app.add_option("--outdir", o.outdir, "Run directory (default $OUTPUT_DIRECTORY, else $BASE/output, else ./output)");
  app.add_option("--uid", o.uid, "Run id: RUN_ID and seeds uid+(slot+1)*100")->capture_default_str();
  app.add_option("--repeat-suite", o.repeat_suite, "Run the whole suite K times into outdir/R<k> (RUN_ID uid+k)")
      ->check(mlbench::core::integer_in(1, 1000))
      ->capture_default_str();
  app.add_option("--slots", o.slots, "Slots on a machine without GPUs (default: one per 2 CPUs)")
      ->check(mlbench::core::integer_in(1, 4096));
  app.add_option("--slot-memory", o.slot_memory, "Memory limit per slot (e.g. 512M, 4G; default RAM_TOTAL/slots)");
  app.add_flag("--dry", o.dry, "Print every command with its slot, CPU set and memory limit; run nothing");
  app.add_flag("--show", o.show, "List the selected jobs and exit");
  app.add_flag("--no-cgroup", o.no_cgroup, "Do not create cgroups; confine instances with CPU affinity only");
  app.add_option("--timeout", timeout, "Timeout per instance in seconds, overriding the jobs' own (default: the "
                                       "job's `timeout`, else 1800)")
      ->check(mlbench::core::number_above(0, kMaxTimeout));
  app.add_option("--kill-grace", o.kill_grace, "Seconds between SIGTERM and SIGKILL")
      ->check(mlbench::core::number_in(0, kMaxTimeout))
      ->capture_default_str();
  app.add_flag("--raise-error", o.raise_error, "Stop after the first job with a failed instance");
  app.add_option("--resume", o.resume,
                 "Complete this run directory: rerun only instances without a completed report "
                 "(the same run in the results store)");
  app.add_option("--store", o.store,
                 "Results store: each instance recorded as its report lands (a SQLite file or a postgresql:// URL; "
                 "default <outdir>/results.db; docs/report.md)");
  app.add_flag("--no-store", o.no_store, "Record nothing in a results store (the JSON reports only)");
  app.add_option("--suite", o.suite, "SUITE_NAME of the reports (default: the jobs file's name without .json)");
  app.add_option("--bench-dir", o.bench_dir, "Where benchmark commands are looked up (default <bin>/../benchmarks)");
  app.add_option("--launcher", o.launcher,
                 "local: instances on this machine; slurm: each a job step (srun) in the "
                 "Slurm allocation mlbench-run runs in")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
  app.add_flag("--sbatch", o.sbatch,
               "Write <outdir>/mlbench.sbatch running these arguments with --launcher slurm, "
               "submit it with sbatch and exit");
  app.add_option("--sbatch-args", o.sbatch_args, "Options of that batch job (default \"--nodes=1 --exclusive\")");
  app.set_version_flag("--version", mlbench::core::layout::version_line("mlbench-run"), "The version and the commit it was built from");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "mlbench-run: error: " << mlbench::core::parse_error_line(e) << " (see --help)" << std::endl;
    return 2;
  }
  o.names = split_list(names);
  o.exclude = split_list(exclude);
  if (timeout > 0) o.timeout = timeout;
  o.self = self_path(argv[0]);
  o.args.assign(argv + 1, argv + argc);
  return run(o);
}
