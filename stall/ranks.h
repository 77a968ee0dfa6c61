// The ranks of a distributed job under --exec (docs/stall.md, "Distributed jobs"): every rank's
// probe (probe/mlbench_probe.py) writes a report of its own, with a `rank` block and, per
// iteration, the rank's data wait (inside next()), its sync (blocked in collectives: DDP's gradient
// all-reduce, torch.distributed's functions) and the rest, its compute. This turns one run's
// reports into the per-rank figures and the job's: which rank is the straggler, and what its
// lateness costs the others at their collectives.
//
// The straggler is the rank whose data wait per iteration exceeds the mean of the other ranks' by
// more than kSignificanceSigmas standard errors (from the iterations' spread) and by
// kStragglerMinPct of the step. Each rank's step is split with the differential method on its own
// data wait (add_split: the cold run's wait less the cached run's is its fetch stall, the cached
// less the synthetic's its prep stall), which names the straggler's cause; per step (the probe's
// stall.steps) the late rank is the one that waited longest for data, and the job's split is the
// ranks' time in compute, prep stall, fetch stall and sync wait. Pure: reports in, numbers and
// words out.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor.h"

namespace mlbench::stall {

// A straggler's lateness must be at least this share of the job's step (percent), however quiet
// the iterations: a rank 0.2 ms late at a 100 ms step is balanced.
constexpr double kStragglerMinPct = 5.0;

struct RankFigures {
  int rank = 0;
  std::optional<int> local_rank;  // none: the source does not give it (torch.distributed)
  int world_size = 1;
  std::string from = "none";  // "env", "torch.distributed" or "none" (a report before the block)
  std::string host;
  double rate = 0;     // the rank's samples/s (train_item.avg)
  int iterations = 0;  // timed iterations behind the figures below
  double wait_s = 0;   // mean data wait per iteration (prep + fetch stall, inside next())
  double wait_sd = 0;  // its spread over the iterations
  double sync_s = 0;   // mean time blocked in collectives per iteration
  double sync_sd = 0;
  double compute_s = 0;        // the rest of the step
  double iteration_s = 0;      // wait + sync + compute
  bool sync_measured = false;  // the report has stall.sync (a probe with the hooks)
  std::filesystem::path report;

  // Per step (the probe's stall.steps; empty in reports before it): timed iteration first_step + i
  // of the rank's loader is entry i.
  int first_step = 0;
  std::vector<double> step_wait, step_sync, step_compute;

  // The differential split of the rank's step (add_split; split_known: the job's cached and
  // synthetic runs had this rank): fetch_s + prep_s + split_compute_s + sync_s = iteration_s.
  bool split_known = false;
  double cached_wait_s = 0, synthetic_wait_s = 0;  // its data wait per step in those runs
  double fetch_s = 0;          // the cold wait less the cached wait (0..wait_s)
  double prep_s = 0;           // the cached wait less the synthetic wait (0..wait_s - fetch_s)
  double split_compute_s = 0;  // compute_s and the wait left (what the replayed batches still wait)

  // Per step (job_figures): the steps at which this rank was the late one, and its lateness then
  // (its wait beyond the other ranks' mean at that step) summed.
  int late_steps = 0;
  double delay_s = 0;

  double wait_pct() const { return iteration_s > 0 ? 100 * wait_s / iteration_s : 0; }
  double sync_pct() const { return iteration_s > 0 ? 100 * sync_s / iteration_s : 0; }
  double compute_pct() const { return iteration_s > 0 ? 100 * compute_s / iteration_s : 0; }
  // The rank's cause of data wait: "prep" or "fetch", the larger stall of its split; none when
  // the split is unknown or its wait is below kStragglerMinPct of its step.
  std::optional<std::string> cause() const;
};

// One rank's figures from its report; none when the report has no per-iteration stall block.
std::optional<RankFigures> rank_figures(const nlohmann::json& report, const std::filesystem::path& file = {});

// Splits each rank of `cold` (the job as it runs) with the differential method on the rank's own
// data wait, the ranks matched by rank number: fetch stall = cold wait - cached wait, prep stall =
// cached wait - synthetic wait (each clamped to the cold wait), compute the rest of the step less
// its sync. A rank absent from either run keeps split_known false. (A rank's rate cannot split it:
// every rank steps at the job's pace.)
void add_split(std::vector<RankFigures>& cold, const std::vector<RankFigures>& cached,
               const std::vector<RankFigures>& synthetic);

struct JobFigures {
  std::vector<RankFigures> ranks;  // by rank
  double rate = 0;                 // the job's samples/s: the slowest rank's x the ranks
  std::optional<int> straggler;    // none: balanced (or one rank)
  int latest = 0;                  // the rank with the most data wait, claimed or not
  double late_s = 0;               // its wait per iteration beyond the others' mean
  double noise_s = 0;              // late_s's standard error
  double step_s = 0;               // the job's step: its slowest rank's mean iteration
  double others_sync_s = 0;        // the other ranks' mean sync per iteration
  std::string text;                // one line for the console

  // The job's split (split_known: every rank's is known): the ranks' time (K x the step) in
  // compute, prep stall, fetch stall and sync wait, each rank's shares of its own step averaged
  // over the ranks, so the four sum to 100%.
  bool split_known = false;
  double compute_pct = 0, prep_pct = 0, fetch_pct = 0, sync_pct = 0;
  std::optional<std::string> cause;  // the straggler's ("prep" or "fetch"); none: balanced or unknown

  // Per step (every rank has stall.steps): the steps all ranks recorded, compared one by one; at
  // each the late rank is the one with the largest data wait, when it waited at least
  // kStragglerMinPct of the step longer than the others' mean (else the step is on time).
  int steps = 0;
  int on_time_steps = 0;
};

// The job from its ranks' figures (any order; at least one).
JobFigures job_figures(std::vector<RankFigures> ranks);

// stall.json's blocks for one job: `ranks` (an array) and `job`.
nlohmann::json ranks_json(const JobFigures& job);
nlohmann::json job_json(const JobFigures& job, const std::string& run);

// The hook for analyze(): where any run has several ranks (RunOutcome::ranks), each such run's
// per-rank block under result["runs"][label]["ranks"], and the job's at the top level
// (result["ranks"], result["job"]) from the cold run (the job as it runs), else the cached one,
// else the first run with ranks. A run of one process leaves `result` as it was.
void add_ranks_block(const std::map<std::string, RunOutcome>& runs, nlohmann::json& result);

// The console's lines for stall.json's `job` ("" when absent: one process, or older results).
std::string ranks_text(const nlohmann::json& result);

}  // namespace mlbench::stall
