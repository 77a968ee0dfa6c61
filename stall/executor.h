// Runs one planned benchmark run: puts the dataset in the required page-cache
// state and checks it, launches the benchmark executable (on the first N CPUs
// when asked), waits with a timeout, and reads its report.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/instance_report.h"
#include "core/process.h"
#include "exec_isolation.h"
#include "page_cache.h"
#include "plan.h"

namespace mlbench::stall {

struct RunOutcome {
  double rate = 0;        // train_item.avg, samples/s (the median observation's after a host stall: rate_from)
  std::string rate_from;  // "": the mean of the observations; else why the median observation's rate stands
  double cv = 0;         // train.sd / train.avg: run-to-run noise of one observation
  int observations = 1;  // train.count: timed observations behind `rate`
  nlohmann::json report;  // the run's instance report as written; read it through record()
  Residency before;      // dataset residency right before launch
  Residency after;       // and after the run
  bool held = false;     // a warm run's dataset held in memory throughout (PinnedFiles)
  double wall_s = 0;
  std::filesystem::path report_path;
  std::filesystem::path log_path;
  // A run of several nodes (RunSpec::nodes): each node's outcome; the fields above are then
  // their aggregate (rate: the nodes' mean; report: node 0's, with `process_cpu` over all
  // nodes: their CPU seconds summed, per_item_us the mean of theirs).
  std::vector<RunOutcome> nodes;
  // A run of a job of several ranks (--exec: one probe report per rank, each with its `rank`
  // block; docs/stall.md, "Distributed jobs"): each rank's outcome, by rank. The fields above are
  // then the slowest rank's (a synchronous job steps at its slowest rank's pace: its rate, cv and
  // observations), with the report of the rank that waited longest for data (the straggler's, whose
  // loop shows the stall). Empty for a single process.
  std::vector<RunOutcome> ranks;
  RunSpec spec;  // the run as planned (kind, cpus, cache_frac, nodes); its label is the runs map's key
  // A run sized by its noise (stall/sized_run.h): its pooled rate's 95% half-width, relative, as
  // reached; the analysis's ranges carry it (nullopt: not sized, or unknown).
  std::optional<double> half_width;

  // The report as its typed record (core/instance_report.h).
  core::InstanceReport record() const { return core::parse_instance_report(report); }
};

// The stand-ins for the fetch-only runs: a rate from direct reads of the dataset's files
// (one file = one sample), labelled as such in the run's report block.
RunOutcome direct_read_outcome(double samples_per_s, const std::string& what);

// A run that could not be made or did not complete; what() is one line.
class RunFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The user stopped the analysis (SIGINT, SIGTERM or SIGHUP) during a run; the run's
// benchmark and everything it started were stopped first. Exit status 128 + signal().
class Interrupted : public RunFailed {
 public:
  Interrupted(int signal, const std::string& label);
  int signal() const { return signal_; }

 private:
  int signal_;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual RunOutcome run(const RunSpec& spec) = 0;
};

class ProcessExecutor : public Executor {
 public:
  // Reports and logs go to out_dir/runs/<label>/ and out_dir/runs/<label>.log.
  ProcessExecutor(std::filesystem::path bench_exe, std::filesystem::path out_dir,
                  std::vector<std::filesystem::path> dataset, bool use_drop_caches, int timeout_s);
  RunOutcome run(const RunSpec& spec) override;
  // --exec: runs with a `command` start it with the probe's environment, and a run with no
  // report after exec.probe_timeout_s fails (the command iterates no loader).
  void run_commands(const ExecConfig& exec);
  // --exec: each run of the command isolated as `plan` says (stall/exec_isolation.h), and what
  // each wrote kept in writes().
  void isolate(std::shared_ptr<const IsolationPlan> plan);
  const WriteLog& writes() const { return writes_; }

 private:
  void prepare_cache(const RunSpec& spec);
  void hold_in_memory(const std::vector<std::filesystem::path>& files);
  RunOutcome run_one(const RunSpec& spec);
  RunOutcome run_nodes(const RunSpec& spec);
  RunOutcome command_outcome(const RunSpec& spec, const core::ExitStatus& status,
                             const std::filesystem::path& report_dir, const std::filesystem::path& log);
  std::shared_ptr<const ExecConfig> exec_;
  std::shared_ptr<const IsolationPlan> isolation_;
  WriteLog writes_;
  std::filesystem::path bench_;
  std::filesystem::path out_;
  std::vector<std::filesystem::path> dataset_;
  // Warm runs hold the dataset in memory, a partial run its resident share (let go before a
  // cold run evicts it); once a pin failed, the reason, and runs go on unheld.
  std::unique_ptr<PinnedFiles> pinned_;
  bool pinned_whole_ = false;  // pinned_ holds the whole dataset
  std::string pin_error_;
  bool drop_caches_;
  int timeout_s_;
};

// Reads the one report in `dir` into an outcome; throws RunFailed naming the
// reason when there is none, it is a FAIL report, or it has no throughput.
// Reports of several ranks (their `rank` blocks differ): each rank's latest is read into
// RunOutcome::ranks and the outcome is the slowest rank's; any rank's failure fails the run,
// naming the rank.
// The rate is the mean of the observations' (train_item.avg), except after a
// stall of the host (median_observation_rate).
RunOutcome read_outcome(const std::filesystem::path& dir, const std::string& label);

// A stall of the host (another process on the CPUs, a page-out) can make one or two
// observations of a short run several times longer than the others, and the mean of the
// observations' rates then under-states the benchmark, enough for the analysis to see a prep
// stall where there is none (docs/stall.md, "Outputs"). Where the slowest of at least 3
// observations took over twice the median one, this is the median observation's rate: its items
// (number x batch_size, which must give the fastest observation's rate within 2%) over
// stability.median_s. nullopt otherwise (no stall, or a report without them).
std::optional<double> median_observation_rate(const nlohmann::json& report);
std::optional<double> median_observation_rate(const core::InstanceReport& report);

// The nodes' outcomes as one (RunOutcome::nodes); throws RunFailed when `nodes` is empty.
RunOutcome combine_nodes(std::vector<RunOutcome> nodes);

}  // namespace mlbench::stall
