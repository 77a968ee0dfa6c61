// How long a run of mlbench-stall measures: from the noise of the rate measured so far, whether its
// 95% interval is within the target width, and if not how much longer to measure, up to a time
// limit per run; and whether the drift between rounds calls for another round. Pure: no process, no
// clock (a run's wall time is an input). The loop that runs and pools: stall/sized_run.h.
// NOTE [Runs sized by their noise] in docs/stall.md, "How runs are sized".
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlbench::stall {

// The rule a run is sized by (--target-noise, --max-run-time).
struct SizingRule {
  // The 95% interval's relative half-width a run measures to (0.02: ±2%); <= 0: fixed sizing, every
  // run as --iterations says and never again.
  double target = 0.02;
  // Seconds of wall time a run may take in all, its first part and its extensions; <= 0: auto: the
  // analysis's extensions share a budget of (kAutoLimit - 1) x the first parts' time so far (a run
  // within the target leaves its share to a noisier one), so that an analysis takes at most
  // kAutoLimit x as long as one of fixed runs (SizingBudget).
  double max_run_s = 0;
  // An extension measures at most this many times the first part's timed iterations.
  double max_scale = 8;
  // Extensions at most, however short.
  int max_extensions = 4;
};
inline constexpr double kAutoLimit = 1.5;
// An extension shorter than this share of the first part's iterations is not worth its start-up.
inline constexpr double kMinScale = 0.3;

// One part of a run: its rate (samples/s), the relative sd of its observations (cv), their count,
// its wall time (start-up and warm-up included) and the time of its timed observations (0: unknown).
struct RunPart {
  double rate = 0;
  double cv = 0;
  int observations = 1;
  double wall_s = 0;
  double timed_s = 0;
};

// The two-sided 95% quantile of Student's t with `df` degrees of freedom (df >= 1; 1.96 beyond 200).
double t_quantile_975(int df);

// The 95% interval's half-width of a mean of `observations` observations whose relative sd is `cv`,
// relative to the mean; nullopt with fewer than two observations (no sd to go by).
std::optional<double> relative_half_width(double cv, int observations);

// The parts as one run: observation-weighted mean rate; cv from the pooled variance, within each part
// and between the parts' means (a host that drifts between parts widens it); observations and wall
// time summed. Throws std::invalid_argument when `parts` is empty.
RunPart pool(const std::vector<RunPart>& parts);

// The auto rule's budget for extensions, shared by the runs of one analysis: each run's first part
// adds (kAutoLimit - 1) x its wall time, each extension takes its own.
struct SizingBudget {
  double left_s = 0;
};

// The time limit of a run whose first part took `first_wall_s`: the rule's max_run_s, or (auto) that
// first part and the budget left (`budget_left_s`, after the first part's share was added).
double run_time_limit(const SizingRule& rule, double first_wall_s, double budget_left_s);

// What the sizer says after the parts so far.
struct SizingStep {
  bool done = true;                  // no more parts
  bool within = false;               // the interval is within the target (or the rule is fixed sizing)
  bool limit_hit = false;            // done without reaching the target: the time limit or max_extensions
  bool parts_capped = false;         // limit_hit by max_extensions (else by the time limit)
  std::optional<double> half_width;  // the pooled rate's, relative; nullopt: unknown (< 2 observations)
  double scale = 0;                  // the next part's timed iterations, as a multiple of the first part's
  double elapsed_s = 0;              // wall time of the parts so far
  double limit_s = 0;                // the run's time limit
};

// The next step for a run made of `parts` (its first part first): done when fixed sizing, when the
// pooled interval is within the target, when the noise is unknown, or when the next part would not
// fit in the time limit; else the next part's length: the observations the target needs,
// N x (achieved / target)^2 in all, less those made, as a multiple of the first part's, between
// kMinScale and max_scale and cut to the time left. A part's wall time is predicted from the first
// part's: its start-up and warm-up (wall - timed) plus its timed observations scaled; where the
// first part's timed time is unknown, its whole wall time both ways (an over-estimate: the limit
// holds).
// `budget_left_s`: the auto rule's budget as it was before this run's first extension (ignored with
// max_run_s).
SizingStep next_step(const SizingRule& rule, const std::vector<RunPart>& parts, double budget_left_s = 0);

// Drift between rounds: the largest spread of a label's round rates ((max - min) / median) against
// the effect the split is built from. `effect`: the smaller of the prep and fetch shares (fractions
// of the cold epoch), floored at twice the target (drift within what a sized run states anyway is
// no reason for another round).
struct DriftCheck {
  bool add_round = false;
  std::string label;  // the label that drifted most
  double spread = 0;  // its spread, relative
  double effect = 0;  // the threshold it was compared with
};
DriftCheck check_drift(const std::map<std::string, std::vector<double>>& round_rates, double effect);

// Whether to make another round after `made`: always below `floor` (--rounds), never at `most`
// (--max-rounds), else when the rounds so far drifted (`drift`).
bool another_round(int made, int floor, int most, const DriftCheck& drift);

// The effect a split measures from its rates G, P and F_obs (samples/s): the smaller of the prep
// share (T_P - T_G) / T_cold and the fetch share (T_cold - T_P) / T_cold, those below 0 taken as 0,
// floored at 2 x `target`. nullopt when a rate is not positive.
std::optional<double> split_effect(double G, double P, double F_obs, double target);

}  // namespace mlbench::stall
