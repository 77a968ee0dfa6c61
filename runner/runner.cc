// The run itself: validate everything first, then for each pass and each step
// launch the step's instances in parallel, watch them (timeouts, Ctrl-C), and
// finish their reports; summary.txt and machine.json keep the run readable
// whatever happens.
#include "runner.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cgroup/slice.h"
#include "core/progress.h"
#include "core/report.h"
#include "core/sysinfo.h"
#include "jobs.h"
#include "outcome.h"
#include "plan.h"
#include "process.h"
#include "reports.h"

extern char** environ;

namespace mlbench::runner {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::string getenv_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// GPUs: the driver's /proc entries, else `nvidia-smi -L`.
int gpu_count() {
  const auto names = core::gpu_names();
  if (!names.empty()) return static_cast<int>(names.size());
  // Only when nvidia-smi is on PATH (no shell spawned on machines without it).
  bool found = false;
  std::istringstream path(getenv_or("PATH", ""));
  for (std::string dir; std::getline(path, dir, ':') && !found;) found = !dir.empty() && access((dir + "/nvidia-smi").c_str(), X_OK) == 0;
  if (!found) return 0;
  FILE* p = popen("nvidia-smi -L 2>/dev/null", "r");
  if (!p) return 0;
  int n = 0;
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    if (std::string(line).rfind("GPU ", 0) == 0) ++n;
  }
  pclose(p);
  return n;
}

std::string last_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

// One live process the runner waits for.
struct Proc {
  pid_t pid = -1;
  bool done = false;
  int status = 0;
  rusage usage{};
  Clock::time_point started;
  Clock::time_point deadline = Clock::time_point::max();
  Clock::time_point kill_at = Clock::time_point::max();
  bool timed_out = false;
  bool interrupted = false;
};

// The run-wide state every step shares.
struct Run {
  Options opt;
  bool interrupted = false;
  int interrupt_count = 0;
  std::optional<cgroup::Hierarchy> cg;
  std::string cg_parent;  // "mlbench/<run-id>"
  cgroup::Isolation isolation = cgroup::Isolation::Affinity;
  std::string self_dir;
  std::map<std::string, std::string> datasets;  // dataset -> "" (ready) or the error
  bool tty = false;
};

// Waits until every process in `procs` has ended, enforcing deadlines and the
// runner's signals. `redraw` is called about twice a second.
void wait_all(Run& run, std::vector<Proc*>& procs, const std::function<void()>& redraw) {
  auto remaining = [&] {
    int n = 0;
    for (auto* p : procs) n += !p->done;
    return n;
  };
  const auto grace = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(run.opt.kill_grace));
  auto last_draw = Clock::now();
  while (remaining() > 0) {
    // Wake for the nearest deadline, a redraw, or a signal.
    auto next = Clock::now() + std::chrono::milliseconds(500);
    for (auto* p : procs) {
      if (p->done) continue;
      next = std::min({next, p->deadline, p->kill_at});
    }
    const double wait_s = std::chrono::duration<double>(next - Clock::now()).count();
    const int sig = wait_runner_signal(wait_s);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      ++run.interrupt_count;
      run.interrupted = true;
      for (auto* p : procs) {
        if (p->done) continue;
        p->interrupted = true;
        if (run.interrupt_count == 1) {
          // The benchmark writes its own "interrupted" report on SIGINT.
          signal_group(p->pid, SIGINT);
          p->kill_at = std::min(p->kill_at, Clock::now() + grace);
        } else {
          signal_group(p->pid, SIGKILL);
        }
      }
      if (run.interrupt_count == 1) {
        std::cout << (run.tty ? "\n" : "") << "mlbench-run: interrupted; stopping the running instances (Ctrl-C again to kill them now)"
                  << std::endl;
      }
    }
    // Reap everything that ended.
    for (;;) {
      int status = 0;
      rusage ru{};
      const pid_t pid = wait4(-1, &status, WNOHANG, &ru);
      if (pid <= 0) break;
      for (auto* p : procs) {
        if (p->pid == pid && !p->done) {
          p->done = true;
          p->status = status;
          p->usage = ru;
          // Anything the instance left behind in its group goes with it.
          signal_group(pid, SIGKILL);
        }
      }
    }
    const auto now = Clock::now();
    for (auto* p : procs) {
      if (p->done) continue;
      if (now >= p->deadline && !p->timed_out) {
        p->timed_out = true;
        signal_group(p->pid, SIGTERM);
        p->kill_at = std::min(p->kill_at, now + grace);
      }
      if (now >= p->kill_at) {
        signal_group(p->pid, SIGKILL);
        p->kill_at = Clock::time_point::max();
      }
    }
    if (redraw && Clock::now() - last_draw >= std::chrono::milliseconds(450)) {
      redraw();
      last_draw = Clock::now();
    }
  }
}

