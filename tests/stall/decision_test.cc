// What mlbench-stall tells its user to act on (stall/decision.h): a stall share only when it is
// larger than twice its noise and possible at the rates measured, a remedy only for such a
// stall and only when its gain stays above the noise, and a verdict that never contradicts it.
#include "stall/decision.h"

#include <gtest/gtest.h>

#include <cmath>

#include "stall/analyzer.h"
#include "stall/executor.h"

namespace mlbench::stall {
namespace {

// The public training script of docs/stall.md's held-out table (torchvision ImageFolder,
// 2 workers, resnet18 on the CPU, 256 photographs): compute 77.7%, prep 3.2%, fetch 19.1% from
// G 8.37, P 8.03, cold 6.5 samples/s, each run +-10%, over storage serving 8,901 samples/s.
constexpr double kG = 6.5 / 0.777;
const double kP = 1.0 / (1.0 / kG + 0.032 / 6.5);
constexpr double kF = 6.5;
constexpr double kS = 8901;

StallShare fetch_of(double pct, double noise, double F_obs, double S) {
  Split s;
  s.fetch_pct = pct;
  SplitNoise n;
  n.fetch_pp = noise;
  return fetch_share(s, n, F_obs, S);
}

TEST(Decision, AFetchShareOverStorageFarFasterThanTheConsumerIsNoStall) {
  const StallShare f = fetch_of(19.1, 12.4, kF, kS);
  EXPECT_NEAR(f.max_pct, 100 * kStorageTimeSlack * kF / kS, 1e-9);  // 0.29%: storage is 1,369x the consumer
  EXPECT_FALSE(f.claimed());
  const std::string text = share_text(f);
  EXPECT_NE(text.find("no measurable fetch stall (19.1% ± 12.4, within 2x its noise"), std::string::npos) << text;
  EXPECT_NE(text.find("at most 0.3% is possible"), std::string::npos) << text;
  // Quieter runs: the same share is beyond both its noise and what storage allows.
  const StallShare quiet = fetch_of(19.1, 2.0, kF, kS);
  EXPECT_FALSE(quiet.possible());
  EXPECT_FALSE(quiet.claimed());
  EXPECT_NE(share_text(quiet).find("19.1% ± 2.0, more than the rates allow"), std::string::npos) << share_text(quiet);
  EXPECT_NE(text.find("storage serves 8,901 samples/s, 1,369x the consumer"), std::string::npos) << text;
  EXPECT_NE(text.find("more --rounds or --iterations"), std::string::npos) << text;
}

TEST(Decision, AShareWithinTwiceItsNoiseIsNoStallAndOneBeyondItIs) {
  // Storage no faster than the consumer: every share is possible, significance decides.
  EXPECT_FALSE(fetch_of(19.1, 12.4, 100, 100).claimed());
  const std::string text = share_text(fetch_of(19.1, 12.4, 100, 100));
  EXPECT_NE(text.find("19.1% ± 12.4, within 2x its noise"), std::string::npos) << text;
  EXPECT_TRUE(fetch_of(19.1, 9.0, 100, 100).claimed());
  EXPECT_EQ(share_text(fetch_of(19.1, 9.0, 100, 100)), "fetch stall 19.1% (±9.0)");
  // However quiet the runs, under 1% is not a stall.
  EXPECT_FALSE(fetch_of(0.8, 0.0, 100, 100).claimed());
  EXPECT_EQ(share_text(fetch_of(0.8, 0.0, 100, 100)).find("more --rounds"), std::string::npos);
}

TEST(Decision, AShareCountsOnlyUpToWhatTheRatesAllow) {
  // 30% measured, storage 10x the consumer: at most 40% possible (4x slack), so all of it counts;
  // at 100x, at most 4%: the rest is not the storage's, and 4% is within twice a 3 pp noise.
  EXPECT_TRUE(fetch_of(30, 3, 100, 1000).claimed());
  EXPECT_DOUBLE_EQ(fetch_of(30, 3, 100, 10000).effective(), 4.0);
  EXPECT_FALSE(fetch_of(30, 3, 100, 10000).claimed());
  EXPECT_TRUE(fetch_of(30, 1, 100, 10000).claimed());
}

TEST(Decision, PrepStallsOnlyWherePrepIsSlowerThanCompute) {
  Split s;
  s.prep_pct = 10;
  SplitNoise n;
  n.prep_pp = 1;
  const StallShare slower = prep_share(s, n, 200, 100, 80);  // T_P - T_G = 5 ms of 12.5: 40%
  EXPECT_NEAR(slower.max_pct, 40, 1e-9);
  EXPECT_TRUE(slower.claimed());
  const StallShare faster = prep_share(s, n, 100, 200, 80);  // prep faster than compute: none possible
  EXPECT_EQ(faster.max_pct, 0);
  EXPECT_FALSE(faster.claimed());
  EXPECT_NE(share_text(faster).find("no slower than compute's"), std::string::npos) << share_text(faster);
}

// A remedy with its range propagated from its rates (lo, hi > 0), or measured once (0, 0: no range).
Remedy remedy(const std::string& name, Bound stall, double from, double to, double lo = 0, double hi = 0) {
  Remedy r{name, "the setting", from, to, stall};
  r.gain_lo = lo;
  r.gain_hi = hi;
  if (lo > 0 && hi > 0) r.range_from = "the rates at ±1 standard error";
  return r;
}

Remedy cache_remedy(double from, double to, double lo = 0, double hi = 0) {
  Remedy r = remedy("item cache", Bound::Fetch, from, to, lo, hi);
  r.detail = "91% of the dataset in the item cache (--cache-size)";
  return r;
}

// decide() over a split whose fetch share rests on storage S against the cold run F_obs and
// whose prep share on P against G; 2 CPUs now and recommended.
Decision decide_for(const Split& s, const SplitNoise& n, double S, double F_obs, double G, double P, double cache_rec,
                    std::vector<Remedy> candidates) {
  return decide(
      {s, fetch_share(s, n, F_obs, S), prep_share(s, n, G, P, F_obs), cache_rec, 2, 2, std::move(candidates)});
}

TEST(Decision, NoRemedyForAStallThatIsNotMeasurableAndTheVerdictSaysSo) {
  Split s{77.7, 3.2, 19.1};
  SplitNoise n{8.7, 12.0, 12.4};
  DecisionInputs in{s, fetch_share(s, n, kF, kS), prep_share(s, n, kG, kP, kF), 0.91, 2, 2, {cache_remedy(6.5, 7.87)}};
  const Decision d = decide(in);
  EXPECT_EQ(d.bound, Bound::Compute);
  EXPECT_FALSE(d.remedy.has_value());
  EXPECT_NE(d.verdict.find("no measurable stall"), std::string::npos) << d.verdict;
  ASSERT_EQ(d.not_named.size(), 1u);
  EXPECT_EQ(d.not_named[0], "item cache x1.21: no measurable fetch stall");
  EXPECT_EQ(d.remedy_text, "none named (item cache x1.21: no measurable fetch stall)");
}

TEST(Decision, ARealFetchStallNamesItsRemedyAndTheVerdictAgrees) {
  Split s{25, 25, 50};
  SplitNoise n{0.5, 1, 1};
  const Decision d = decide_for(s, n, 100, 100, 400, 200, 0.53, {cache_remedy(100, 190, 1.85, 1.95)});
  EXPECT_EQ(d.bound, Bound::Fetch);
  ASSERT_TRUE(d.remedy.has_value());
  EXPECT_EQ(d.remedy->name, "item cache");
  EXPECT_NE(d.verdict.find("fetch-bound: more DRAM helps up to 53% cached"), std::string::npos) << d.verdict;
  EXPECT_NE(d.remedy_text.find("item cache helps most: x1.90 [1.85-1.95]"), std::string::npos) << d.remedy_text;
}

TEST(Decision, ARemedyWhoseGainIsWithinTheNoiseIsNotNamed) {
  Split s{25, 25, 50};
  SplitNoise n{0.5, 1, 1};
  const Decision d = decide_for(s, n, 100, 100, 400, 200, 0.53, {cache_remedy(100, 108, 0.97, 1.20)});
  EXPECT_FALSE(d.remedy.has_value());
  ASSERT_EQ(d.not_named.size(), 1u);
  EXPECT_NE(d.not_named[0].find("within the rates' noise"), std::string::npos) << d.not_named[0];
}

TEST(Decision, ClaimedStallsBesideALargerComputeShareNameTheBoundAndTheRemedy) {
  // Compute 60%, real stalls of 25% (fetch) and 15% (prep): the accelerator waits for data 40% of the
  // time, so the bound is the larger stall, the verdict names the shares, and the cache buys x1.3.
  Split s{60, 15, 25};
  SplitNoise n{1, 1, 1};
  const Decision d = decide_for(s, n, 100, 100, 166.7, 125, 0.4, {cache_remedy(100, 130, 1.25, 1.35)});
  EXPECT_EQ(d.bound, Bound::Fetch);
  ASSERT_TRUE(d.remedy.has_value());
  EXPECT_EQ(d.verdict.find("neither"), std::string::npos) << d.verdict;
  EXPECT_EQ(d.verdict.find("compute-bound"), std::string::npos) << d.verdict;
  EXPECT_EQ(d.verdict.rfind("fetch-bound: compute 60%, a fetch stall of 25% (±1) and a prep stall of 15% (±1): more "
                            "DRAM helps up to 40% cached",
                            0),
            0u)
      << d.verdict;
}

TEST(Decision, ARemedyForTheOtherStallIsNotNamed) {
  // A real prep stall only: a cache (for fetch) is not the remedy even with a gain predicted.
  Split s{40, 55, 5};
  SplitNoise n{1, 1, 3};
  const Decision d =
      decide({s,
              fetch_share(s, n, 100, 100),
              prep_share(s, n, 250, 110, 100),
              0.2,
              4,
              2,
              {cache_remedy(100, 110, 1.05, 1.15), remedy("more CPUs", Bound::Prep, 100, 180, 1.7, 1.9)}});
  EXPECT_EQ(d.bound, Bound::Prep);
  ASSERT_TRUE(d.remedy.has_value());
  EXPECT_EQ(d.remedy->name, "more CPUs");
  EXPECT_NE(d.verdict.find("more DRAM does not help"), std::string::npos) << d.verdict;
}

// A public GAN training script under --exec: one DataLoader worker, its loader alone 80 ms a batch against
// 84 ms a training step (truth: more workers speed it up). `compute` and `prep` are the split's
// shares with their noise; fetch is 0 over storage far faster than the consumer. The rates are
// made to give those shares: F_obs 100/s, G = F_obs / compute share, P = F_obs.
DecisionInputs gan(double compute, double compute_noise, double prep, double prep_noise, int iterations,
                   std::vector<Remedy> candidates = {}, std::optional<int> cores_rec = std::nullopt) {
  const Split s{compute, prep, 0};
  const SplitNoise n{compute_noise, prep_noise, 0};
  constexpr double F = 100;
  return {s,
          fetch_share(s, n, F, 1e6),
          prep_share(s, n, F / (compute / 100), F, F),
          std::nullopt,
          cores_rec,
          2,
          std::move(candidates),
          compute_noise,
          iterations,
          1};
}

// With --iterations 12 the split was compute 52.7% ± 23.5 and prep 47.3% ± 34.7, and the verdict
// "compute-bound ... neither DRAM nor CPUs help": as unfounded as a stall within its noise.
TEST(Decision, EveryShareWithinItsNoiseIsInconclusiveWithTheMeasuringThatWouldDecideIt) {
  const Decision d = decide(gan(52.7, 23.5, 47.3, 34.7, 12));
  EXPECT_TRUE(d.inconclusive);
  EXPECT_FALSE(d.remedy.has_value());
  // The prep share is claimed once its noise is under half of it: 2 x 34.7 / sqrt(k) < 47.3, k > 2.15
  // (in steps of 5%: 1.05^16 = 2.18).
  ASSERT_TRUE(d.measure_factor.has_value());
  EXPECT_NEAR(*d.measure_factor, std::pow(1.05, 16), 1e-9);
  EXPECT_EQ(d.verdict.find("compute-bound"), std::string::npos) << d.verdict;
  EXPECT_EQ(d.verdict.rfind("inconclusive: no share is beyond twice its noise (compute 52.7% ± 23.5, prep 47.3% ± "
                            "34.7, fetch 0.0% ± 0.0)",
                            0),
            0u)
      << d.verdict;
  EXPECT_NE(d.verdict.find("measure ~2.2x longer to decide (--iterations 27 or --rounds 3)"), std::string::npos)
      << d.verdict;
  // A split that not even 16x the time decides (a 45% share under ±100) says so.
  const Decision never = decide(gan(55, 100, 45, 100, 12));
  EXPECT_TRUE(never.inconclusive);
  EXPECT_FALSE(never.measure_factor.has_value());
  EXPECT_NE(never.verdict.find("not even 16x longer would decide it"), std::string::npos) << never.verdict;
  // The self-check keeps the label and what would decide it.
  SelfCheck failed;
  failed.passed = false;
  failed.text = "self-check failed: ...";
  const Verdict v = checked_verdict(Verdict{d.bound, d.verdict, d.inconclusive}, failed);
  EXPECT_EQ(v.text.rfind("inconclusive: no share is beyond twice its noise", 0), 0u) << v.text;
  EXPECT_NE(v.text.find("measure ~2.2x longer"), std::string::npos) << v.text;
}

// The public ImageNet script (compute 77.7% ± 8.7, prep 3.2% ± 12.0, fetch 19.1% ± 12.4 over storage
// 1,369x the consumer): the stalls the noise allows stay well below compute's half, so it is
// compute-bound, and the verdict says how large a stall the noise still hides.
TEST(Decision, ComputeBoundIsDecidedWhereTheStallsWithinTheNoiseCannotOutweighCompute) {
  Split s{77.7, 3.2, 19.1};
  SplitNoise n{8.7, 12.0, 12.4};
  DecisionInputs in{s, fetch_share(s, n, kF, kS), prep_share(s, n, kG, kP, kF), 0.91, 2, 2, {}, 8.7, 12, 1};
  EXPECT_NEAR(in.fetch.upper(), in.fetch.max_pct, 1e-9);  // storage's own rate bounds the fetch share
  EXPECT_NEAR(in.prep.upper(), 3.2 + 2 * 12.0, 1e-9);
  const Decision d = decide(in);
  EXPECT_FALSE(d.inconclusive);
  EXPECT_EQ(d.bound, Bound::Compute);
  EXPECT_NE(d.verdict.find("compute-bound: no measurable stall"), std::string::npos) << d.verdict;
  EXPECT_NE(d.verdict.find("(stalls of at most 27% together are within it)"), std::string::npos) << d.verdict;
}

// With --iterations 60: compute 59.4% ± 9.0 and prep stall 40.6% ± 13.1, beyond twice its noise. It
// printed "compute-bound: the accelerator is the limit ... neither DRAM nor CPUs help beyond the noise".
TEST(Decision, AMeasurablePrepStallBesideALargerComputeShareIsNotComputeBound) {
  const Decision d = decide(gan(59.4, 9.0, 40.6, 13.1, 60));
  EXPECT_FALSE(d.inconclusive);
  EXPECT_EQ(d.bound, Bound::Prep);
  EXPECT_EQ(d.verdict.find("compute-bound"), std::string::npos) << d.verdict;
  EXPECT_EQ(d.verdict.find("neither"), std::string::npos) << d.verdict;
  EXPECT_EQ(d.verdict,
            "prep-bound: compute 59% and a prep stall of 41% (±13): more CPUs help beyond the largest count measured; "
            "more DRAM does not help");
}

// The same split with a CPU remedy predicted whose range crosses x1.02: the sweep is too noisy to
// size it, and the verdict says so instead of promising the CPUs or "neither helps".
TEST(Decision, ACpuSweepTooNoisyToSizeTheRemedyIsSaidSo) {
  const Decision d =
      decide(gan(59.4, 9.0, 40.6, 13.1, 60, {remedy("more CPUs", Bound::Prep, 100, 110, 0.95, 1.25)}, 4));
  EXPECT_EQ(d.bound, Bound::Prep);
  EXPECT_FALSE(d.remedy.has_value());
  EXPECT_NE(d.verdict.find("more CPUs may help, but the CPU sweep is too noisy to size them (more CPUs x1.10 "
                           "[0.95-1.25]): more --rounds or --iterations narrow it"),
            std::string::npos)
      << d.verdict;
  EXPECT_EQ(d.verdict.find("4 CPUs instead of 2"), std::string::npos) << d.verdict;
}

// An analysis behind a disk throttled to 70 MB/s ended with "coordinated prep helps most: x1.03 (... 1787.0 ->
// 1837.0 samples/s)", its gain_range [1.028, 1.028]: a range of zero width from single runs.
TEST(Decision, ARemedyMeasuredOnceHasNoRangeAndIsNotNamed) {
  Remedy once = remedy("coordinated prep", Bound::Prep, 1787.0, 1837.0);
  once.gain_lo = once.gain_hi = once.gain();  // what the analyzer wrote for it
  EXPECT_FALSE(once.has_range());
  const Decision d = decide(gan(40, 1, 60, 1, 60, {once}));
  EXPECT_EQ(d.bound, Bound::Prep);
  EXPECT_FALSE(d.remedy.has_value());
  ASSERT_EQ(d.not_named.size(), 1u);
  EXPECT_EQ(d.not_named[0], "coordinated prep x1.03: measured once: no range");
  EXPECT_EQ(d.remedy_text, "none named (coordinated prep x1.03: measured once: no range)");
  // A range of zero width that was propagated (the model does not move with its rates) is a range.
  Remedy flat = remedy("coordinated prep", Bound::Prep, 100, 200, 2.0, 2.0);
  EXPECT_TRUE(flat.has_range());
  EXPECT_TRUE(decide(gan(40, 1, 60, 1, 60, {flat})).remedy.has_value());
}

// x1.02 applies to the low end of every kind's range: below it, not named; across it, named.
TEST(Decision, TheLowEndOfEveryRemedysRangeMustReachTwoPercent) {
  const std::vector<std::pair<std::string, Bound>> kinds = {
      {"item cache", Bound::Fetch},        {"more CPUs", Bound::Prep}, {"coordinated prep", Bound::Prep},
      {"partitioned cache", Bound::Fetch}, {"io depth", Bound::Fetch}, {"OS page cache", Bound::Fetch},
      {"faster storage", Bound::Fetch}};
  const Split s{40, 30, 30};
  const SplitNoise n{1, 1, 1};
  for (const auto& [name, stall] : kinds) {
    // Gain x1.05, its range 1.01-1.09: the low end is within the noise.
    const Decision below = decide_for(s, n, 100, 100, 250, 143, 0.5, {remedy(name, stall, 100, 105, 1.01, 1.09)});
    EXPECT_FALSE(below.remedy.has_value()) << name;
    ASSERT_EQ(below.not_named.size(), 1u) << name;
    EXPECT_NE(below.not_named[0].find("its gain is within the rates' noise"), std::string::npos) << below.not_named[0];
    // 1.021-1.09: the whole range above x1.02.
    const Decision above = decide_for(s, n, 100, 100, 250, 143, 0.5, {remedy(name, stall, 100, 105, 1.021, 1.09)});
    ASSERT_TRUE(above.remedy.has_value()) << name;
    EXPECT_EQ(above.remedy->name, name);
  }
}

TEST(Plateau, TheRecommendationIsWhereTheCurveFirstReachesItsShareOfThePlateau) {
  // min(F(x), 200) with S 100, C 1000: 95% of 200 at F(x) = 190.
  const auto speed = [](double x) { return std::min(fetch_rate(x, 1000, 100), 200.0); };
  EXPECT_NEAR(cache_for_share(speed, 0.95), (0.01 - 1 / 190.0) / 0.009, 1e-6);
  EXPECT_NEAR(cache_for_share(speed, 1.0), 5.0 / 9.0, 1e-6);
  EXPECT_EQ(cache_for_share([](double) { return 5.0; }, 0.95), 0.0);  // flat: nothing to cache
}

TEST(Plateau, RoundsUncertaintyIsTheirStandardErrorRelativeToTheirMean) {
  EXPECT_EQ(rounds_uncertainty({}), 0.0);
  EXPECT_EQ(rounds_uncertainty({100}), 0.0);
  // 90, 100, 110: sd 10, mean 100, 3 rounds: 0.1 / sqrt(3).
  EXPECT_NEAR(rounds_uncertainty({90, 100, 110}), 0.1 / std::sqrt(3.0), 1e-12);
}

TEST(Plateau, ACheckPointIsOffOnlyBeyondBothTheThresholdAndItsRange) {
  CheckPoint p{0.5, 100, 108, 0, -1, -1};
  EXPECT_TRUE(p.off(5));  // 8% off, no range known
  p.lo = 95;
  p.hi = 115;
  EXPECT_FALSE(p.off(5));  // 100 is inside the prediction's range
  p.lo = 102;
  EXPECT_TRUE(p.off(5));
  p.predicted = 104;
  EXPECT_FALSE(p.off(5));  // 4% off: within the threshold
}

}  // namespace
}  // namespace mlbench::stall
