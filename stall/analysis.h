// The arithmetic of differential data-stall analysis (DS-Analyzer, VLDB'21):
// the compute / prep / fetch split, the what-if model of a never-evicting
// cache, the recommendations and the verdict. Pure functions: numbers in,
// numbers out, so every formula is unit-tested.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlbench::stall {

// Rates in samples/s: G ingestion (synthetic data), P prep-bound (data cached),
// F_obs observed cold; C and S cache and storage fetch rates.
struct Split {
  double compute_pct = 0;
  double prep_pct = 0;
  double fetch_pct = 0;
  // Before clamping negatives to 0 and rescaling to 100: how far noise pushed them.
  double raw_compute_pct = 0;
  double raw_prep_pct = 0;
  double raw_fetch_pct = 0;
};

// With T_x = 1 / rate_x (time per sample): compute% = T_G / T_cold,
// prep% = (T_P - T_G) / T_cold, fetch% = (T_cold - T_P) / T_cold; each clamped
// at 0, then rescaled so the three sum to 100. Throws on a non-positive rate.
Split split(double G, double P, double F_obs);

// Fetch rate with fraction x of the dataset in a never-evicting cache:
// F(x) = 1 / (x / C + (1 - x) / S).
double fetch_rate(double x, double C, double S);

// Fetch time per sample, in seconds, that the pipeline did not hide in the
// cold run: T_cold - max(T_G, T_P, T_S), 0 when the cold run is as fast as
// the pipelined bound min(S, P, G). Workers that fetch and then prep each
// sample in turn, too few to cover the storage latency, expose it; the model
// charges it to each cache miss, i.e. scales it by (1 - x). An excess below
// `min_share` of the cold run's time is run-to-run drift, not exposure: 0.
double exposed_fetch_s(double G, double P, double S, double F_obs, double min_share = 0.05);

// The cache a what-if is about: mlbench's never-evicting item cache (a hit is a
// lookup in memory) or the OS page cache (a hit is still an open + read).
enum class CacheKind { Item, Page };
const char* to_string(CacheKind k);  // "item cache", "page cache"

// The CPU a sample's read takes from prep, against the cached run's (which read
// every sample from the page cache): a read from storage costs `storage_extra_s`
// more (the system calls, the kernel's I/O path, the drop of its pages), an
// item-cache hit `page_read_s` less (no read; negative when a hit costs more:
// its bytes come from memory the CPU's caches have not seen); both spread over the
// `cpus` prep runs on (its lanes: the loader's workers, at most its CPUs), since
// each read is on a worker's path. All 0 (the default): no such term.
struct ReadCpu {
  double storage_extra_s = 0;
  double page_read_s = 0;
  double cpus = 0;
  bool active() const { return cpus > 0 && (storage_extra_s != 0 || page_read_s != 0); }
};

// Prep's rate with fraction x in `cache`: 1 / (1/P + ((1 - x) storage_extra_s
// - x page_read_s [item cache only]) / cpus); P itself without the term.
double prep_rate(double x, double P, CacheKind cache = CacheKind::Item, const ReadCpu& cpu = {});

// 1 / (max(T_F(x), T_P(x), T_G) + (1 - x) * exposed_s): min(F(x), P(x), G) when
// no fetch time is exposed, with P(x) = prep_rate(x, P, cache, cpu).
double predicted_speed(double x, double P, double G, double C, double S, double exposed_s = 0,
                       CacheKind cache = CacheKind::Item, const ReadCpu& cpu = {});

// Smallest x in [0, 1] with F(x) >= min(P(x), G); nullopt when even x = 1 is
// not enough (C < min(P(1), G)). With exposed fetch time the speed reaches
// min(P(1), G) only at x = 1: then the smallest x whose predicted speed is
// within 2% of it (run-to-run noise).
std::optional<double> recommended_cache(double P, double G, double C, double S, double exposed_s = 0,
                                        CacheKind cache = CacheKind::Item, const ReadCpu& cpu = {});

// The recommendation's share of the plateau: the smallest cache whose predicted speed reaches
// 95% of the speed with the whole dataset cached. At the knee (where fetch meets prep) the speed
// rests on both rates and moves most with either; a little below it, on fetch alone.
constexpr double kPlateauShare = 0.95;

// Smallest x in [0, 1] with speed(x) >= share * speed(1): a scan in steps of 5%, then bisection
// between the last step below and the first at or above (speed rising with x, as every what-if
// curve does up to a simulation's noise).
double cache_for_share(const std::function<double(double)>& speed, double share = kPlateauShare);

// The relative uncertainty of a rate from its --rounds: the rounds' sample standard deviation
// over their mean, over sqrt(rounds); 0 with fewer than 2 rounds.
double rounds_uncertainty(const std::vector<double>& rates);