// Runs `mlbench-datagen ensure <dataset>` once per run; "" when the dataset is ready.
std::string ensure_dataset(Run& run, const std::string& dataset, const fs::path& outdir, const std::string& data_dir) {
  if (auto it = run.datasets.find(dataset); it != run.datasets.end()) return it->second;
  std::string& result = run.datasets[dataset];
  const fs::path datagen = fs::path(run.self_dir) / "mlbench-datagen";
  if (access(datagen.c_str(), X_OK) != 0) {
    result = "dataset " + dataset + ": mlbench-datagen not found at " + datagen.string() + " (build it)";
    std::cout << "mlbench-run: " << result << std::endl;
    return result;
  }
  LaunchSpec spec;
  spec.executable = datagen.string();
  spec.argv = {"ensure", dataset, "--root", data_dir};
  spec.log_path = (outdir / ("datagen." + dataset + ".log")).string();
  spec.log_header = "# " + spec.executable + " ensure " + dataset + " --root " + data_dir + "\n";
  std::cout << "mlbench-run: preparing dataset " << dataset << " (log: " << spec.log_path << ")" << std::endl;
  std::string error;
  Proc p;
  p.pid = launch(spec, error);
  if (p.pid < 0) return result = "dataset " + dataset + ": " + error;
  p.started = Clock::now();
  std::vector<Proc*> procs{&p};
  wait_all(run, procs, {});
  if (run.interrupted) {
    run.datasets.erase(dataset);
    return "interrupted";
  }
  if (!WIFEXITED(p.status) || WEXITSTATUS(p.status) != 0) {
    std::string why = last_line(spec.log_path);
    if (why.empty() || why[0] == '#') why = WIFEXITED(p.status) ? fmt::format("exit {}", WEXITSTATUS(p.status)) : "killed";
    result = "dataset " + dataset + ": " + why;
  }
  return result;
}

nlohmann::json usage_json(const Run& run, const Proc& p, const Instance& inst, cgroup::Usage* cg_usage) {
  if (cg_usage) {
    nlohmann::json u = cg_usage->to_json();
    u["source"] = "cgroup";
    return u;
  }
  (void)inst;
  (void)run;
  const double cpu = static_cast<double>(p.usage.ru_utime.tv_sec + p.usage.ru_stime.tv_sec) +
                     static_cast<double>(p.usage.ru_utime.tv_usec + p.usage.ru_stime.tv_usec) / 1e6;
  return {{"cpu_seconds", cpu},
          {"memory_peak_bytes", static_cast<std::uint64_t>(p.usage.ru_maxrss) * 1024},
          {"oom_kills", nullptr},
          {"bytes_read", static_cast<std::uint64_t>(p.usage.ru_inblock) * 512},
          {"source", "rusage"}};
}

struct StepResult {
  int passed = 0;
  int failed = 0;
  bool all_resumed = false;
};

