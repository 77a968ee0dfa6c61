// What mlbench-stall tells its user to act on, decided in one place (docs/stall.md, "Answers
// you can act on"): which stall shares are real, the bound, the verdict and the one remedy
// named. A share is a stall only when it is larger than its noise and possible at the rates
// measured; a remedy is named only for a stall that is, and only when its gain stays above
// noise across the rates' uncertainty. The verdict and the remedy come from the same judgement,
// so they cannot contradict each other. Pure: numbers in, words out.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "analysis.h"

namespace mlbench::stall {

// A share is a stall when it exceeds this many times its noise (the split's ±: one standard
// error of each rate, all signs combined)...
constexpr double kSignificanceSigmas = 2.0;
// ...and this many percent of the cold epoch, however quiet the runs.
constexpr double kMinStallPct = 1.0;
// A sample as a script reads it (open, the file's metadata, several reads) can take storage
// longer than one whole-file read of the raw measurement: PIL over fake-imagenet-small, one
// worker, cold files, 2.7x (docs/stall.md, "Answers you can act on"). The fetch bound allows 4x.
constexpr double kStorageTimeSlack = 4.0;

struct StallShare {
  Bound stall = Bound::Fetch;  // Fetch or Prep
  double pct = 0;              // the split's share of the cold epoch
  double noise_pp = 0;         // its ± in percentage points
  double max_pct = 100;        // the largest share the measured rates allow
  double resource_rate = 0;    // storage S (fetch) or prep P, samples/s
  double consumer_rate = 0;    // the cold run F_obs (fetch) or compute G (prep), samples/s
  // The share that counts: no more than the rates allow.
  double effective() const { return std::min(pct, max_pct); }
  // The largest share the noise leaves possible: pct + kSignificanceSigmas x noise_pp, at most 100
  // and, for fetch, at most max_pct (storage's own rate, measured apart from the split's rates; a
  // prep share's max_pct comes from the same G, P and F_obs as the share, so it bounds nothing).
  double upper() const;
  // A stall: effective() > max(kMinStallPct, kSignificanceSigmas * noise_pp).
  bool claimed() const;
  bool possible() const { return pct - kSignificanceSigmas * noise_pp <= max_pct; }
};

// Waiting on storage takes at most storage's own time per sample (its busy time, 1/S, times
// kStorageTimeSlack): a fetch share of at most 100 kStorageTimeSlack F_obs / S percent. A cold run
// at 7/s over storage serving 9,000/s can have waited at most 0.3% of its time on it, whatever the
// noisy split says.
StallShare fetch_share(const Split& s, const SplitNoise& n, double F_obs, double S);
// Prep stalls only where prep is slower than compute: T_P - T_G of the cold run's time.
StallShare prep_share(const Split& s, const SplitNoise& n, double G, double P, double F_obs);

// One line: "fetch stall 19.1% (±1.2)" or, for a share that is not a stall, why not and what
// would resolve it: "no measurable fetch stall (19.1% ± 12.4, within 2x its noise; storage
// serves 8,901 samples/s, 1,236x the consumer: at most 0.1% is possible); more --rounds or
// --iterations narrow the noise".
std::string share_text(const StallShare& s);

// "Compute-bound" with no stall claimed needs the stalls, at the upper ends of their noise
// (StallShare::upper), to stay below this share of the cold epoch together: compute then takes
// most of it however the noise falls. Above it, the stalls the noise allows could outweigh compute,
// and the verdict is "inconclusive".
constexpr double kComputeBoundStallPct = 50.0;
// An inconclusive verdict says how much longer to measure, up to this factor ("more than 16x"
// beyond it): the split's noise shrinks as 1 / sqrt(the measuring time).
constexpr double kMaxMeasureFactor = 16.0;

struct DecisionInputs {
  Split split;
  StallShare fetch, prep;
  std::optional<double> cache_rec;  // the item cache the what-if recommends (nullopt: none is enough)
  std::optional<int> cores_rec;     // the CPUs it recommends (nullopt: more than measured)
  int cores_now = 1;
  std::vector<Remedy> candidates;  // every remedy predicted, any order
  // What the noise was measured over, to say what would decide an inconclusive split.
  double compute_noise_pp = 0;  // the compute share's ± (SplitNoise::compute_pp)
  int iterations = 0;           // --iterations of each run (0: not known)
  int rounds = 1;               // --rounds
};

struct Decision {
  Bound bound = Bound::Compute;
  bool inconclusive = false;             // no stall claimed, and none ruled out (below)
  std::optional<double> measure_factor;  // inconclusive: the measuring time that would decide it, x today's
  std::string verdict;                   // one line, before the self-check's words
  std::vector<Remedy> ranked;            // the candidates with finite speeds, largest gain first
  std::optional<Remedy> remedy;          // the one named, if any
  std::vector<std::string> not_named;    // why each other candidate with a gain was not named
  std::string remedy_text;               // one line
};

// Whether the split decides a verdict: a stall is claimed, or none is and the stalls' upper ends
// together stay below kComputeBoundStallPct (compute-bound).
bool split_decides(const StallShare& fetch, const StallShare& prep);
// The factor of today's measuring time after which the split, its shares where they are now and its
// noise shrunk by 1 / sqrt(factor), decides (1 when it already does); nullopt beyond kMaxMeasureFactor.
std::optional<double> measure_factor(const StallShare& fetch, const StallShare& prep);

// The bound follows the split: the larger claimed stall whenever a stall is claimed, even beside a
// larger compute share (the accelerator then waits for data: a prep stall of 41% beside compute's
// 59% is prep-bound, and its verdict names both shares); with none claimed, compute when the
// stalls' upper ends stay below kComputeBoundStallPct together, else "inconclusive", with the
// measuring time that would decide it (measure_factor, in --iterations and --rounds).
// A remedy is eligible when it addresses a claimed stall, has a range (Remedy::has_range: a remedy
// whose inputs were each measured once has none) and its range's low end (Remedy::low) reaches
// kMinRemedyGain, whatever its kind; the largest eligible gain is named, and each other candidate
// with a gain is listed in not_named with the reason. The verdict names the remedies of claimed
// stalls only (no "more DRAM helps" without a fetch stall); where a claimed stall's remedy is not
// named for its noise (the CPU sweep too noisy to size more CPUs), the verdict says so.
Decision decide(const DecisionInputs& in);

}  // namespace mlbench::stall
