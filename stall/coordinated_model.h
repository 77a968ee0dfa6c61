// The coordinated-prep what-if: the per-job speed of K jobs on one
// machine that read the same dataset, each fetching and preparing everything
// itself, against the same K jobs under --coordinated K (pipeline/remedies/coordinated.h:
// every batch fetched and prepped once, by one job, and copied to the others
// through shared memory). A CPU budget model: each sample a job trains on costs
// its prep CPU time (once per group when coordinated, once per job when not),
// the training step's host CPU time (every job), and when coordinated the copy
// into or out of the ring (every job); the jobs share `cores` CPUs. Ceilings:
// the job's own device (G, when compute has one), the shared fetch rate (each
// item fetched once per group when coordinated, once per job when not), and the
// prep threads (a job's `workers`; the group's K x workers when coordinated).
// Pure: rates in, rates out.
#pragma once

#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlbench::stall {

struct CoordinatedJobs {
  int jobs = 2;                   // K
  double cores = 1;               // CPUs the K jobs share
  double prep_cpu_s = 0;          // CPU seconds to fetch (page cache) and prep one sample: 1 / P(1 CPU)
  double host_compute_cpu_s = 0;  // CPU seconds of the training step per sample (on a GPU: the host's launch and wait)
  double copy_cpu_s = 0;          // CPU seconds to copy one sample into or out of the shared ring
  double device_rate = std::numeric_limits<double>::infinity();  // one job's compute ceiling G on a device of its own
  // The devices the K jobs share (0: each job has one of its own). K jobs on D devices get at
  // most G x D / K each (a hyper-parameter search on one GPU: the GPU's time is split).
  int devices = 0;
  // A job's device ceiling with `jobs` jobs on the devices at once, measured (K synthetic runs at
  // once: plan_shared_device_runs); 0: not measured, G min(1, D / K) then.
  double shared_device_rate = 0;
  // On a CPU: the CPU per sample each job's step pays beyond h when `jobs` jobs compute at once,
  // each on CPUs of its own (shared caches and memory bandwidth; measured: K synthetic runs at
  // once against one alone); 0: not measured. Every job pays it, plain or coordinated.
  double step_cpu_extra_s = 0;
  double fetch_rate = std::numeric_limits<double>::infinity();   // the machine's fetch rate, shared (samples/s)
  int workers = 0;                                               // prep threads per job (0: no limit)
  // Where prep_cpu_s came from: "cpus-1" (1 / P(1 CPU) less the step's CPU), "P" (prep CPUs / P)
  // or "stages" (the prep stages' own time per sample; coordinated_inputs).
  std::string prep_from = "cpus-1";
};

struct CoordinatedPrediction {
  double alone = 0;                 // one job by itself (samples/s)
  double uncoordinated = 0;         // per job, K jobs each prepping everything
  double coordinated = 0;           // per job, K jobs under --coordinated K
  double gain = 0;                  // coordinated / uncoordinated
  std::string bound_uncoordinated;  // what limits it: "cpu", "device", "fetch", "workers"
  std::string bound_coordinated;
};

// Throws std::invalid_argument for K < 1, cores <= 0, a negative cost, or no
// cost and no ceiling at all (an unbounded speed).
CoordinatedPrediction predict_coordinated(const CoordinatedJobs& in);

// A job's device ceiling G': shared_device_rate where measured, else G min(1, D / K) where the
// jobs share D devices, else G (a device each).
double device_per_job(const CoordinatedJobs& in);

// The model's inputs from what mlbench-stall measured on one job: `cores` it
// had; P(1 CPU) (`p1`, the cpus-1 run: prep and, on a CPU, compute on one CPU;
// 0: not measured, then P / `prep_cpus`); G (synthetic); whether compute ran on
// a device of its own; a sample's bytes in a batch and the page cache's copy
// rate (bytes/s) for the ring's copies (0: not known, copies cost nothing);
// the job's workers; the CPUs its compute used (its --cpu-cores, at most
// `cores`; 0: `cores`). On a CPU the training step's CPU time per sample is
// compute CPUs / G (the synthetic run keeps them busy), at most 1 / P(1).
// `stage_prep_s` (0: not known): the prep stages' own time per sample (fetch, decode, augment,
// collate: the pipeline's stage timers) in a run whose workers had CPUs of their own. Where it is
// less than the prep CPU left by the step, the rest of a sample's CPU on one CPU is what compute
// and prep cost each other sharing it, paid by every job like the step, not shared like prep:
// p is the stages' time, h the rest: the whole difference taken as prep would credit coordination
// with sharing CPU it does not save (docs/stall.md, "Coordinated prep: K jobs sharing one machine").
// On a device: `device_host.host_cpu_s` (0: not known) is the host CPU the synthetic run's
// process took per sample (kernel launches, the optimizer's host side, the wait for the GPU:
// CUDA spins a CPU while it waits), which every job pays as h; `device_host.devices` is how many
// devices the jobs share (the machine's GPUs; 0: one each).
struct DeviceHost {
  double host_cpu_s = 0;
  int devices = 0;
};
CoordinatedJobs coordinated_inputs(int cores, double p1, double P, int prep_cpus, double G, bool device,
                                   double sample_bytes, double copy_bytes_per_s, int workers, int compute_cpus = 0,
                                   double stage_prep_s = 0, DeviceHost device_host = {});

// The K the what-if predicts for (and, on a device, measures the sharing of).
inline const std::vector<int> kCoordinatedJobs{2, 4, 8};

// What K synthetic jobs at once measured (mlbench-stall's synthetic-x<K> runs), by K.
struct JobsSharing {
  // On a device: a job's device ceiling with K jobs at once (CoordinatedJobs::shared_device_rate).
  std::map<int, double> device_rate;
  // On a CPU: the extra CPU per sample of a job's step with K jobs computing at once
  // (CoordinatedJobs::step_cpu_extra_s); for a K not measured (more jobs than the CPUs hold, each
  // with its CPUs), that of the largest K measured below it: past it the jobs share the same
  // busy CPUs, in the budget.
  std::map<int, double> step_cpu_extra_s;
};

// The K of `jobs` whose K synthetic jobs at once fit this machine's CPUs with `compute_cpus`
// each (K x compute_cpus <= cores, K >= 2): the ones measured on a CPU.
std::vector<int> shared_cpu_jobs(int cores, int compute_cpus, const std::vector<int>& jobs);

// `base` for K jobs, with what `sharing` measured for K (or, for the step's CPU, below it).
CoordinatedJobs for_jobs(const CoordinatedJobs& base, int jobs, const JobsSharing& sharing);

// stall.json's whatif.coordinated: inputs, formula and, for each K of `jobs`,
// the prediction, with what `sharing` measured.
nlohmann::json coordinated_whatif_json(const CoordinatedJobs& base, const std::vector<int>& jobs,
                                       const JobsSharing& sharing = {});

// One line for stall.json and the docs.
inline constexpr const char* kCoordinatedFormula =
    "per job: uncoordinated = min(G', F/K, cores / (K (p + h)), W/p); "
    "coordinated = min(G', F, cores / (p + K (h + c)), K W/p); p = 1/P(1 CPU), h = host compute CPU s/sample "
    "(on a CPU, plus what K synthetic jobs at once paid beyond one), "
    "c = copy CPU s/sample, G' = G (a device each), else K synthetic jobs' per-job rate measured at once, "
    "else G min(1, D/K) (K jobs sharing D devices)";

}  // namespace mlbench::stall