StepResult run_step(Run& run, const PlannedStep& step, const JobSpec& job, int index, int total, const fs::path& outdir,
                    const PlanSettings& settings, Clock::time_point pass_start, int steps_done) {
  StepResult res;
  const auto step_start = Clock::now();
  std::vector<const Instance*> todo;
  for (const auto& inst : step.instances) {
    if (!run.opt.resume.empty() && completed_report(outdir, inst)) {
      ++res.passed;
      continue;
    }
    todo.push_back(&inst);
  }
  if (todo.empty()) {
    res.all_resumed = true;
    return res;
  }
  std::string setup_error;
  if (job.dataset) setup_error = ensure_dataset(run, *job.dataset, outdir, settings.data_directory);
  if (run.interrupted) setup_error = "interrupted";

  std::vector<Proc> procs(todo.size());
  std::vector<std::string> groups(todo.size());
  std::vector<std::string> launch_errors(todo.size());
  std::vector<std::set<fs::path>> before(todo.size());
  if (setup_error.empty()) {
    if (!run.tty) std::cout << fmt::format("[{}/{}] {}: starting {} instance(s)", index, total, step.title, todo.size()) << std::endl;
    for (std::size_t i = 0; i < todo.size(); ++i) {
      const Instance& inst = *todo[i];
      if (!run.opt.resume.empty()) supersede_failures(outdir, inst);
      before[i] = list_reports(outdir, inst.report_prefix);
      LaunchSpec spec;
      spec.executable = inst.executable;
      spec.argv = inst.argv;
      spec.env = inst.env;
      spec.cpus = inst.cpus;
      spec.log_path = (outdir / inst.log_name).string();
      spec.log_header = fmt::format("# slot {} | cpus {} | memory {} | {}\n", inst.slot, core::format_cpu_list(inst.cpus),
                                    format_bytes(inst.memory_bytes), shell_line(inst));
      if (run.cg) {
        groups[i] = run.cg_parent + "/" + inst.cgroup;
        try {
          run.cg->create(groups[i], {inst.cpus, {}, inst.memory_bytes});
          spec.procs_files = run.cg->procs_files(groups[i]);
        } catch (const std::exception& e) {
          launch_errors[i] = e.what();
          continue;
        }
      }
      procs[i].started = Clock::now();
      procs[i].pid = launch(spec, launch_errors[i]);
      if (procs[i].pid < 0) {
        procs[i].done = true;
      } else {
        procs[i].deadline = procs[i].started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(inst.timeout));
      }
    }
    for (std::size_t i = 0; i < todo.size(); ++i) {
      if (!launch_errors[i].empty()) procs[i].done = true;
    }
    std::vector<Proc*> waiting;
    for (auto& p : procs) {
      if (!p.done) waiting.push_back(&p);
    }
    auto redraw = [&] {
      if (!run.tty) return;
      int running = 0;
      for (auto& p : procs) running += !p.done;
      const double eta = core::eta_seconds(steps_done, total, seconds_since(pass_start));
      std::cout << "\r\033[K"
                << status_line(index, total, step.title, running, res.passed, static_cast<int>(todo.size()) - running,
                               seconds_since(step_start), eta)
                << std::flush;
    };
    redraw();
    wait_all(run, waiting, redraw);
  }

  // Finish every instance's report.
  for (std::size_t i = 0; i < todo.size(); ++i) {
    const Instance& inst = *todo[i];
    const Proc& p = procs[i];
    EndFacts f;
    f.setup_error = setup_error;
    f.launch_failed = !launch_errors[i].empty();
    f.launch_error = launch_errors[i];
    f.exited = WIFEXITED(p.status);
    f.exit_code = f.exited ? WEXITSTATUS(p.status) : 0;
    f.signal = WIFSIGNALED(p.status) ? WTERMSIG(p.status) : 0;
    f.timed_out = p.timed_out;
    f.timeout = inst.timeout;
    f.interrupted = p.interrupted;
    std::optional<cgroup::Usage> usage;
    if (run.cg && !groups[i].empty() && setup_error.empty()) {
      usage = run.cg->usage(groups[i]);
      f.oom_kills = usage->oom_kills;
      if (!run.cg->remove(groups[i])) std::cerr << "mlbench-run: warning: cgroup " << groups[i] << " could not be removed" << std::endl;
    }
    std::optional<fs::path> written;
    if (setup_error.empty()) {
      for (const auto& r : list_reports(outdir, inst.report_prefix)) {
        if (!before[i].count(r)) written = r;  // the newest name sorts last
      }
    }
    if (written) {
      if (auto r = read_report(*written)) {
        f.has_report = true;
        f.report_completed = r->value("completed", false);
        f.report_reason = r->value("reason", std::string());
      }
    }
    const Outcome outcome = decide_outcome(f);
    nlohmann::json runner_block = {{"job", inst.name},
                                   {"point", inst.point},
                                   {"sweep", inst.label},
                                   {"slot", inst.slot},
                                   {"cpus", core::format_cpu_list(inst.cpus)},
                                   {"memory_limit_bytes", inst.memory_bytes ? nlohmann::json(*inst.memory_bytes) : nlohmann::json()},
                                   {"command", shell_line(inst)},
                                   {"log", inst.log_name},
                                   {"wall_seconds", p.pid > 0 ? seconds_since(p.started) : 0.0},
                                   {"exit_code", f.exited ? nlohmann::json(f.exit_code) : nlohmann::json()},
                                   {"signal", f.signal ? nlohmann::json(f.signal) : nlohmann::json()}};
    nlohmann::json blocks = {{"isolation", cgroup::to_string(run.isolation)}, {"runner", runner_block}};
    if (p.pid > 0) blocks["resources"] = usage_json(run, p, inst, usage ? &*usage : nullptr);
    nlohmann::json base = {{"name", inst.name},
                           {"suite", settings.suite},
                           {"run_id", settings.run_id},
                           {"jr_id", inst.slot},
                           {"vcd", inst.env.count("CUDA_VISIBLE_DEVICES") ? inst.env.at("CUDA_VISIBLE_DEVICES") : ""},
                           {"seed", inst.seed},
                           {"hostname", core::hostname()},
                           {"resources", nullptr},
                           {"start_time", core::utc_iso8601(std::chrono::system_clock::now() -
                                                            std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                                                Clock::now() - (p.pid > 0 ? p.started : Clock::now())))}};
    try {
      finalize_report(outdir, inst, written, outcome, blocks, base);
    } catch (const std::exception& e) {
      std::cerr << "mlbench-run: error: " << e.what() << std::endl;
    }
    if (outcome.passed) {
      ++res.passed;
    } else {
      ++res.failed;
      if (!run.tty || true) {
        // Kept short: the reason, and where to look.
      }
    }
    if (!outcome.passed) {
      std::cout << (run.tty ? "\r\033[K" : "")
                << fmt::format("  {} slot {}: FAILED ({}), log: {}", step.title, inst.slot, outcome.reason,
                               (outdir / inst.log_name).string())
                << std::endl;
    }
  }
  return res;
}

