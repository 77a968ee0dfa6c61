// Passes, steps and instances through a Launcher (see scheduler.h).
#include "scheduler.h"

#include <signal.h>

#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "core/progress.h"
#include "core/sysinfo.h"
#include "datagen.h"
#include "outcome.h"
#include "reports.h"
#include "run_directory.h"

namespace mlbench::runner {

namespace fs = std::filesystem;

namespace {

// The live line is redrawn at least this often, also when nothing ends.
constexpr double kTick = 0.5;

LaunchRequest instance_request(const Instance& inst, const fs::path& dir) {
  LaunchRequest r;
  r.executable = inst.executable;
  r.argv = inst.argv;
  r.env = inst.env;
  r.slot = inst.slot;
  r.cpus = inst.cpus;
  r.memory_bytes = inst.memory_bytes;
  r.cgroup = inst.cgroup;
  r.log = dir / inst.log_name;
  r.timeout = inst.timeout;
  r.whole_allocation = inst.whole_machine;
  r.log_header = fmt::format("# slot {} | cpus {} | memory {} | {}\n", inst.slot, core::format_cpu_list(inst.cpus),
                             format_bytes(inst.memory_bytes), shell_line(inst));
  return r;
}

// Everything known about an ended (or never launched) instance.
EndFacts end_facts(const std::optional<Ending>& ending, const std::string& setup_error) {
  EndFacts f;
  f.setup_error = setup_error;
  if (!ending) return f;
  f.launch_failed = !ending->launched();
  f.launch_error = ending->launch_error;
  f.exited = ending->exited;
  f.exit_code = ending->exit_code;
  f.signal = ending->signal;
  f.oom_kills = ending->oom_kills;
  f.state = ending->state;
  return f;
}

void read_own_report(const std::optional<fs::path>& written, EndFacts& f) {
  if (!written) return;
  if (const auto r = read_instance_report(*written)) {
    f.has_report = true;
    f.report_completed = r->completed;
    f.report_reason = r->reason;
  }
}

template <typename Watched>
int running(const std::vector<Watched>& procs) {
  return static_cast<int>(std::count_if(procs.begin(), procs.end(), [](const auto& w) { return !w.ending; }));
}

}  // namespace

Scheduler::Scheduler(Launcher& launcher, Output& output, SchedulerOptions options)
    : launcher_(launcher), output_(output), options_(std::move(options)) {}

int Scheduler::run(const std::vector<Pass>& passes, const std::vector<JobSpec>& jobs,
                   const std::function<void(const Pass&)>& prepare) {
  int failed = 0;
  for (const Pass& pass : passes) {
    if (interrupted_ || stopped_) break;
    prepare(pass);
    failed += run_pass(pass, jobs);
  }
  return failed;
}

int Scheduler::run_pass(const Pass& pass, const std::vector<JobSpec>& jobs) {
  std::vector<std::string> lines;
  int failed = 0;
  const double start = launcher_.now();
  const int total = static_cast<int>(pass.plan.size());
  for (int s = 0; s < total && !interrupted_ && !stopped_; ++s) {
    const PlannedStep& step = pass.plan[static_cast<std::size_t>(s)];
    const double t0 = launcher_.now();
    const StepResult r =
        run_step(step, jobs[static_cast<std::size_t>(step.job)], {s + 1, total, start}, pass.dir, pass.settings);
    lines.push_back(summary_line(s + 1, total, r.failed, static_cast<int>(step.instances.size()), launcher_.now() - t0,
                                 step.title, r.all_resumed));
    output_.line(lines.back());
    failed += r.failed;
    if (r.failed > 0 && options_.raise_error) {
      output_.line("mlbench-run: --raise-error: stopping after the first failed job");
      stopped_ = true;
    }
    try {
      write_summary(pass.dir, lines, launcher_.now() - start, false);
    } catch (const std::exception& e) {
      write_failed(e.what());
    }
  }
  if (interrupted_ && static_cast<int>(lines.size()) < total) {
    lines.push_back(fmt::format("Interrupted: {} of {} job(s) not run", total - static_cast<int>(lines.size()), total));
  }
  try {
    write_summary(pass.dir, lines, launcher_.now() - start, true);
    finished_summaries_.insert(pass.dir);
  } catch (const std::exception& e) {
    write_failed(e.what());
  }
  output_.line(total_line(launcher_.now() - start));
  return failed;
}

std::vector<const Instance*> Scheduler::pending(const PlannedStep& step, const fs::path& dir, StepResult& result) {
  std::vector<const Instance*> todo;
  for (const auto& inst : step.instances) {
    if (options_.resume && completed_report(dir, inst)) {
      ++result.passed;
      continue;
    }
    todo.push_back(&inst);
  }
  result.all_resumed = todo.empty();
  return todo;
}

StepResult Scheduler::run_step(const PlannedStep& step, const JobSpec& job, const StepPosition& position,
                               const fs::path& dir, const PlanSettings& settings) {
  StepResult result;
  const std::vector<const Instance*> todo = pending(step, dir, result);
  if (todo.empty()) return result;
  std::string setup_error;
  if (job.dataset) setup_error = ensure_dataset(*job.dataset, dir);
  if (interrupted_) setup_error = "interrupted";

  std::vector<Watched> procs(todo.size());
  std::vector<std::set<fs::path>> before(todo.size());
  if (setup_error.empty()) {
    output_.step_started(position.index, position.total, step.title, static_cast<int>(todo.size()));
    for (std::size_t i = 0; i < todo.size(); ++i) {
      if (options_.resume) supersede_failures(dir, *todo[i]);
      before[i] = list_reports(dir, todo[i]->report_prefix);
      procs[i] = launch(*todo[i], dir);
    }
    const double step_start = launcher_.now();
    watch(procs, [&] {
      const int now_running = running(procs);
      const double eta = core::eta_seconds(position.index - 1, position.total, launcher_.now() - position.pass_start);
      output_.status(status_line(position.index, position.total, step.title, now_running, result.passed,
                                 static_cast<int>(todo.size()) - now_running, launcher_.now() - step_start, eta));
    });
  }
  for (std::size_t i = 0; i < todo.size(); ++i) {
    procs[i].instance = todo[i];
    const bool passed = finish(procs[i], setup_error, before[i], step.title, dir, settings);
    ++(passed ? result.passed : result.failed);
  }
  return result;
}

Scheduler::Watched Scheduler::launch(const Instance& inst, const fs::path& dir) {
  Watched w;
  w.instance = &inst;
  w.id = launcher_.start(instance_request(inst, dir));
  w.deadline = launcher_.now() + inst.timeout;
  return w;
}

bool Scheduler::finish(const Watched& w, const std::string& setup_error, const std::set<fs::path>& before,
                       const std::string& title, const fs::path& dir, const PlanSettings& settings) {
  const Instance& inst = *w.instance;
  EndFacts f = end_facts(w.ending, setup_error);
  f.timed_out = w.timed_out;
  f.timeout = inst.timeout;
  f.interrupted = w.interrupted;
  const std::optional<fs::path> written = setup_error.empty() ? new_report(dir, inst, before) : std::nullopt;
  read_own_report(written, f);
  Outcome outcome = decide_outcome(f);
  try {
    const FinalReport report =
        write_instance_report(dir, inst, settings, launcher_.isolation(), w.ending, written, outcome);
    if (options_.on_report) options_.on_report(report, settings);
  } catch (const std::exception& e) {
    // Its record is lost (or lacks the runner's blocks): the instance cannot count as passed.
    write_failed(e.what());
    outcome.passed = false;
    outcome.reason = "report not written";
  }
  if (!outcome.passed) output_.instance_failed(title, inst.slot, outcome.reason, (dir / inst.log_name).string());
  if (outcome.passed) {
    failed_.erase((dir / inst.log_name).string());
  } else {
    failed_[(dir / inst.log_name).string()] = outcome.reason;
  }
  return outcome.passed;
}

void Scheduler::write_failed(const std::string& what) {
  ++write_failures_;
  // summary.txt is rewritten after every step: a full disk refuses it each time, in the same words.
  if (printed_failures_.insert(what).second) std::cerr << "mlbench-run: error: " << what << std::endl;
}

std::string Scheduler::ensure_dataset(const std::string& dataset, const fs::path& dir) {
  if (auto it = datasets_.find(dataset); it != datasets_.end()) return it->second;
  const fs::path datagen = options_.datagen;
  if (std::string missing = datagen_missing(dataset, datagen); !missing.empty()) {
    output_.line("mlbench-run: " + missing);
    return datasets_[dataset] = missing;
  }
  const LaunchRequest request = datagen_request(datagen, dataset, dir, options_.data_directory);
  output_.line("mlbench-run: preparing dataset " + dataset + " (log: " + request.log.string() + ")");
  std::vector<Watched> procs(1);
  procs[0].id = launcher_.start(request);
  watch(procs, {});
  if (interrupted_) return "interrupted";  // not remembered: a later run tries again
  return datasets_[dataset] = datagen_failure(dataset, *procs[0].ending, request.log);
}

// Until every process in `procs` has ended, enforcing deadlines and the runner's
// signals; `redraw` (the live line) is called on every wake-up.
void Scheduler::watch(std::vector<Watched>& procs, const std::function<void()>& redraw) {
  auto poll = [&] {
    for (auto& w : procs) {
      if (!w.ending) w.ending = launcher_.poll(w.id);
    }
  };
  poll();
  if (redraw) redraw();
  while (running(procs) > 0) {
    double next = launcher_.now() + kTick;
    for (const auto& w : procs) {
      // A deadline already acted on is no reason to wake (that would spin through the grace).
      if (!w.ending) next = std::min({next, w.timed_out ? kNever : w.deadline, w.kill_at});
    }
    const int sig = launcher_.wait(next - launcher_.now());
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) interrupt(procs);
    poll();
    enforce_deadlines(procs);
    if (redraw) redraw();
  }
}

