// The scheduler: passes x steps (jobs x sweep points) x instances (slots). It starts
// a step's instances together through a Launcher, watches them (timeouts, Ctrl-C),
// decides each outcome and finishes its report, then writes the summary line;
// --resume skips instances that already completed, --raise-error stops after the
// first failed step. All I/O besides the run directory goes through the Launcher
// and the Output, so unit tests drive it with a fake launcher and a fake clock.
#pragma once

#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "jobs.h"
#include "launcher.h"
#include "output.h"
#include "plan.h"
#include "reports.h"

namespace mlbench::runner {

struct SchedulerOptions {
  bool resume = false;            // skip instances with a completed report
  bool raise_error = false;       // stop after the first step with a failed instance
  double kill_grace = 10;         // seconds from SIGTERM/SIGINT to SIGKILL
  std::filesystem::path datagen;  // mlbench-datagen, for jobs with a dataset
  std::string data_directory;
  // Called with each instance's final report once it is on disk, and the pass's settings.
  std::function<void(const FinalReport&, const PlanSettings&)> on_report;
};

// One pass over the plan, into its own directory.
struct Pass {
  int index = 0;
  std::filesystem::path dir;
  PlanSettings settings;
  std::vector<PlannedStep> plan;
};

struct StepResult {
  int passed = 0;
  int failed = 0;
  bool all_resumed = false;  // every instance completed in an earlier run
};

// Where a step sits in its pass (for the live line's ETA).
struct StepPosition {
  int index = 1;  // from 1
  int total = 1;
  double pass_start = 0;  // Launcher::now() when the pass started
};

class Scheduler {
 public:
  Scheduler(Launcher& launcher, Output& output, SchedulerOptions options);

  // Runs the passes in turn; `prepare` is called before each (it writes machine.json).
  // Returns the number of failed instances.
  int run(const std::vector<Pass>& passes, const std::vector<JobSpec>& jobs,
          const std::function<void(const Pass&)>& prepare);
  // Runs one step's instances (in parallel) to their end and finishes their reports.
  StepResult run_step(const PlannedStep& step, const JobSpec& job, const StepPosition& position,
                      const std::filesystem::path& dir, const PlanSettings& settings);

  bool interrupted() const { return interrupted_; }
  bool stopped() const { return stopped_; }  // by --raise-error
  // Result files (reports, summary.txt) that could not be written; each was named on
  // the output with its cause. Any makes the run fail.
  int write_failures() const { return write_failures_; }
  // The instances of this run that failed, by their log's path (dir / log_name), with the
  // reason: the results table counts them as failed whatever the disk holds (a completed
  // report whose final record could not be written; a failure whose report is missing).
  const std::map<std::string, std::string>& failed_instances() const { return failed_; }
  // The run directories whose summary.txt was written whole (its last write, with the total
  // line, succeeded): only those are named as results.
  const std::set<std::filesystem::path>& finished_summaries() const { return finished_summaries_; }

 private:
  static constexpr double kNever = std::numeric_limits<double>::infinity();
  struct Watched {
    const Instance* instance = nullptr;
    Launcher::Id id = -1;
    double deadline = kNever;
    double kill_at = kNever;
    bool timed_out = false;
    bool interrupted = false;
    std::optional<Ending> ending;  // nullopt until it ended (or when never launched)
  };

  int run_pass(const Pass& pass, const std::vector<JobSpec>& jobs);
  std::vector<const Instance*> pending(const PlannedStep& step, const std::filesystem::path& dir, StepResult& result);
  std::string ensure_dataset(const std::string& dataset, const std::filesystem::path& dir);
  Watched launch(const Instance& inst, const std::filesystem::path& dir);
  void watch(std::vector<Watched>& procs, const std::function<void()>& redraw);
  void interrupt(std::vector<Watched>& procs);
  void enforce_deadlines(std::vector<Watched>& procs);
  bool finish(const Watched& w, const std::string& setup_error, const std::set<std::filesystem::path>& before,
              const std::string& title, const std::filesystem::path& dir, const PlanSettings& settings);

  void write_failed(const std::string& what);

  Launcher& launcher_;
  Output& output_;
  SchedulerOptions options_;
  bool interrupted_ = false;
  int interrupt_count_ = 0;
  bool stopped_ = false;
  int write_failures_ = 0;
  std::set<std::string> printed_failures_;  // each failed write's message is printed once
  std::set<std::filesystem::path> finished_summaries_;
  std::map<std::string, std::string> failed_;    // failed_instances()
  std::map<std::string, std::string> datasets_;  // dataset -> "" (ready) or the error
};

}  // namespace mlbench::runner
