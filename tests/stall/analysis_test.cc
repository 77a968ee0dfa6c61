#include "stall/analysis.h"

#include <cmath>
#include <stdexcept>

#include <gtest/gtest.h>

namespace mlbench::stall {
namespace {

TEST(Split, HandComputedMixedCase) {
  // T_G = 10 ms, T_P = 20 ms, T_cold = 40 ms per sample.
  const Split s = split(100, 50, 25);
  EXPECT_DOUBLE_EQ(s.compute_pct, 25.0);
  EXPECT_DOUBLE_EQ(s.prep_pct, 25.0);
  EXPECT_DOUBLE_EQ(s.fetch_pct, 50.0);
}

TEST(Split, PureCases) {
  const Split compute = split(100, 100, 100);
  EXPECT_DOUBLE_EQ(compute.compute_pct, 100.0);
  EXPECT_DOUBLE_EQ(compute.prep_pct, 0.0);
  EXPECT_DOUBLE_EQ(compute.fetch_pct, 0.0);
  const Split prep = split(400, 100, 100);
  EXPECT_DOUBLE_EQ(prep.compute_pct, 25.0);
  EXPECT_DOUBLE_EQ(prep.prep_pct, 75.0);
  EXPECT_DOUBLE_EQ(prep.fetch_pct, 0.0);
}

TEST(Split, NoiseIsClampedAndRescaledToHundred) {
  // Cached run slightly faster than synthetic: prep share would be negative.
  const Split s = split(100, 101, 99);
  EXPECT_LT(s.raw_prep_pct, 0.0);
  EXPECT_DOUBLE_EQ(s.prep_pct, 0.0);
  EXPECT_NEAR(s.compute_pct + s.prep_pct + s.fetch_pct, 100.0, 1e-9);
  EXPECT_NEAR(s.compute_pct, 100.0 * s.raw_compute_pct / (s.raw_compute_pct + s.raw_fetch_pct), 1e-9);
  EXPECT_NEAR(s.raw_compute_pct, 99.0, 1e-9);
}

TEST(Split, RejectsNonPositiveRates) {
  EXPECT_THROW(split(0, 1, 1), std::invalid_argument);
  EXPECT_THROW(split(1, -1, 1), std::invalid_argument);
}

TEST(WhatIf, FetchRateFollowsTheCacheModel) {
  EXPECT_DOUBLE_EQ(fetch_rate(0.0, 1000, 100), 100.0);
  EXPECT_DOUBLE_EQ(fetch_rate(1.0, 1000, 100), 1000.0);
  EXPECT_NEAR(fetch_rate(0.5, 1000, 100), 1.0 / (0.5 / 1000 + 0.5 / 100), 1e-9);
  EXPECT_THROW(fetch_rate(1.5, 1000, 100), std::invalid_argument);
}

TEST(WhatIf, PredictedSpeedIsTheMinimum) {
  EXPECT_DOUBLE_EQ(predicted_speed(0.0, 500, 300, 1000, 100), 100.0);  // fetch
  EXPECT_DOUBLE_EQ(predicted_speed(1.0, 500, 300, 1000, 100), 300.0);  // compute
  EXPECT_DOUBLE_EQ(predicted_speed(1.0, 200, 300, 1000, 100), 200.0);  // prep
}

TEST(WhatIf, RecommendedCacheIsTheSmallestSufficientFraction) {
  const auto x = recommended_cache(200, 300, 1000, 100);
  ASSERT_TRUE(x.has_value());
  EXPECT_NEAR(*x, 5.0 / 9.0, 1e-12);
  EXPECT_NEAR(fetch_rate(*x, 1000, 100), 200.0, 1e-9);
  EXPECT_EQ(recommended_cache(200, 300, 1000, 250), 0.0);   // storage already fast enough
  EXPECT_FALSE(recommended_cache(2000, 3000, 1000, 100).has_value());  // memory too slow
}

TEST(WhatIf, ExposedFetchIsTheColdTimeBeyondThePipelinedBound) {
  // Pipelined: the cold run is as fast as min(S, P, G), nothing exposed.
  EXPECT_DOUBLE_EQ(exposed_fetch_s(1000, 400, 300, 300), 0.0);
  EXPECT_DOUBLE_EQ(exposed_fetch_s(1000, 400, 300, 320), 0.0);  // faster than the bound: clamped
  // Workers fetch then prep in turn: T_cold = T_P + T_fetch (1/500 + 1/2000).
  EXPECT_NEAR(exposed_fetch_s(1e9, 500, 2000, 400), 1.0 / 400 - 1.0 / 500, 1e-15);
  // 4% slower than the bound is drift between runs, below the 5% threshold.
  EXPECT_DOUBLE_EQ(exposed_fetch_s(90, 83.4, 10000, 80.0), 0.0);
  EXPECT_GT(exposed_fetch_s(90, 83.4, 10000, 80.0, 0.0), 0.0);
}

TEST(WhatIf, ExposedFetchIsChargedToEachCacheMiss) {
  // P = 500, S = 2000 (fast storage), cold 400/s: 0.5 ms exposed per sample.
  const double e = exposed_fetch_s(1e9, 500, 2000, 400);
  EXPECT_NEAR(predicted_speed(0.0, 500, 1e9, 1e5, 2000, e), 400.0, 1e-9);  // the cold run itself
  EXPECT_NEAR(predicted_speed(0.5, 500, 1e9, 1e5, 2000, e), 1.0 / (1.0 / 500 + 0.5 * e), 1e-9);
  EXPECT_NEAR(predicted_speed(1.0, 500, 1e9, 1e5, 2000, e), 500.0, 1e-9);
  // Without exposure the model is min(F(x), P, G) unchanged.
  EXPECT_DOUBLE_EQ(predicted_speed(0.0, 500, 1e9, 1e5, 2000, 0.0), 500.0);
  // The speed reaches P only at x = 1: recommend the smallest x within 2%:
  // 1/500 + (1 - x) e = 1 / (0.98 * 500)  =>  x = 1 - (1/490 - 1/500) / e.
  const auto x = recommended_cache(500, 1e9, 1e5, 2000, e);
  ASSERT_TRUE(x.has_value());
  EXPECT_NEAR(*x, 1.0 - (1.0 / 490 - 1.0 / 500) / e, 1e-9);
  EXPECT_GE(predicted_speed(*x, 500, 1e9, 1e5, 2000, e), 0.98 * 500 - 1e-9);
  // Memory too slow even fully cached.
  EXPECT_FALSE(recommended_cache(500, 1e9, 400, 2000, e).has_value());
  // Exposure too small to matter: no cache needed.
  EXPECT_EQ(recommended_cache(500, 1e9, 1e5, 2000, 1e-6), 0.0);
}

TEST(WhatIf, AStorageReadsCpuSlowsPrepInProportionToTheMisses) {
  // P = 5000/s on 2 CPUs (400 us of CPU a sample); a storage read costs 50 us more
  // CPU than a page-cache read, a page-cache read 20 us.
  const ReadCpu cpu{50e-6, 20e-6, 2.0};
  EXPECT_NEAR(prep_rate(0.0, 5000, CacheKind::Page, cpu), 1.0 / (1.0 / 5000 + 25e-6), 1e-9);
  EXPECT_NEAR(prep_rate(0.6, 5000, CacheKind::Page, cpu), 1.0 / (1.0 / 5000 + 0.4 * 25e-6), 1e-9);
  EXPECT_NEAR(prep_rate(1.0, 5000, CacheKind::Page, cpu), 5000.0, 1e-9);  // the cached run itself
  // An item-cache hit reads nothing: faster than the cached run at x = 1.
  EXPECT_NEAR(prep_rate(1.0, 5000, CacheKind::Item, cpu), 1.0 / (1.0 / 5000 - 10e-6), 1e-9);
  EXPECT_NEAR(prep_rate(0.5, 5000, CacheKind::Item, cpu), 1.0 / (1.0 / 5000 + 0.5 * 25e-6 - 0.5 * 10e-6), 1e-9);
  // A hit that costs more than a page-cache read (its bytes cold in memory): slower than the cached run.
  EXPECT_NEAR(prep_rate(1.0, 5000, CacheKind::Item, ReadCpu{50e-6, -20e-6, 2.0}), 1.0 / (1.0 / 5000 + 10e-6), 1e-9);
  // No term: P at every x, and the what-if is min(F(x), P, G) as before.
  EXPECT_DOUBLE_EQ(prep_rate(0.3, 5000, CacheKind::Page, ReadCpu{}), 5000.0);
  EXPECT_DOUBLE_EQ(predicted_speed(0.6, 5000, 1e9, 1e5, 3000, 0, CacheKind::Page, ReadCpu{}), 5000.0);
  // Prep-bound with 40% misses: the term sets the speed.
  EXPECT_NEAR(predicted_speed(0.6, 5000, 1e9, 1e5, 3000, 0, CacheKind::Page, cpu), 1.0 / (1.0 / 5000 + 0.4 * 25e-6),
              1e-9);
  // Fetch-bound: the term does not matter.
  EXPECT_NEAR(predicted_speed(0.3, 5000, 1e9, 1e5, 3000, 0, CacheKind::Page, cpu), fetch_rate(0.3, 1e5, 3000), 1e-9);
}

TEST(WhatIf, RecommendedCacheWithTheReadsCpuIsWhereFetchStopsBeingTheLimit) {
  const ReadCpu cpu{50e-6, 20e-6, 2.0};
  for (CacheKind kind : {CacheKind::Page, CacheKind::Item}) {
    const auto x = recommended_cache(5000, 1e9, 1e5, 3000, 0, kind, cpu);
    ASSERT_TRUE(x.has_value()) << to_string(kind);
    EXPECT_NEAR(fetch_rate(*x, 1e5, 3000), prep_rate(*x, 5000, kind, cpu), 1e-6) << to_string(kind);
  }
  // Each miss costs prep CPU, so fetch and prep meet at a lower speed, a smaller x, than without the term.
  EXPECT_LT(*recommended_cache(5000, 1e9, 1e5, 3000, 0, CacheKind::Page, cpu),
            *recommended_cache(5000, 1e9, 1e5, 3000));
  EXPECT_EQ(recommended_cache(5000, 1e9, 1e5, 6000, 0, CacheKind::Page, cpu), 0.0);             // storage keeps up
  EXPECT_FALSE(recommended_cache(5000, 1e9, 4000, 3000, 0, CacheKind::Page, cpu).has_value());  // memory too slow
}

TEST(WhatIf, RecommendedCoresIsTheSmallestSufficientCount) {
  const std::map<int, double> p{{1, 50}, {2, 100}, {4, 190}, {8, 300}};
  EXPECT_EQ(recommended_cores(p, 180), 4);
  EXPECT_EQ(recommended_cores(p, 10), 1);
  EXPECT_FALSE(recommended_cores(p, 400).has_value());
  EXPECT_DOUBLE_EQ(prep_rate_at(p, 3), 145.0);
  EXPECT_DOUBLE_EQ(prep_rate_at(p, 16), 300.0);
  EXPECT_DOUBLE_EQ(prep_rate_at(p, 0.5), 50.0);
}

TEST(WhatIf, CurveAndRelativeError) {
  const auto curve = whatif_curve({0, 0.5, 1}, 200, 300, 1000, 100);
  ASSERT_EQ(curve.size(), 3u);
  EXPECT_DOUBLE_EQ(curve[0].predicted, 100.0);
  EXPECT_NEAR(curve[1].fetch, 181.818181818, 1e-6);
  EXPECT_DOUBLE_EQ(curve[2].predicted, 200.0);
  EXPECT_DOUBLE_EQ(relative_error(105, 100), 0.05);
}

TEST(Direct, DisagreementIsExplained) {
  EXPECT_EQ(disagreement_note(12.0, 14.0, 1.0), "");  // within 5 points
  EXPECT_EQ(disagreement_note(0.0, 8.0, 5.0), "");    // within 2 x noise
  const std::string contention = disagreement_note(0.0, 12.6, 0.8);
  EXPECT_NE(contention.find("CPU contention"), std::string::npos) << contention;
  EXPECT_NE(contention.find("12.6%"), std::string::npos) << contention;
  const std::string bursts = disagreement_note(40.0, 20.0, 1.0);
  EXPECT_NE(bursts.find("bursts"), std::string::npos) << bursts;
}

TEST(Consistency, RunsOfTheSameRateMustAgree) {
  EXPECT_TRUE(consistency_warnings(2300, 1700, 2320).empty());
  EXPECT_TRUE(consistency_warnings(2300, 2400, std::nan("")).empty());  // cold 4% faster: noise
  const auto cold_faster = consistency_warnings(1000, 1200, std::nan(""));
  ASSERT_EQ(cold_faster.size(), 1u);
  EXPECT_NE(cold_faster[0].find("20% faster"), std::string::npos) << cold_faster[0];
  // A low P (a noisy moment during the cached run) against the full-cache run.
  const auto low_p = consistency_warnings(1612.6, 1675.3, 2317.9);
  ASSERT_EQ(low_p.size(), 1u);
  EXPECT_NE(low_p[0].find("differ by 30%"), std::string::npos) << low_p[0];
}

TEST(Verdict, PlainWords) {
  const Split fetch = split(100, 90, 30);
  const auto v = verdict(fetch, 0.48, 1, 2);
  EXPECT_EQ(v.bound, Bound::Fetch);
  EXPECT_EQ(v.text, "fetch-bound: more DRAM helps up to 48% cached, more CPUs do not help");
  const Split prep = split(400, 100, 100);
  const auto p = verdict(prep, 0.0, 8, 2);
  EXPECT_EQ(p.bound, Bound::Prep);
  EXPECT_EQ(p.text, "prep-bound: 8 CPUs instead of 2 remove the prep stall; more DRAM does not help");
  const auto c = verdict(split(100, 100, 100), 0.0, 1, 2);
  EXPECT_EQ(c.bound, Bound::Compute);
  EXPECT_NE(c.text.find("compute-bound"), std::string::npos);
}

// ResNet-18 at 32 px on a GPU with 16 workers: G 29,862/s, P 15,746/s,
// F 12,124/s split a cold epoch into compute 40.6%, prep stall 36.4%, fetch stall 23.0%. The
// largest share was compute, and the verdict said "compute-bound: ... neither DRAM nor CPUs help"
// beside a recommended cache of 81% and more CPUs: the GPU waited for data 59% of the time.
TEST(Verdict, StallsThatOutweighComputeTogetherNameTheBound) {
  const Split gpu = split(29862, 15746, 12124);
  ASSERT_NEAR(gpu.compute_pct, 40.6, 0.05);
  ASSERT_GT(gpu.prep_pct + gpu.fetch_pct, gpu.compute_pct);
  EXPECT_EQ(bound_of(gpu), Bound::Prep);
  const auto v = verdict(gpu, 0.81, std::nullopt, 16);
  EXPECT_EQ(v.text, "prep-bound: more CPUs help beyond the largest count measured; more DRAM helps up to 81% cached");
  // The same shares with fetch the larger stall: fetch-bound.
  EXPECT_EQ(bound_of(Split{40.6, 23.0, 36.4}), Bound::Fetch);
  // Compute at least as long as the stalls together: compute-bound, as before.
  EXPECT_EQ(bound_of(Split{50.0, 30.0, 20.0}), Bound::Compute);
  EXPECT_EQ(bound_of(Split{60.0, 25.0, 15.0}), Bound::Compute);
}

}  // namespace
}  // namespace mlbench::stall

