// One run of mlbench-stall's plan measured until its rate's noise is within the target or its time
// is up (the rule: stall/run_sizing.h): the run, then extensions of it (the same run, its timed
// iterations scaled; OUT/runs/<label>-ext<k>/) pooled into one outcome; what it took, for stall.json
// and the console.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor.h"
#include "run_sizing.h"

namespace mlbench::stall {

// How one run (one label, one round) was sized.
struct RunSizing {
  int parts = 1;                     // the run and its extensions
  double wall_s = 0;                 // their wall time together
  std::optional<double> half_width;  // the pooled rate's 95% half-width, relative (nullopt: unknown)
  double target = 0;                 // the rule's (<= 0: fixed sizing)
  double limit_s = 0;                // the run's time limit
  bool within = false;               // half_width <= target (or fixed sizing)
  bool limit_hit = false;            // stopped by the limit short of the target
  std::string stopped_by;            // with limit_hit: "time limit", "most extensions (N)" or "a failed extension"
  std::vector<double> part_rates;    // each part's rate, in order
};

struct SizedOutcome {
  RunOutcome outcome;  // the parts pooled: rate, cv, observations and wall time of all; the first part's report
  RunSizing sizing;
};

// `spec` with its timed iterations scaled by `scale` (at least one observation's worth): the
// benchmark's --repeat (its --warmup kept), or --exec's MLBENCH_PROBE_ITERATIONS (a multiple of
// MLBENCH_PROBE_NUMBER). A spec with neither is returned as it is (the same length again).
RunSpec lengthened(const RunSpec& spec, double scale);

// The label of a run's extension k (k >= 2): "<label>-ext<k>".
std::string extension_label(const std::string& label, int k);

// Runs `spec` on `executor`, then its extensions while the rule says so (next_step), calling
// `on_part` after each part with the spec it ran and its outcome. A part that fails after the first
// ends the run with the parts made (the sizing says the limit was hit); the first part's failure
// is thrown as the executor throws it. `budget`: the analysis's shared budget under the auto time
// limit (run_sizing.h; null: this run's own share only), updated.
using OnPart = std::function<void(const RunSpec& part, const RunOutcome& outcome)>;
SizedOutcome measure_sized(Executor& executor, const RunSpec& spec, const SizingRule& rule, const OnPart& on_part,
                           SizingBudget* budget = nullptr);

// The parts' outcomes as one (the rates and noise pooled: run_sizing.h, pool()); throws
// std::invalid_argument when `parts` is empty.
RunOutcome pool_outcomes(const std::vector<RunOutcome>& parts);

// stall.json's runs.<label>.sizing: the label's rounds, `chosen` the one the model reads.
nlohmann::json label_sizing_json(const std::vector<RunSizing>& rounds, std::size_t chosen);

// The console's line under a run that was extended or did not reach the target ("" otherwise).
std::string sizing_line(const std::string& label, const RunSizing& s);

// How the analysis's rounds were decided: the floor (--rounds), the most (--max-rounds), those made
// and why each added one was.
struct RoundsSizing {
  int floor = 1;
  int most = 1;
  int made = 1;
  std::vector<DriftCheck> added;  // one per round added, in order
};

// stall.json's `sizing`: the rule, the rounds, and the labels whose noise stayed above the target.
// `by_label`: every label's rounds; `chosen`: the round each label's model reads.
nlohmann::json sizing_json(const SizingRule& rule, const RoundsSizing& rounds,
                           const std::map<std::string, std::vector<RunSizing>>& by_label,
                           const std::map<std::string, std::size_t>& chosen);

// The console's closing lines about sizing (from sizing_json's object): the measuring time, the runs
// extended, those not within the target and the rounds added.
std::string sizing_summary(const nlohmann::json& sizing);

}  // namespace mlbench::stall