// Smallest core count whose prep rate reaches `need` (= min(F(x_rec), G));
// nullopt when none of the measured counts does.
std::optional<int> recommended_cores(const std::map<int, double>& P_by_cores, double need);

// Prep rate at `cores` by linear interpolation between measured counts (held
// flat beyond them).
double prep_rate_at(const std::map<int, double>& P_by_cores, double cores);

enum class Bound { Compute, Prep, Fetch };
const char* to_string(Bound b);
// Which of the three limits the observed speed on the split alone, without its noise: compute when
// it takes at least half of the split (no more than the stalls together), else the larger of the two
// stalls. mlbench-stall's own bound and verdict weigh the noise: stall/decision.h, decide().
Bound bound_of(const Split& s);

struct Verdict {
  Bound bound;
  std::string text;  // one line in plain words
  // No stall is claimed, yet the stalls within the noise could outweigh compute: neither
  // "compute-bound" nor a stall is founded (stall/decision.h). `bound` is then Compute.
  bool inconclusive = false;
  const char* label() const { return inconclusive ? "inconclusive" : to_string(bound); }
};
// The words of a stall bound (Fetch or Prep) with its cache and CPU advice: "fetch-bound: more DRAM
// helps up to 48% cached, more CPUs do not help".
// `cpus_words`, when given, replaces the CPU advice (e.g. the CPU sweep too noisy to size it).
std::string stall_verdict_text(Bound b, std::optional<double> cache_rec, std::optional<int> cores_rec, int cores_now,
                               const std::string& cpus_words = "");
// E.g. "fetch-bound: more DRAM helps up to 48% cached, more CPUs do not".
Verdict verdict(const Split& s, std::optional<double> cache_rec, std::optional<int> cores_rec, int cores_now);

// A remedy the what-if predicts: its setting and the speed without
// and with it, per job, in samples/s. `from` is the remedy's own baseline: the
// cold run's predicted speed for a cache or CPUs, K jobs each prepping
// everything for coordinated prep.
struct Remedy {
  std::string name;    // "item cache", "more CPUs", "coordinated prep"
  std::string detail;  // the setting in words, e.g. "48% of the dataset in the item cache"
  double from = 0;
  double to = 0;
  Bound stall = Bound::Fetch;  // the stall it removes (stall/decision.h names it only for a real one)
  // The gain's range over the uncertainty of the rates it rests on (0: not known, the gain alone).
  double gain_lo = 0;
  double gain_hi = 0;
  // What the range was propagated from, in words (e.g. "cpus-1, cached and synthetic runs at +-1
  // standard error"); "" when none of its inputs carries an uncertainty (each measured once): then
  // it has no range, whatever gain_lo and gain_hi say, and is not named (stall/decision.h).
  std::string range_from = {};
  // What it is predicted by: "cache what-if" (the curve the self-check tests, and its rates: withheld
  // with the curve when the check fails) or "own model" (a model the self-check does not test, from
  // runs of its own: coordinated prep, io depth).
  std::string basis = "cache what-if";
  double gain() const { return from > 0 ? to / from : 0.0; }
  double low() const { return gain_lo > 0 ? std::min(gain_lo, gain()) : gain(); }
  double high() const { return gain_hi > 0 ? std::max(gain_hi, gain()) : gain(); }
  bool has_range() const { return gain_lo > 0 && gain_hi > 0 && !range_from.empty(); }
};
// A predicted gain below this is within run-to-run noise: not recommended.
constexpr double kMinRemedyGain = 1.02;
// The candidates with finite, positive speeds, largest gain first (ties keep
// their order, so list the simpler remedy first).
std::vector<Remedy> rank_remedies(std::vector<Remedy> candidates);
// The first ranked remedy when its gain reaches kMinRemedyGain, else nullopt.
std::optional<Remedy> best_remedy(const std::vector<Remedy>& ranked);
// "x1.21", or with a range known and wider than rounding, "x1.21 [1.05-1.40]".
std::string gain_text(const Remedy& r);
// One line: "coordinated prep helps most: x1.85 (2 jobs ..., per job: 410.0 -> 760.0 samples/s)",
// or, with no remedy reaching kMinRemedyGain, which were predicted and that none helps.
std::string remedy_text(const std::vector<Remedy>& ranked);

// Why direct instrumentation (share of iteration time the loop waited for a
// batch) and the differential stall disagree, in words; "" when they agree
// within max(5, 2 x noise) points. A loop that waited less than the split
// says means prep slowed compute without making it wait: on a machine
// without an accelerator both run on the same CPUs.
std::string disagreement_note(double direct_pct, double differential_pct, double noise_pp);

