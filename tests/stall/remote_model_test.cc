// The fetch model of a dataset over HTTP (stall/remote_model.h): F(D) = min(B / size, D / L),
// the loader's speed min(P, F(D) / (1 - x)), its check against measured runs and its remedy.
#include "stall/remote_model.h"

#include <gtest/gtest.h>

namespace {

using namespace mlbench::stall;

RemoteRates rates(double latency_ms, double mb_per_s, double bytes = 100e3) {
  RemoteRates r;
  r.latency_s = latency_ms / 1e3;
  r.bandwidth_Bps = mb_per_s * 1e6;
  r.mean_bytes = bytes;
  r.probe_depth = 32;
  return r;
}

TEST(RemoteModel, FetchRateGrowsWithDepthUntilTheBandwidth) {
  const RemoteRates r = rates(20, 50);  // 50 samples/s a request stream; 500 samples/s of bandwidth
  EXPECT_DOUBLE_EQ(remote_fetch_rate(r, 1), 50);
  EXPECT_DOUBLE_EQ(remote_fetch_rate(r, 8), 400);
  EXPECT_DOUBLE_EQ(remote_fetch_rate(r, 32), 500);
  EXPECT_DOUBLE_EQ(remote_fetch_rate(r, 0), 0);
  EXPECT_DOUBLE_EQ(remote_fetch_rate(RemoteRates{}, 8), 0);  // not measured
}

TEST(RemoteModel, SpeedIsPrepBoundOnceFetchIsFastEnough) {
  const RemoteRates r = rates(20, 1000);
  EXPECT_DOUBLE_EQ(remote_speed(r, 1, 300), 50);
  EXPECT_DOUBLE_EQ(remote_speed(r, 8, 300), 300);
}

TEST(RemoteModel, TheCacheLiftsTheBandwidthBoundNotTheLatencyBound) {
  // Latency-bound: read-ahead's window holds hits too, so a cache frees no request slot.
  const RemoteRates slow = rates(20, 1000);
  EXPECT_DOUBLE_EQ(remote_speed(slow, 1, 300, 0.5), 50);
  // Bandwidth-bound (10 MB/s of 100 KB objects: 100 samples/s): half from the cache, twice the rate.
  const RemoteRates narrow = rates(2, 10);
  EXPECT_DOUBLE_EQ(remote_speed(narrow, 8, 300), 100);
  EXPECT_DOUBLE_EQ(remote_speed(narrow, 8, 300, 0.5), 200);
  EXPECT_DOUBLE_EQ(remote_speed(narrow, 8, 300, 1.0), 300);
  EXPECT_DOUBLE_EQ(remote_fetch_rate(narrow, 8, 0.5), 200);
}

TEST(RemoteModel, RecommendsTheSmallestDepthNearTheBestAndTheRemedySaysWhatBoundsItThen) {
  const RemoteRates r = rates(20, 1000);
  const RemoteWhatIf w = remote_whatif(r, 300, 0.02, 2, {{"cold", 2, 100, 0, 0}});
  ASSERT_TRUE(w.depth_rec);
  EXPECT_EQ(*w.depth_rec, 8);  // 8 / 20 ms = 400 >= 95% of 300
  EXPECT_TRUE(w.passed);
  ASSERT_EQ(w.checks.size(), 1u);
  EXPECT_DOUBLE_EQ(w.checks[0].predicted, 100);
  const auto remedy = io_depth_remedy(w);
  ASSERT_TRUE(remedy);
  EXPECT_NEAR(remedy->gain(), 3.0, 1e-9);
  EXPECT_NE(remedy->detail.find("from 2 to 8"), std::string::npos) << remedy->detail;
  EXPECT_NE(remedy->detail.find("prep-bound"), std::string::npos) << remedy->detail;
  // Bandwidth-bound instead: 10 MB/s of 100 KB objects is 100 samples/s, below prep's 300.
  const RemoteWhatIf narrow = remote_whatif(rates(20, 10), 300, 0.02, 1, {});
  const auto then_bw = io_depth_remedy(narrow);
  ASSERT_TRUE(then_bw);
  EXPECT_NE(then_bw->detail.find("bandwidth"), std::string::npos) << then_bw->detail;
}

TEST(RemoteModel, NoRemedyWhenTheDepthIsAlreadyEnough) {
  const RemoteWhatIf w = remote_whatif(rates(2, 1000), 300, 0.02, 8, {});
  EXPECT_FALSE(io_depth_remedy(w));
}

TEST(RemoteModel, TheSelfCheckFailsWhenAMeasuredRunMissesAndTheJsonSaysSo) {
  const RemoteRates r = rates(20, 1000);
  const RemoteWhatIf w =
      remote_whatif(r, 300, 0.02, 8, {{"cold", 8, 300, 0, 0}, {"iodepth-1", 1, 40, 0, 0}, {"cache-0.50", 8, 300, 0, 0.5}});
  EXPECT_NEAR(w.max_error_pct, 20.0, 1e-9);  // 40 measured against 50 predicted
  EXPECT_FALSE(w.passed);
  const auto j = remote_whatif_json(w);
  EXPECT_EQ(j.at("self_check_passed"), false);
  EXPECT_TRUE(j.at("recommended_io_depth").is_null());
  EXPECT_EQ(j.at("measured").size(), 3u);
  EXPECT_EQ(j.at("measured").back().at("cache_fraction"), 0.5);
  EXPECT_EQ(j.at("curve").front().at("io_depth"), 1);
}

TEST(RemoteModel, TheGainRangeSpansTheRatesUncertainty) {
  RemoteRates r = rates(20, 1000);
  r.u_latency = 0.1;
  const RemoteWhatIf w = remote_whatif(r, 300, 0.05, 1, {});
  const auto remedy = io_depth_remedy(w);
  ASSERT_TRUE(remedy);
  EXPECT_LT(remedy->gain_lo, remedy->gain());
  EXPECT_GT(remedy->gain_hi, remedy->gain());
}

}  // namespace

namespace {

TEST(RemoteModel, LIsTakenFromTheFetchAloneRunWhenItIsLatencyBound) {
  using namespace mlbench::stall;
  RemoteRates r;
  r.latency_s = 0.020;
  r.u_latency = 0.01;
  r.bandwidth_Bps = 100e6;
  r.mean_bytes = 100e3;                                           // 1000 samples/s of bandwidth
  const RemoteRates slow = with_loader_latency(r, 8, 370, 0.03);  // 8 / 370 = 21.6 ms
  EXPECT_NEAR(slow.latency_s, 8.0 / 370, 1e-12);
  EXPECT_DOUBLE_EQ(slow.probe_latency_s, 0.020);
  EXPECT_EQ(slow.latency_from, "fetch-cold");
  EXPECT_DOUBLE_EQ(slow.u_latency, 0.03);
  // Near the bandwidth bound the run says nothing of L: the probe's stays.
  const RemoteRates near = with_loader_latency(r, 8, 950, 0.03);
  EXPECT_DOUBLE_EQ(near.latency_s, 0.020);
  EXPECT_EQ(near.latency_from, "probe");
  EXPECT_DOUBLE_EQ(with_loader_latency(r, 8, 0, 0).latency_s, 0.020);  // no fetch-alone run
}

}  // namespace