namespace mlbench::stall {
namespace {

TEST(SplitNoise, ZeroNoiseZeroSpreadAndGrowsWithNoise) {
  const SplitNoise none = split_noise(100, 50, 25, 0, 0, 0);
  EXPECT_DOUBLE_EQ(none.compute_pp, 0.0);
  EXPECT_DOUBLE_EQ(none.fetch_pp, 0.0);
  const SplitNoise small = split_noise(100, 50, 25, 0.01, 0.01, 0.01);
  const SplitNoise big = split_noise(100, 50, 25, 0.05, 0.05, 0.05);
  EXPECT_GT(small.fetch_pp, 0.0);
  EXPECT_GT(big.fetch_pp, small.fetch_pp);
  // compute% = T_G / T_cold = 25%; with G and F_obs off by 1% each way it moves by about 0.5 pp.
  EXPECT_NEAR(small.compute_pp, 25.0 * (1.01 / 0.99 - 1), 0.05);
}

}  // namespace
}  // namespace mlbench::stall

namespace mlbench::stall {
namespace {

// A measured curve (real photographs behind a 70 MB/s throttle, 2 workers):
// measured vs predicted img/s at 0/25/50/75/100% cached; F(x) from S = 1919,
// C = 118,700.
std::vector<CheckPoint> issue14_points() {
  const double S = 1919, C = 118700;
  const double xs[] = {0, 0.25, 0.5, 0.75, 1};
  const double measured[] = {1905, 2522, 3187, 3590, 4104};
  const double predicted[] = {1919, 2545, 3777, 4328, 4328};
  std::vector<CheckPoint> out;
  for (int i = 0; i < 5; ++i) out.push_back({xs[i], measured[i], predicted[i], fetch_rate(xs[i], C, S)});
  return out;
}

TEST(SelfCheck, IntermediatePointsOffFailAndNameTheSerialCause) {
  const SelfCheck c = self_check(issue14_points(), 4328, 1e6);
  EXPECT_TRUE(c.ran);
  EXPECT_FALSE(c.passed);
  EXPECT_DOUBLE_EQ(c.threshold_pct, 5.0);
  ASSERT_EQ(c.points.size(), 3u) << "0% and 100% are the runs the model is built from, not checked";
  ASSERT_EQ(c.off.size(), 2u);
  EXPECT_DOUBLE_EQ(c.off[0].x, 0.5);
  EXPECT_DOUBLE_EQ(c.off[1].x, 0.75);
  EXPECT_NEAR(c.max_error_pct, 100 * (4328.0 - 3590) / 3590, 1e-9);  // 20.6%
  EXPECT_NE(c.text.find("50% and 75%"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("50% cached: measured 3187/s, predicted 3777/s, 18.5% off"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("75% cached: measured 3590/s, predicted 4328/s, 20.6% off"), std::string::npos) << c.text;
  EXPECT_NE(c.cause.find("serial workers"), std::string::npos) << c.cause;
  EXPECT_NE(c.cause.find("F(0.50) = 3777/s"), std::string::npos) << c.cause;
  EXPECT_EQ(c.text.find("25% cached"), std::string::npos) << "25% is 0.9% off: " << c.text;
}

TEST(SelfCheck, ALoaderThatReadsAheadIsNotBlamedOnSerialWorkers) {
  // The same misfit from a loader that reported read-ahead (--io-depth > 0): its
  // workers do not fetch and then prep in turn; what is left is exposed reads.
  const SelfCheck c = self_check(issue14_points(), 4328, 1e6, kSelfCheckThresholdPct, false, true);
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.cause.find("serial workers"), std::string::npos) << c.cause;
  EXPECT_NE(c.cause.find("the loader reads ahead"), std::string::npos) << c.cause;
  EXPECT_NE(c.cause.find("F(0.50) = 3777/s"), std::string::npos) << c.cause;
}

TEST(SelfCheck, FailedCheckWithholdsTheRecommendation) {
  const SelfCheck c = self_check(issue14_points(), 4328, 1e6);
  const Verdict v = checked_verdict(verdict(split(1e6, 4328, 1905), 0.57, 1, 2), c);
  EXPECT_EQ(v.bound, Bound::Fetch);
  EXPECT_EQ(v.text.rfind("fetch-bound: no recommendation", 0), 0u) << v.text;
  EXPECT_EQ(v.text.find("more DRAM helps"), std::string::npos) << v.text;
  EXPECT_EQ(v.text.find("CPUs"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("self-check failed"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("serial workers"), std::string::npos) << v.text;
}

TEST(SelfCheck, WithinThresholdPassesAndKeepsTheRecommendation) {
  std::vector<CheckPoint> points = issue14_points();
  points[2].measured = 3700;  // 2.1% off
  points[3].measured = 4200;  // 3.0% off
  const SelfCheck c = self_check(points, 4328, 1e6);
  EXPECT_TRUE(c.passed);
  EXPECT_TRUE(c.off.empty());
  EXPECT_TRUE(c.cause.empty());
  EXPECT_NEAR(c.max_error_pct, 100 * (4328.0 - 4200) / 4200, 1e-9);
  const Verdict v = checked_verdict(verdict(split(1e6, 4328, 1905), 0.57, 1, 2), c);
  EXPECT_EQ(v.text, "fetch-bound: more DRAM helps up to 57% cached, more CPUs do not help; self-check passed: the "
                    "what-if is within 5% of every measured cache fraction (largest error 3.0%, at 75%)");
}

TEST(SelfCheck, OtherCausesAreNamedFromTheRunsOwnMeasurements) {
  // The item cache held 30% of the dataset in the 50% run.
  std::vector<CheckPoint> held = issue14_points();
  held[2].cached_fraction = 0.30;
  const SelfCheck h = self_check(held, 4328, 1e6);
  EXPECT_NE(h.cause.find("the item cache held 30% of the dataset in the run at 50%"), std::string::npos) << h.cause;
  EXPECT_NE(h.cause.find("serial workers"), std::string::npos) << "the 75% point keeps its cause: " << h.cause;
  // The page cache held 40% of the dataset after the 75% run.
  std::vector<CheckPoint> page = issue14_points();
  page[3].page_cache_fraction = 0.40;
  page[3].cached_fraction = 0.75;
  const SelfCheck p = self_check(page, 4328, 1e6);
  EXPECT_NE(p.cause.find("the OS page cache held part of the dataset (40% after the run at 75%)"), std::string::npos)
      << p.cause;
  // Rates far apart, the speed above the prediction: nothing the runs explain.
  const SelfCheck u = self_check({{0.5, 1200, 1000, 1000}}, 5000, 1e6);
  EXPECT_FALSE(u.passed);
  EXPECT_NE(u.cause.find("none the analyzer can tell at 50%"), std::string::npos) << u.cause;
}

TEST(SelfCheck, WithoutIntermediatePointsItDoesNotRun) {
  const SelfCheck c = self_check({{0, 1905, 1919, 1919}, {1, 4104, 4328, 118700}}, 4328, 1e6);
  EXPECT_FALSE(c.ran);
  EXPECT_TRUE(c.points.empty());
  const Verdict v = checked_verdict(verdict(split(1e6, 4328, 1905), 0.57, 1, 2), c);
  EXPECT_NE(v.text.find("more DRAM helps up to 57% cached"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("not self-checked"), std::string::npos) << v.text;
}


TEST(Remedies, RankedByGainWithTiesInTheirOrderAndBadSpeedsDropped) {
  const auto ranked = rank_remedies({{"item cache", "50% cached", 100, 150},
                                     {"more CPUs", "4 CPUs", 100, 150},
                                     {"coordinated prep", "2 jobs", 60, 120},
                                     {"broken", "no speed", 0, 100},
                                     {"nan", "not measured", 100, std::nan("")}});
  ASSERT_EQ(ranked.size(), 3u);
  EXPECT_EQ(ranked[0].name, "coordinated prep");
  EXPECT_DOUBLE_EQ(ranked[0].gain(), 2.0);
  EXPECT_EQ(ranked[1].name, "item cache");  // a tie keeps the candidates' order
  EXPECT_EQ(ranked[2].name, "more CPUs");
  ASSERT_TRUE(best_remedy(ranked).has_value());
  EXPECT_EQ(remedy_text(ranked), "coordinated prep helps most: x2.00 (2 jobs: 60.0 -> 120.0 samples/s)");
}

TEST(Remedies, AGainWithinNoiseIsNotRecommended) {
  const auto ranked = rank_remedies({{"item cache", "0% cached", 100, 101}, {"coordinated prep", "2 jobs", 50, 50.5}});
  EXPECT_FALSE(best_remedy(ranked).has_value());
  EXPECT_EQ(remedy_text(ranked), "no remedy predicts a gain of 2% or more (item cache x1.01, coordinated prep x1.01)");
  EXPECT_FALSE(best_remedy({}).has_value());
  EXPECT_EQ(remedy_text({}), "no remedy predicted");
}

}  // namespace
}  // namespace mlbench::stall