// Ctrl-C: the first asks every running instance to stop (a benchmark writes its own
// "interrupted" report on SIGINT) and kills it after the grace; the second kills now.
void Scheduler::interrupt(std::vector<Watched>& procs) {
  ++interrupt_count_;
  interrupted_ = true;
  for (auto& w : procs) {
    if (w.ending) continue;
    w.interrupted = true;
    if (interrupt_count_ == 1) {
      launcher_.signal(w.id, SIGINT);
      w.kill_at = std::min(w.kill_at, launcher_.now() + options_.kill_grace);
    } else {
      launcher_.signal(w.id, SIGKILL);
    }
  }
  if (interrupt_count_ == 1) output_.interrupted();
}

// Timeouts: SIGTERM at the deadline, SIGKILL after the grace.
void Scheduler::enforce_deadlines(std::vector<Watched>& procs) {
  const double now = launcher_.now();
  for (auto& w : procs) {
    if (w.ending) continue;
    if (now >= w.deadline && !w.timed_out) {
      w.timed_out = true;
      launcher_.signal(w.id, SIGTERM);
      w.kill_at = std::min(w.kill_at, now + options_.kill_grace);
    }
    if (now >= w.kill_at) {
      launcher_.signal(w.id, SIGKILL);
      w.kill_at = kNever;
    }
  }
}

}  // namespace mlbench::runner
