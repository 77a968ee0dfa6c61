// The run itself: validate everything first (jobs file, commands, slots, $VARS),
// then --show, --dry, or the passes through the scheduler with a local launcher;
// summary.txt and machine.json keep the run readable whatever happens.
#include "runner.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>
#include <sstream>

#include <fmt/format.h>

#include "core/build_info.h"
#include "core/cli.h"
#include "core/credentials.h"
#include "core/environment.h"
#include "core/layout.h"
#include "core/progress.h"
#include "core/report.h"
#include "core/report_name.h"
#include "core/sysinfo.h"
#include "datagen.h"
#include "gpus.h"
#include "jobs.h"
#include "local_launcher.h"
#include "output.h"
#include "plan.h"
#include "report/report_input.h"
#include "report/targets.h"
#include "run_directory.h"
#include "run_results.h"
#include "scheduler.h"
#include "slurm_batch.h"
#include "slurm_launcher.h"
#include "store_recorder.h"

namespace mlbench::runner {

namespace fs = std::filesystem;
using core::getenv_or;

namespace {

// Below this much free space on the output folder the run starts with a warning.
constexpr std::uint64_t kLowSpaceBytes = 256ull << 20;

// Everything a run needs, checked before anything runs.
struct Setup {
  std::string jobs_file;
  std::vector<JobSpec> jobs;
  std::vector<std::string> executables;  // jobs[i]'s resolved command
  fs::path outdir;
  std::string data_dir;
  std::string self_dir;  // where mlbench-run (and mlbench-datagen) live
  int gpus = 0;
  std::uint64_t ram = 0;
  std::vector<Slot> slots;
  PlanSettings settings;
  std::optional<SlurmAllocation> slurm;  // --launcher slurm: the allocation it runs in
};

// $OUTPUT_DIRECTORY, else $BASE/output, else ./output; --resume names the directory itself.
fs::path output_directory(const Options& opt) {
  std::string dir = opt.outdir;
  if (!opt.resume.empty()) {
    dir = opt.resume;
  } else if (dir.empty()) {
    const std::string base = getenv_or("BASE", "");
    dir = getenv_or("OUTPUT_DIRECTORY", base.empty() ? "output" : base + "/output");
  }
  return fs::absolute(dir).lexically_normal();
}

std::string data_directory() {
  const std::string base = getenv_or("BASE", "");
  return getenv_or("DATA_DIRECTORY", base.empty() ? (fs::current_path() / "data").string() : base + "/data");
}

std::string read_text(const std::string& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The selected jobs and their executables; throws JobsError.
void load_jobs(const Options& opt, Setup& s) {
  s.jobs = select_jobs(parse_jobs(read_text(s.jobs_file), s.jobs_file), opt.names, opt.exclude, s.jobs_file);
  if (s.jobs.empty()) throw JobsError(s.jobs_file + ": --name/--exclude left no job to run");
  for (const auto& j : s.jobs) {
    const std::string exe = resolve_command(j.cmd, fs::path(s.jobs_file).parent_path().string(), opt.bench_dir);
    if (exe.empty()) {
      throw JobsError(
          fmt::format("{}: job {} ({}): field 'cmd': unknown benchmark '{}' (not in {}, nor on PATH; "
                      "build it or fix the name)",
                      s.jobs_file, j.index, j.name, j.cmd, opt.bench_dir));
    }
    s.executables.push_back(exe);
  }
}

// Under Slurm the machine is the allocation: its CPUs (numbered 0.. across its nodes;
// Slurm picks the real ones per step) and memory (the allocation's, else this node's
// times the nodes: nodes of a partition are alike).
void slurm_machine(const SlurmAllocation& a, std::vector<int>& cpus, std::uint64_t& ram) {
  cpus.resize(static_cast<std::size_t>(a.total_cpus()));
  std::iota(cpus.begin(), cpus.end(), 0);
  ram = (a.memory_per_node ? *a.memory_per_node : ram) * static_cast<std::uint64_t>(a.nodes());
}

// A slot is one step on one node; its memory limit only when the allocation has one
// (or --slot-memory): else Slurm's defaults apply. Throws std::invalid_argument.
void check_slurm_slots(const SlurmAllocation& a, std::optional<std::uint64_t> slot_memory, std::vector<Slot>& slots) {
  const int biggest = *std::max_element(a.cpus_per_node.begin(), a.cpus_per_node.end());
  for (Slot& slot : slots) {
    if (static_cast<int>(slot.cpus.size()) > biggest) {
      throw std::invalid_argument(
          fmt::format("--launcher slurm: a slot of {} CPUs does not fit on one node of the "
                      "allocation (at most {} CPUs): use more --slots",
                      slot.cpus.size(), biggest));
    }
    if (!a.memory_per_node && !slot_memory) slot.memory_bytes.reset();
  }
}

// Slots and the plan settings of pass 0; throws std::invalid_argument (a bad --slot-memory).
void load_machine(const Options& opt, Setup& s) {
  std::vector<int> cpus = core::affinity_cpus();
  s.gpus = gpu_count();
  s.ram = core::memory_total_bytes();
  if (s.slurm) slurm_machine(*s.slurm, cpus, s.ram);
  std::optional<std::uint64_t> slot_memory;
  if (!opt.slot_memory.empty()) {
    slot_memory = parse_size(opt.slot_memory);
    // More than the machine has limits nothing (and a huge value once wrapped to 0 bytes).
    if (*slot_memory > s.ram && s.ram > 0) {
      throw std::invalid_argument(fmt::format("--slot-memory {}: {} is more than this machine's memory ({})",
                                              opt.slot_memory, format_bytes(*slot_memory), format_bytes(s.ram)));
    }
  }
  int nslots = opt.slots > 0 ? opt.slots : default_slot_count(s.gpus, static_cast<int>(cpus.size()));
  // In an allocation without --slots: its tasks, as srun would run them.
  if (s.slurm && opt.slots <= 0) nslots = slurm_default_slots(*s.slurm, nslots);
  s.slots = make_slots(cpus, s.ram, nslots, slot_memory);
  if (s.slurm) check_slurm_slots(*s.slurm, slot_memory, s.slots);
  PlanSettings& p = s.settings;
  p.suite = opt.suite.empty() ? fs::path(s.jobs_file).stem().string() : opt.suite;
  // The suite names the reports' files and the Slurm job: a '/' or ".." would write outside the run's folder.
  if (const std::string why = name_problem(p.suite); !why.empty()) {
    throw std::invalid_argument(
        opt.suite.empty()
            ? fmt::format("the suite name '{}' (the jobs file's name) {}; give --suite NAME", printable(p.suite), why)
            : fmt::format("--suite '{}' {}", printable(opt.suite), why));
  }
  p.uid = opt.uid;
  p.run_id = static_cast<int>(opt.uid);
  p.gpus = s.gpus;
  p.output_directory = s.outdir.string();
  p.data_directory = s.data_dir;
  p.default_timeout = opt.timeout ? *opt.timeout : opt.default_timeout;
  p.timeout_forced = opt.timeout.has_value();
  p.all_cpus = cpus;
  p.ram_total = s.ram;
}

fs::path pass_dir(const Options& opt, const fs::path& outdir, int k) {
  return opt.repeat_suite > 1 ? outdir / ("R" + std::to_string(k)) : outdir;
}

// Pass k: its directory, settings and plan (throws JobsError for an unset $VAR).
Pass make_pass(const Options& opt, const Setup& s, int k) {
  Pass pass;
  pass.index = k;
  pass.dir = pass_dir(opt, s.outdir, k);
  pass.settings = s.settings;
  pass.settings.run_id = static_cast<int>(opt.uid) + k;
  pass.settings.uid = opt.uid + k;
  pass.settings.output_directory = pass.dir.string();
  // The environment the jobs' $VARS expand from beside each instance's own variables (plan.h).
  core::Environment env = core::current_environment();
  env["OUTPUT_DIRECTORY"] = pass.dir.string();
  env["DATA_DIRECTORY"] = s.data_dir;
  if (!env.count("BASE")) env["BASE"] = fs::current_path().string();
  pass.plan = make_plan(s.jobs, s.executables, s.slots, pass.settings, env, s.jobs_file);
  return pass;
}

// Checks the options, the jobs file and the machine; prints the one error line and
// returns false when something is wrong.
bool load(Options& opt, Setup& s) {
  s.self_dir = fs::path(opt.self).parent_path().string();
  if (opt.bench_dir.empty()) opt.bench_dir = core::layout::benchmarks_dir().string();
  s.jobs_file = find_jobs_file(opt.jobs, core::layout::configs_dir().string());
  if (s.jobs_file.empty()) {
    std::cerr << "mlbench-run: error: jobs file '" << opt.jobs << "' not found (as given, nor in ./configs or "
              << core::layout::configs_dir().string() << ")" << std::endl;
    return false;
  }
  if (!opt.resume.empty() && !fs::is_directory(opt.resume)) {
    std::cerr << "mlbench-run: error: --resume " << opt.resume << ": no such run directory" << std::endl;
    return false;
  }
  s.outdir = output_directory(opt);
  s.data_dir = data_directory();
  try {
    if (opt.launcher == "slurm" && !opt.sbatch) {
      std::string why;
      s.slurm = slurm_allocation(core::current_environment(), &why);
      if (!s.slurm) throw std::invalid_argument("--launcher slurm: " + why);
    }
    load_jobs(opt, s);
    load_machine(opt, s);
    make_pass(opt, s, 0);              // $VARS of every selected job
  } catch (const std::exception& e) {  // JobsError, std::invalid_argument
    std::cerr << "mlbench-run: error: " << e.what() << std::endl;
    return false;
  }
  return true;
}

void show_jobs(const Setup& s) {
  for (const auto& j : s.jobs) {
    std::cout << fmt::format("{:<20} {:<8} {}", j.name, j.cgroup == CgroupKind::All ? "all" : "student", j.cmd);
    if (j.dataset) std::cout << "  (dataset " << *j.dataset << ")";
    std::cout << "\n";
  }
}

void print_dry(const Options& opt, const Setup& s) {
  std::cout << fmt::format("# jobs file {} | {} slot(s) | {} | outdir {}\n", s.jobs_file, s.slots.size(),
                           s.gpus > 0 ? fmt::format("{} GPU(s)", s.gpus) : "no GPU", s.outdir.string());
  for (int k = 0; k < opt.repeat_suite; ++k) {
    const Pass pass = make_pass(opt, s, k);
    int idx = 0;
    for (const auto& step : pass.plan) {
      std::cout << fmt::format("[{}/{}] {}{}\n", ++idx, pass.plan.size(), step.title,
                               opt.repeat_suite > 1 ? fmt::format(" (pass {})", k) : "");
      if (const auto& dataset = s.jobs[static_cast<std::size_t>(step.job)].dataset) {
        std::cout << "  dataset: " << datagen_path(s.self_dir).string() << " ensure " << *dataset << " --root "
                  << s.data_dir << "\n";
      }
      for (const auto& inst : step.instances) {
        std::cout << fmt::format("  slot {} | cpus {} | memory {} | timeout {:g}s | {}\n", inst.slot,
                                 core::format_cpu_list(inst.cpus), format_bytes(inst.memory_bytes), inst.timeout,
                                 shell_line(inst));
      }
    }
  }
}

// What the end-of-run results need: this machine kind's targets and whether to colour.
RunEnd end_of_run(const Setup& s) {
  std::vector<std::string> gpus = core::gpu_names();
  if (s.gpus > 0 && gpus.empty()) gpus = {"unknown GPU"};  // seen by nvidia-smi only: no model to match
  const char* no_color = std::getenv("NO_COLOR");
  RunEnd end;
  end.outdir = s.outdir;
  end.suite = s.settings.suite;
  end.targets = report::targets_for_machine(gpus, report::default_target_dirs(), &end.no_targets_why);
  end.color = core::is_terminal(1) && !(no_color && *no_color);
  return end;
}

// A full disk loses results (every failed write fails the run): say so before it starts.
void warn_if_low_space(const fs::path& outdir) {
  fs::path at = outdir;
  std::error_code ec;
  while (!fs::exists(at, ec) && at.has_parent_path() && at != at.parent_path()) at = at.parent_path();
  const fs::space_info space = fs::space(at, ec);
  if (ec || space.available >= kLowSpaceBytes) return;
  std::cerr << "mlbench-run: warning: only " << format_bytes(space.available) << " free on " << at.string()
            << " (the output folder); reports, logs and summary.txt need room, and a full disk fails the run"
            << std::endl;
}

// The passes for real; the exit code.
// The run's shared secret for partitioned caches (pipeline/remedies/peer_cache.h): every instance of
// this run, local or a Slurm step, inherits $MLBENCH_PEER_SECRET; one the user set is kept.
// Only processes of this run hold it: the instances of another run cannot read their items.
void give_the_run_a_peer_secret() {
  if (const char* v = std::getenv("MLBENCH_PEER_SECRET"); v && *v) return;
  ::setenv("MLBENCH_PEER_SECRET", core::random_hex(32).c_str(), 1);
}

// The store a run records into: --store, else <outdir>/results.db; "" with --no-store.
std::string store_spec(const Options& opt, const Setup& s) {
  if (opt.no_store) return "";
  if (!opt.store.empty()) return opt.store;
  std::error_code ec;
  fs::create_directories(s.outdir, ec);  // a failure is the store's one line (and machine.json's)
  return (s.outdir / "results.db").string();
}

store::RunRecord run_record(const Options& opt, const Setup& s, const std::string& key) {
  store::RunRecord r;
  r.run_id = key;
  r.suite = s.settings.suite;
  r.jobs_file = s.jobs_file;
  r.started_at = core::utc_iso8601(std::chrono::system_clock::now());
  r.mlbench_version = core::build_info::kVersion;
  r.mlbench_commit = core::build_info::kGitCommit;
  r.command = "mlbench-run";
  for (const std::string& a : opt.args) r.command += " " + a;
  r.command = core::mask_credentials(r.command);  // a --store URL's password is never stored
  r.outdir = s.outdir.string();
  return r;
}

int execute(const Options& opt, Setup s) {
  give_the_run_a_peer_secret();
  const std::string run_id = fmt::format("{}-{}", core::utc_file_timestamp(std::chrono::system_clock::now()), getpid());
  // --resume continues the same run in the store.
  const std::string resumed = opt.resume.empty() ? "" : resumed_run_id(s.outdir);
  s.settings.run_key = resumed.empty() ? run_id : resumed;
  std::unique_ptr<Launcher> chosen;
  std::optional<std::string> cgroup_parent;
  try {
    if (s.slurm) {
      chosen = std::make_unique<SlurmLauncher>(*s.slurm, opt.kill_grace);
    } else {
      auto local = std::make_unique<LocalLauncher>(!opt.no_cgroup, s.settings.all_cpus, run_id);
      cgroup_parent = local->cgroup_parent();
      chosen = std::move(local);
    }
  } catch (const std::exception& e) {
    std::cerr << "mlbench-run: error: " << e.what() << std::endl;
    return 2;
  }
  Launcher& launcher = *chosen;
  Output output(std::cout, core::is_terminal(1));
  StoreRecorder recorder(store_spec(opt, s), run_record(opt, s, s.settings.run_key), s.outdir, std::cerr);
  SchedulerOptions scheduling{!opt.resume.empty(),      opt.raise_error, opt.kill_grace,
                              datagen_path(s.self_dir), s.data_dir,      {}};
  scheduling.on_report = [&](const FinalReport& report, const PlanSettings& p) { recorder.record(report, p.run_id); };
  Scheduler scheduler(launcher, output, scheduling);
  const RunFacts facts{launcher.isolation(), cgroup_parent, s.gpus, s.ram, s.slots, s.jobs_file, s.data_dir, opt.uid,
                       s.settings.run_key};
  warn_if_low_space(s.outdir);
  std::vector<Pass> passes;
  for (int k = 0; k < opt.repeat_suite; ++k) passes.push_back(make_pass(opt, s, k));
  int failed = 0;
  try {
    failed = scheduler.run(passes, s.jobs, [&](const Pass& p) {
      try {
        write_machine_json(p.dir, facts, p.settings, p.index);
      } catch (const std::exception& e) {
        // Named once: the writers' messages name the file already.
        const std::string what = e.what();
        throw std::runtime_error(what.find(p.dir.string()) != std::string::npos ? what : p.dir.string() + ": " + what);
      }
      // The store after the run folder's own files: it must never cost the run its reports.
      recorder.open();
    });
  } catch (const std::exception& e) {  // machine.json could not be written: the run directory is unusable
    std::cerr << "mlbench-run: error: " << e.what() << std::endl;
    recorder.finish("failed");
    return 2;
  }
  recorder.finish(scheduler.interrupted() ? "interrupted" : "finished");
  RunEnd end = end_of_run(s);
  end.failed = scheduler.failed_instances();
  end.finished_summaries = scheduler.finished_summaries();
  const bool html_ok = report_results(output, passes, end);
  if (scheduler.write_failures() > 0) {
    // Never name results that are not on disk as if they were.
    std::cerr << "mlbench-run: error: " << scheduler.write_failures() << " write(s) of result files in "
              << s.outdir.string() << " failed (named above); the run's results are incomplete" << std::endl;
    return scheduler.interrupted() ? 130 : 1;
  }
  output.line("Results: " + s.outdir.string() + (opt.repeat_suite > 1 ? "/R*" : "") +
              " (summary.txt, machine.json, reports, logs)");
  if (scheduler.interrupted()) return 130;
  return failed > 0 || !html_ok || recorder.failed() ? 1 : 0;
}

}  // namespace

std::string find_jobs_file(const std::string& name, const std::string& configs_dir) {
  std::vector<fs::path> candidates{name, name + ".json"};
  if (fs::path(name).is_relative()) {
    for (const fs::path& base : {fs::current_path() / "configs", fs::path(configs_dir)}) {
      candidates.push_back(base / name);
      candidates.push_back(base / (name + ".json"));
    }
  }
  for (const auto& c : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(c, ec)) return c.string();
  }
  return "";
}

std::string resolve_command(const std::string& cmd, const std::string& jobs_dir, const std::string& bench_dir) {
  auto executable = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0;
  };
  if (cmd.find('/') != std::string::npos) {
    fs::path p = cmd;
    if (p.is_relative()) p = fs::path(jobs_dir) / p;
    return executable(p) ? fs::absolute(p).lexically_normal().string() : "";
  }
  if (const fs::path p = fs::path(bench_dir) / cmd; executable(p)) return fs::absolute(p).lexically_normal().string();
  std::istringstream path(getenv_or("PATH", ""));
  for (std::string dir; std::getline(path, dir, ':');) {
    if (!dir.empty() && executable(fs::path(dir) / cmd)) return (fs::path(dir) / cmd).string();
  }
  return "";
}

int run(const Options& options) {
  Options opt = options;
  Setup setup;
  if (!load(opt, setup)) return 2;
  if (opt.show) {
    show_jobs(setup);
    return 0;
  }
  if (opt.dry) {
    print_dry(opt, setup);
    return 0;
  }
  if (opt.sbatch) return submit_batch(opt, setup.jobs_file, setup.settings.suite, setup.outdir);
  return execute(opt, setup);
}

}  // namespace mlbench::runner
