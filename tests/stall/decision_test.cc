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

Remedy cache_remedy(double from, double to, double lo = 0, double hi = 0) {
  Remedy r{"item cache", "91% of the dataset in the item cache (--cache-size)", from, to, Bound::Fetch};
  r.gain_lo = lo;
  r.gain_hi = hi;
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

TEST(Decision, AComputeBoundVerdictWithARemedyNamedSaysWhatItBuysNotThatNothingHelps) {
  // Compute 60%, a real fetch stall of 25%: compute-bound, and the cache still buys x1.3.
  Split s{60, 15, 25};
  SplitNoise n{1, 1, 1};
  const Decision d = decide_for(s, n, 100, 100, 166.7, 125, 0.4, {cache_remedy(100, 130, 1.25, 1.35)});
  EXPECT_EQ(d.bound, Bound::Compute);
  ASSERT_TRUE(d.remedy.has_value());
  EXPECT_EQ(d.verdict.find("neither"), std::string::npos) << d.verdict;
  EXPECT_NE(d.verdict.find("the fetch stall left (25%) is worth item cache (x1.30 [1.25-1.35])"), std::string::npos)
      << d.verdict;
}

TEST(Decision, ARemedyForTheOtherStallIsNotNamed) {
  // A real prep stall only: a cache (for fetch) is not the remedy even with a gain predicted.
  Split s{40, 55, 5};
  SplitNoise n{1, 1, 3};
  const Decision d = decide({s,
                             fetch_share(s, n, 100, 100),
                             prep_share(s, n, 250, 110, 100),
                             0.2,
                             4,
                             2,
                             {cache_remedy(100, 110), {"more CPUs", "4 CPUs", 100, 180, Bound::Prep}}});
  EXPECT_EQ(d.bound, Bound::Prep);
  ASSERT_TRUE(d.remedy.has_value());
  EXPECT_EQ(d.remedy->name, "more CPUs");
  EXPECT_NE(d.verdict.find("more DRAM does not help"), std::string::npos) << d.verdict;
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
