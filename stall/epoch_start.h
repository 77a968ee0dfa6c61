// Each epoch's start under --exec (docs/stall.md, "Each epoch's start"): a PyTorch DataLoader
// without persistent_workers starts its workers at every epoch's start (and stops them at its end),
// and none loads an epoch's first batch before that epoch starts, so the first step of every epoch
// waits for a batch that nothing prepared while the previous epoch ran. A script's own
// per-iteration lines show the steps within an epoch; the probe's rate takes whole epochs. At 10
// steps an epoch the difference is large (a DCGAN-shaped script with one worker: 557 samples/s by
// its lines, 495/s by the probe: studies/results/2026-11-29-epoch-start.md).
//
// The probe (probe/mlbench_probe.py) keeps each epoch's first batch apart in its report's
// `probe.epoch_start`; this turns the cached run's into a finding, with the advice in the script's
// terms. Pure: a report in, numbers and words out.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace mlbench::stall {

struct EpochStartCost {
  int epochs = 0;                          // epoch starts within the run's timed iterations
  int batches_per_epoch = 0;               // len(loader); 0: unknown
  int workers = 0;                         // the loader's num_workers
  std::optional<bool> persistent_workers;  // none: not a DataLoader (a wrapped iterator)
  double first_wait_s = 0;                 // mean wait of an epoch's first batch
  double steady_wait_s = 0;                // mean wait of the other batches
  double first_step_s = 0;                 // mean first step: its wait and compute
  double steady_step_s = 0;                // mean step within an epoch
  std::optional<double> iter_s;            // of first_wait_s, making the loader's iterator
  double cost_s = 0;                       // first_step_s - steady_step_s: what an epoch's start adds
  double noise_s = 0;                      // cost_s's standard error, from the steps' spread
  double timed_s = 0;                      // the run's timed iterations, in all
  double share_pct = 0;                    // epochs x cost_s / timed_s
  double rate = 0;                         // the run's samples/s (train_item.avg): whole epochs
  double rate_within = 0;                  // samples/s had no epoch's start cost more than a step
  // Beyond kSignificanceSigmas x noise_s, over at least two epoch starts, and worth x1.02
  // (kMinRemedyGain) to remove.
  bool claimed = false;
};

// The cost of each epoch's start in one probe report; none when the report has no
// `probe.epoch_start` (a benchmark's report, or a probe before it) or no timed step within an epoch.
std::optional<EpochStartCost> epoch_start_cost(const nlohmann::json& report);

// One line for the console: "each epoch's start costs 195 ms more than a step within it ...".
std::string epoch_start_text(const EpochStartCost& c, const std::string& run);
// What the script can do about it, in its own terms (persistent_workers=True; one iterator over
// all epochs); empty where there is nothing to say (no workers, not a DataLoader).
std::string epoch_start_advice(const EpochStartCost& c);

// stall.json's `findings.epoch_start` from run `run`'s report (the cached run's): the numbers in
// ms, `claimed`, `text` and `advice`; null where epoch_start_cost() finds none.
nlohmann::json epoch_start_json(const nlohmann::json& report, const std::string& run = "cached");

// The hook for analyze(): sets result["findings"]["epoch_start"] from the cached run's report when
// it has the probe's block (under --exec; a benchmark's result is left as it was) and, when the
// finding is claimed, appends its advice to result["recommendation"]["advice"].
void add_epoch_start_finding(const nlohmann::json& cached_report, nlohmann::json& result);

}  // namespace mlbench::stall