void write_summary(const fs::path& outdir, const std::vector<std::string>& lines, double total_seconds, bool final) {
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  if (final) text += total_line(total_seconds) + "\n";
  core::write_file_atomic(outdir / "summary.txt", text);
}

}  // namespace

std::string find_jobs_file(const std::string& name, const std::string& source_dir) {
  std::vector<fs::path> candidates{name, name + ".json"};
  if (fs::path(name).is_relative()) {
    for (const fs::path& base : {fs::current_path() / "configs", fs::path(source_dir) / "configs"}) {
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
  Run run;
  run.opt = options;
  Options& opt = run.opt;
  run.self_dir = fs::path(opt.self).parent_path().string();
  if (opt.bench_dir.empty()) opt.bench_dir = (fs::path(run.self_dir) / ".." / "benchmarks").lexically_normal().string();

  // --- Everything is checked before anything runs. ---
  const std::string jobs_file = find_jobs_file(opt.jobs, MLBENCH_SOURCE_DIR);
  if (jobs_file.empty()) {
    std::cerr << "mlbench-run: error: jobs file '" << opt.jobs << "' not found (as given, nor in ./configs or "
              << MLBENCH_SOURCE_DIR << "/configs)" << std::endl;
    return 2;
  }
  std::vector<JobSpec> jobs;
  std::vector<std::string> executables;
  std::ifstream in(jobs_file);
  std::stringstream text;
  text << in.rdbuf();
  if (opt.outdir.empty()) opt.outdir = !opt.resume.empty() ? opt.resume
                                       : getenv_or("OUTPUT_DIRECTORY", "").empty()
                                           ? (getenv_or("BASE", "").empty() ? "output" : getenv_or("BASE", "") + "/output")
                                           : getenv_or("OUTPUT_DIRECTORY", "");
  if (!opt.resume.empty() && !fs::is_directory(opt.resume)) {
    std::cerr << "mlbench-run: error: --resume " << opt.resume << ": no such run directory" << std::endl;
    return 2;
  }
  if (!opt.resume.empty()) opt.outdir = opt.resume;
  const fs::path outdir = fs::absolute(opt.outdir).lexically_normal();
  const std::string data_dir =
      getenv_or("DATA_DIRECTORY", getenv_or("BASE", "").empty() ? (fs::current_path() / "data").string()
                                                                 : getenv_or("BASE", "") + "/data");
  const int gpus = gpu_count();
  const std::vector<int> cpus = core::affinity_cpus();
  const std::uint64_t ram = core::memory_total_bytes();
  std::vector<Slot> slots;
  PlanSettings settings;
  try {
    jobs = select_jobs(parse_jobs(text.str(), jobs_file), opt.names, opt.exclude, jobs_file);
    if (jobs.empty()) throw JobsError(jobs_file + ": --name/--exclude left no job to run");
    for (const auto& j : jobs) {
      const std::string exe = resolve_command(j.cmd, fs::path(jobs_file).parent_path().string(), opt.bench_dir);
      if (exe.empty()) {
        throw JobsError(fmt::format("{}: job {} ({}): field 'cmd': unknown benchmark '{}' (not in {}, nor on PATH; build it or fix the name)",
                                    jobs_file, j.index, j.name, j.cmd, opt.bench_dir));
      }
      executables.push_back(exe);
    }
    std::optional<std::uint64_t> slot_memory;
    if (!opt.slot_memory.empty()) slot_memory = parse_size(opt.slot_memory);
    const int nslots = opt.slots > 0 ? opt.slots : default_slot_count(gpus, static_cast<int>(cpus.size()));
    slots = make_slots(cpus, ram, nslots, slot_memory);
    settings.suite = opt.suite.empty() ? fs::path(jobs_file).stem().string() : opt.suite;
    settings.uid = opt.uid;
    settings.run_id = static_cast<int>(opt.uid);
    settings.gpus = gpus;
    settings.output_directory = outdir.string();
    settings.data_directory = data_dir;
    settings.default_timeout = opt.timeout ? *opt.timeout : opt.default_timeout;
    settings.timeout_forced = opt.timeout.has_value();
    settings.all_cpus = cpus;
  } catch (const JobsError& e) {
    std::cerr << "mlbench-run: error: " << e.what() << std::endl;
    return 2;
  } catch (const std::invalid_argument& e) {
    std::cerr << "mlbench-run: error: " << e.what() << std::endl;
    return 2;
  }
  auto env_for = [&](const fs::path& pass_dir) {
    auto env = process_environment();
    env["OUTPUT_DIRECTORY"] = pass_dir.string();
    env["DATA_DIRECTORY"] = data_dir;
    if (!env.count("BASE")) env["BASE"] = fs::current_path().string();
    return env;
  };
  auto pass_dir = [&](int k) { return opt.repeat_suite > 1 ? outdir / ("R" + std::to_string(k)) : outdir; };
  auto plan_for = [&](int k) {
    PlanSettings s = settings;
    s.run_id = static_cast<int>(opt.uid) + k;
    s.uid = opt.uid + k;
    s.output_directory = pass_dir(k).string();
    return std::make_pair(s, make_plan(jobs, executables, slots, s, env_for(pass_dir(k)), jobs_file));
  };
  try {
    plan_for(0);  // $VARS of every selected job
  } catch (const JobsError& e) {
    std::cerr << "mlbench-run: error: " << e.what() << std::endl;
    return 2;
  }

  if (opt.show) {
    for (const auto& j : jobs) {
      std::cout << fmt::format("{:<20} {:<8} {}", j.name, j.cgroup == CgroupKind::All ? "all" : "student", j.cmd);
      if (j.dataset) std::cout << "  (dataset " << *j.dataset << ")";
      std::cout << "\n";
    }
    return 0;
  }
  if (opt.dry) {
    std::cout << fmt::format("# jobs file {} | {} slot(s) | {} | outdir {}\n", jobs_file, slots.size(),
                             gpus > 0 ? fmt::format("{} GPU(s)", gpus) : "no GPU", outdir.string());
    for (int k = 0; k < opt.repeat_suite; ++k) {
      auto [s, plan] = plan_for(k);
      int idx = 0;
      for (const auto& step : plan) {
        ++idx;
        std::cout << fmt::format("[{}/{}] {}{}\n", idx, plan.size(), step.title,
                                 opt.repeat_suite > 1 ? fmt::format(" (pass {})", k) : "");
        if (jobs[static_cast<std::size_t>(step.job)].dataset) {
          std::cout << "  dataset: " << (fs::path(run.self_dir) / "mlbench-datagen").string() << " ensure "
                    << *jobs[static_cast<std::size_t>(step.job)].dataset << " --root " << data_dir << "\n";
        }
        for (const auto& inst : step.instances) {
          std::cout << fmt::format("  slot {} | cpus {} | memory {} | timeout {:g}s | {}\n", inst.slot,
                                   core::format_cpu_list(inst.cpus), format_bytes(inst.memory_bytes), inst.timeout,
                                   shell_line(inst));
        }
      }
    }
    return 0;
  }

  // --- Isolation ---
  block_runner_signals();
  run.tty = core::is_terminal(1);
  const std::string run_id = fmt::format("{}-{}", core::utc_file_timestamp(std::chrono::system_clock::now()), getpid());
  if (!opt.no_cgroup) {
    std::string why;
    run.cg = cgroup::Hierarchy::open(&why);
    if (run.cg) {
      run.cg_parent = "mlbench/" + run_id;
      try {
        std::error_code ec;
        if (!fs::exists(run.cg->dir("cpuset", "mlbench"), ec)) run.cg->create("mlbench", {cpus, {}, std::nullopt});
        run.cg->create(run.cg_parent, {cpus, {}, std::nullopt});
        run.isolation = run.cg->isolation();
      } catch (const std::exception& e) {
        why = e.what();
        run.cg->remove(run.cg_parent);
        run.cg.reset();
      }
    }
    if (!run.cg) std::cerr << "mlbench-run: warning: no cgroups (" << why << "); confining instances with CPU affinity only" << std::endl;
  }

  int failed_total = 0;
  bool stopped = false;
  const auto run_start = Clock::now();
  for (int k = 0; k < opt.repeat_suite && !run.interrupted && !stopped; ++k) {
    auto [settings_k, plan] = plan_for(k);
    const fs::path dir = pass_dir(k);
    try {
      fs::create_directories(dir);
      nlohmann::json machine = core::machine_description();
      machine["isolation"] = cgroup::to_string(run.isolation);
      machine["cgroup_parent"] = run.cg ? nlohmann::json(run.cg_parent) : nlohmann::json();
      machine["gpus_detected"] = gpus;
      machine["memory_total_bytes"] = ram;
      nlohmann::json sl = nlohmann::json::array();
      for (const auto& s : slots) {
        sl.push_back({{"index", s.index}, {"cpus", core::format_cpu_list(s.cpus)},
                      {"memory_bytes", s.memory_bytes ? nlohmann::json(*s.memory_bytes) : nlohmann::json()}});
      }
      machine["slots"] = sl;
      machine["run"] = {{"jobs_file", fs::absolute(jobs_file).string()}, {"suite", settings_k.suite},
                        {"run_id", settings_k.run_id}, {"uid", opt.uid}, {"pass", k},
                        {"data_directory", data_dir}, {"started", core::utc_iso8601(std::chrono::system_clock::now())}};
      core::write_json_atomic(dir / "machine.json", machine);
    } catch (const std::exception& e) {
      std::cerr << "mlbench-run: error: " << dir.string() << ": " << e.what() << std::endl;
      if (run.cg) run.cg->remove(run.cg_parent);
      return 2;
    }
    std::vector<std::string> lines;
    const auto pass_start = Clock::now();
    const int total = static_cast<int>(plan.size());
    for (int s = 0; s < total && !run.interrupted && !stopped; ++s) {
      const PlannedStep& step = plan[static_cast<std::size_t>(s)];
      const auto t0 = Clock::now();
      const StepResult r = run_step(run, step, jobs[static_cast<std::size_t>(step.job)], s + 1, total, dir, settings_k,
                                    pass_start, s);
      const std::string line =
          summary_line(s + 1, total, r.failed, static_cast<int>(step.instances.size()), seconds_since(t0), step.title, r.all_resumed);
      std::cout << (run.tty ? "\r\033[K" : "") << line << std::endl;
      lines.push_back(line);
      failed_total += r.failed;
      if (r.failed > 0 && opt.raise_error) {
        std::cout << "mlbench-run: --raise-error: stopping after the first failed job" << std::endl;
        stopped = true;
      }
      try {
        write_summary(dir, lines, seconds_since(pass_start), false);
      } catch (const std::exception& e) {
        std::cerr << "mlbench-run: error: " << e.what() << std::endl;
      }
    }
    if (run.interrupted && static_cast<int>(lines.size()) < total) {
      lines.push_back(fmt::format("Interrupted: {} of {} job(s) not run", total - static_cast<int>(lines.size()), total));
    }
    try {
      write_summary(dir, lines, seconds_since(pass_start), true);
    } catch (const std::exception& e) {
      std::cerr << "mlbench-run: error: " << e.what() << std::endl;
    }
    std::cout << total_line(seconds_since(pass_start)) << std::endl;
  }
  if (run.cg) {
    run.cg->remove(run.cg_parent);
    std::error_code ec;
    // Shared by concurrent runs: removed only when empty (rmdir fails on a busy one).
    for (const char* c : {"cpuset", "cpu", "cpuacct", "memory", "blkio"}) {
      try {
        fs::remove(run.cg->dir(c, "mlbench"), ec);
      } catch (const cgroup::CgroupError&) {
      }
    }
  }
  std::cout << "Results: " << outdir.string() << (opt.repeat_suite > 1 ? "/R*" : "") << " (summary.txt, machine.json, reports, logs)"
            << std::endl;
  (void)run_start;
  if (run.interrupted) return 130;
  return failed_total > 0 ? 1 : 0;
}

}  // namespace mlbench::runner