// Runs that measure the same thing must agree within `tolerance`: the cold
// run is not faster than the cached one, and the run with the whole dataset
// in the never-evicting cache (`cache_full`; NaN when not run) runs at P.
// Each disagreement is a line in words: the machine's speed changed between
// runs, and the split and what-if built on P are not to be trusted.
std::vector<std::string> consistency_warnings(double P, double F_obs, double cache_full, double tolerance = 0.10);

// A what-if curve: predicted speed at each cache fraction.
struct CurvePoint {
  double x;
  double fetch;      // F(x)
  double predicted;  // predicted_speed(x, ...)
};
std::vector<CurvePoint> whatif_curve(const std::vector<double>& xs, double P, double G, double C, double S,
                                     double exposed_s = 0);

// Relative difference |a - b| / b.
double relative_error(double predicted, double measured);

}  // namespace mlbench::stall

namespace mlbench::stall {

// The self-check: the what-if against the runs with a never-evicting cache
// holding fraction x, 0 < x < 1. The ends are not checked: x = 0 is the cold
// run and x = 1 the cached one, the rates the model is built from. A point
// more than this far off (|predicted - measured| / measured) means the model
// does not describe this pipeline, and no recommendation comes from its curve.
constexpr double kSelfCheckThresholdPct = 5.0;

// The share of the dataset the item cache held in a run must be within this
// (absolute) of x for the run to measure the cache the what-if is about.
constexpr double kCachedFractionTolerance = 0.05;
// A cache run reads under --drop-after-read: more of the dataset than this in
// the page cache after it means misses were partly served from memory.
constexpr double kPageCacheTolerance = 0.10;
// Rates closer than this factor: the stages' overlap (or its absence) decides the speed.
constexpr double kComparableRates = 2.0;

// One measured cache fraction, with what the run itself reported.
struct CheckPoint {
  double x = 0;
  double measured = 0;              // samples/s
  double predicted = 0;             // the what-if at x
  double fetch = 0;                 // F(x)
  double cached_fraction = -1;      // items the item cache held / dataset items in the run; < 0: not reported
  double page_cache_fraction = -1;  // dataset resident in the page cache after the run; < 0: not known
  // The prediction's range over the rates' uncertainty (0, 0: not known).
  double lo = 0, hi = 0;
  CacheKind cache = CacheKind::Item;  // the cache the point measured (page: held with --hold-page-cache)
  double error_pct() const;           // 100 * relative_error(predicted, measured)
  // Off: more than `threshold_pct` from the prediction and outside its range.
  bool off(double threshold_pct) const;
};

struct SelfCheck {
  bool ran = false;    // at least one point with 0 < x < 1 was measured
  bool passed = true;  // every checked point within threshold_pct (true when not ran)
  double max_error_pct = 0;
  double threshold_pct = kSelfCheckThresholdPct;
  std::vector<CheckPoint> points;  // the checked points (0 < x < 1), by x
  std::vector<CheckPoint> off;     // those beyond threshold_pct
  std::string cause;               // the likely cause in words; "" when passed
  std::string text;                // one line for the verdict
};

// Checks the points with 0 < x < 1 (others are ignored) against the what-if
// built from P and G, and names the likely cause of a misfit from the runs'
// own measurements, in this order: the item cache did not hold x; the
// page cache held part of the dataset; fetch F(x) and min(P, G) within a
// factor of kComparableRates with the speed below the prediction (workers that
// fetch and then prep each sample add the two times, the overlap model takes
// the smaller rate); else none that the analyzer can tell.
// `serial_model`: the what-if already simulates serial workers, so that cause
// is not named. `reads_ahead`: the loader reported read-ahead (--io-depth > 0):
// its workers do not fetch and prep in turn, and the cause named for that
// misfit is reads that read-ahead still left exposed.
SelfCheck self_check(const std::vector<CheckPoint>& points, double P, double G,
                     double threshold_pct = kSelfCheckThresholdPct, bool serial_model = false,
                     bool reads_ahead = false);

// The verdict after the self-check: unchanged when it passed or did not run;
// else the bound, the points off and the cause, and no recommendation.
Verdict checked_verdict(const Verdict& v, const SelfCheck& check);

}  // namespace mlbench::stall

namespace mlbench::stall {

// Run-to-run noise of the split: the largest change of each share (percentage
// points) when each rate moves by +-1 relative sd (all 8 sign combinations).
struct SplitNoise {
  double compute_pp = 0;
  double prep_pp = 0;
  double fetch_pp = 0;
};
SplitNoise split_noise(double G, double P, double F_obs, double cv_G, double cv_P, double cv_F);

}  // namespace mlbench::stall
