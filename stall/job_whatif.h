// The what-if of a job of K ranks on one server (docs/stall.md, "Distributed jobs", "CPUs per rank
// and the job's what-if"): the CPU sweep gives CPUs per rank, the job's CPU set split among its
// ranks as a server of C CPUs and K GPUs splits it (rank of local rank j on CPUs [j c, (j + 1) c) of
// the job's set, applied by the probe in each rank), and the model predicts the job's samples/s at
// c CPUs per rank and D GB of DRAM (the server's page cache, shared by the ranks, each reading its
// DistributedSampler shard; storage's S shared by K ranks).
//
// The model, per rank j, from its own measurements (sync excluded: a rank's own step is its data
// wait plus its compute):
//   g_j        its step with no data work (the synthetic run),
//   w_j(c)     its step with the dataset in the page cache at c CPUs per rank (the sweep's cpus-c
//              run; between and beyond the measured counts prep scales with the CPUs, DS-Analyzer's
//              assumption, with num_workers = c: w_j(c) = max(g_j, d_j c0 / c), d_j the measured
//              step at c0, its data wait alone when the loader has no workers),
//   fetch      b_j ((1 - x) K / S + x K / C) per iteration, b_j its samples per iteration, x the
//              share of the dataset D GB of page cache holds, S and C the server's storage and
//              page-cache rates (direct reads) shared by the K ranks,
//   own_j      max(w_j, fetch) with DataLoader workers (fetch overlaps prep), w_j + the fetch
//              beyond the page cache's without (the loop fetches in turn);
// the job steps at its slowest rank: T = max_j own_j + the all-reduce's own time (the least sync
// of any rank in the run the warm step comes from), samples/s = sum_j b_j / T. Its range: the same
// at the corners of the runs' noise (each run's cv / sqrt(observations), or the half-width a sized
// run reached). Held out: the cold run (a cache state the model does not use: x = 0) and the cached
// run (the ranks sharing every CPU, unsplit: c = C / K), and each sweep point predicted from the
// others where there are two or more. Pure: runs in, numbers and words out.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor.h"
#include "measured.h"

namespace mlbench::stall {

// The most ranks of a run's job on one host (RunOutcome::ranks, their reports' rank.host); 1 for a
// single process.
int ranks_per_node(const RunOutcome& run);

// Why the sweep point of `cpus_per_rank` CPUs per rank cannot be given to `ranks` ranks on a server
// of `cpus` CPUs (ranks x cpus_per_rank > cpus), "" when it can.
std::string sweep_point_problem(int ranks, int cpus_per_rank, int cpus);

// A sweep run (kind "cpus", cpus = c) made CPUs per rank for a job of `ranks` ranks per node:
// the command on the first ranks x c CPUs of `affinity`, the probe told the split
// (MLBENCH_PROBE_CPUS_PER_RANK = c, MLBENCH_PROBE_JOB_CPUS, MLBENCH_PROBE_RANKS_PER_NODE). Returns
// why it cannot be given ("": given).
std::string split_cpus_per_rank(RunSpec& spec, int ranks, const std::vector<int>& affinity);

// One rank's figures in one run, as the model takes them.
struct JobRank {
  int rank = 0;
  int cpus = 0;              // CPUs of its set (0: unknown)
  std::vector<int> cpu_set;  // the set, as the rank's report recorded it
  double items = 0;          // samples per iteration
  double own_s = 0;          // data wait + compute per iteration (its own step, sync excluded)
  double wait_s = 0;         // data wait per iteration
  double sync_s = 0;         // blocked in collectives per iteration
  double u = 0;              // own_s's relative uncertainty
};

struct JobRun {
  std::string label;
  double cpus_per_rank = 0;  // c (unsplit runs: the server's CPUs / K)
  bool split = false;        // each rank on a CPU set of its own (the sweep)
  double cached = 1;         // share of the dataset in the page cache during the run
  std::vector<JobRank> ranks;
  double measured = 0;    // the job's samples/s: the slowest rank's x the ranks
  double comm_s() const;  // the least sync of its ranks: the all-reduce's own time
  double u() const;       // the largest of its ranks' u
};

struct JobInputs {
  int ranks = 1;                 // K, per node
  int cpus = 1;                  // the server's CPUs (the analyzer's)
  int workers = 0;               // DataLoader workers per rank
  JobRun compute;                // the synthetic run
  std::map<int, JobRun> warm;    // the warm steps by CPUs per rank (the sweep; else the cached run, unsplit)
  double S = 0, C = 0, u_S = 0;  // the server's storage and page-cache rates, samples/s
  double dataset_gb = 0;
  double mean_sample_bytes = 0;
};

struct JobPrediction {
  double rate = 0, lo = 0, hi = 0;  // the job's samples/s and its range
  int slowest = 0;                  // the rank the job steps at
  std::string bound;                // that rank's bound: "compute", "prep" or "fetch"
};

// The job's samples/s at c CPUs per rank with share x of the dataset in the page cache; `factor`
// multiplies S (faster storage).
JobPrediction job_predict(const JobInputs& in, double c, double x, double factor = 1);

// The inputs and held-out runs from an analysis's runs (those with ranks); nullopt when no run has
// several ranks on one node, or the synthetic run has none.
struct JobWhatIfRuns {
  JobInputs inputs;
  std::vector<JobRun> held_out;
  std::vector<std::string> skipped;  // sweep points that could not be given, each why
  std::vector<JobRun> sweep;         // every sweep run (for the CPU sets recorded)
};
std::optional<JobWhatIfRuns> job_whatif_runs(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs);

// stall.json's `job_whatif` (docs/stall.md): the table, the held-out checks, the advice.
nlohmann::json job_whatif_json(const JobWhatIfRuns& r);

// Why a rank is the straggler because its share of the CPUs is smaller, or "": the slowest rank
// (largest own step) has fewer CPUs than another rank.
std::string smaller_share_straggler(const JobRun& run);

// The hook for analyze(): result["job_whatif"] where the runs are a job of several ranks per node under
// --exec (ctx.exec; a benchmark's own ranks split their CPUs themselves).
void add_job_whatif(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs, nlohmann::json& result);

// The console's lines for result["job_whatif"] ("" when absent).
std::string job_whatif_text(const nlohmann::json& result);

// The chart (OUT/job_whatif.svg): the job's samples/s against DRAM, a line per CPUs per rank, with
// the held-out runs measured.
std::string job_whatif_svg(const std::string& name, const nlohmann::json& job_whatif);

}  // namespace mlbench::stall
