// The fetch model of a dataset over HTTP (stall/remote_model.h): F(D) = min(B / size, D / L),
// the loader's speed min(P, F(D) / (1 - x)), its check against measured runs and its remedy.
#include "stall/remote_model.h"

#include <map>
#include <string>

#include "stall/measured.h"

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
  const RemoteWhatIf w = remote_whatif(
      r, 300, 0.02, 8, {{"cold", 8, 300, 0, 0}, {"iodepth-1", 1, 40, 0, 0}, {"cache-0.50", 8, 300, 0, 0.5}});
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

// A request's CPU, and the loader's shape: the what-if where the CPU is shared (docs/stall.md,
// "Datasets over HTTP", "A request's CPU").

namespace {

using namespace mlbench::stall;

RemoteRates lan(double latency_ms, double probe_ms) {
  RemoteRates r;
  r.latency_s = latency_ms / 1e3;
  r.probe_latency_s = probe_ms / 1e3;
  r.bandwidth_Bps = 500e6;
  r.mean_bytes = 100e3;  // 5000 samples/s of bandwidth
  r.probe_depth = 32;
  return r;
}

TEST(RemoteModel, LatencyRisesFromTheProbesToTheRunsAsAnotherRequestIsAhead) {
  const RemoteRates r = lan(4, 2);
  EXPECT_DOUBLE_EQ(latency_at(r, 1, 16), 0.002);
  EXPECT_DOUBLE_EQ(latency_at(r, 16, 16), 0.004);
  EXPECT_NEAR(latency_at(r, 2, 16), 0.002 + 0.002 * 0.5 / (15.0 / 16), 1e-12);
  EXPECT_GT(latency_at(r, 4, 16), latency_at(r, 2, 16));
  EXPECT_GT(latency_at(r, 64, 16), 0.004);  // beyond the runs' depth it keeps rising, less and less
  EXPECT_LT(latency_at(r, 64, 16), 0.002 + 0.002 / (15.0 / 16));
  EXPECT_DOUBLE_EQ(latency_at(r, 8, 1), 0.004);  // runs one at a time: their L throughout
}

TEST(RemoteModel, TheClosedFormChargesARequestsCpuToPrepOnTheMisses) {
  RequestCpu cpu;
  cpu.client_s = 200e-6;
  cpu.others_s = 100e-6;
  cpu.share = 0.5;
  cpu.cpus = 2;
  EXPECT_DOUBLE_EQ(cpu.charged_s(), 250e-6);
  const RemoteWhatIf w = remote_whatif(lan(2, 2), 2000, 0.01, 32, {}, cpu);
  // Prep-bound at 32 in flight: 1 / (1/2000 + 250 us / 2) = 1600.
  EXPECT_NEAR(remote_speed(w, 32), 1600, 1e-9);
  // Half the samples cached: half the requests.
  EXPECT_NEAR(remote_speed(w, 32, 0.5), 1.0 / (1.0 / 2000 + 0.5 * 125e-6), 1e-9);
  // Latency-bound at 1 in flight: D / L, the CPU not the bound.
  EXPECT_NEAR(remote_speed(w, 1), 500, 1e-9);
  // Without the charge, P.
  EXPECT_NEAR(remote_speed(remote_whatif(lan(2, 2), 2000, 0.01, 32, {}), 32), 2000, 1e-9);
}

TEST(RemoteModel, TheServerSharesTheMachineWhenOthersSpentATenthOfTheClientsCpu) {
  RequestCpu cpu;
  cpu.client_s = 200e-6;
  cpu.others_s = 15e-6;  // below 20 us: background
  EXPECT_FALSE(cpu.server_here());
  cpu.others_s = 19e-6;
  cpu.client_s = 100e-6;  // a tenth of the client's, but below 20 us
  EXPECT_FALSE(cpu.server_here());
  cpu.client_s = 300e-6;
  cpu.others_s = 25e-6;  // above 20 us, below a tenth of the client's
  EXPECT_FALSE(cpu.server_here());
  cpu.others_s = 150e-6;
  EXPECT_TRUE(cpu.server_here());
}

TEST(RemoteModel, TheSimulatedLoaderRunsAtPCachedAndBelowItWhereRequestsTakeItsCpu) {
  const LoaderShape shape{2, 2, 32, 4};
  const RemoteLoader loader = calibrate_remote_loader(shape, 1e6, 2000);
  EXPECT_GT(loader.prep_s, 0);
  RequestCpu cpu;
  cpu.client_s = 300e-6;
  cpu.cpus = 2;
  const RemoteWhatIf w = remote_whatif(lan(3, 2), 2000, 0.01, 16, {}, cpu, loader);
  ASSERT_TRUE(w.loader);
  EXPECT_NEAR(remote_speed(w, 16, 1.0), 2000, 2000 * 0.02);  // every sample cached: P
  // Prep-bound at 32: the requests' CPU takes what 1 / (1/P + r/c) leaves, within the simulation's noise.
  const double bound = 1.0 / (1.0 / 2000 + 300e-6 / 2);
  EXPECT_NEAR(remote_speed(w, 32), bound, bound * 0.05);
  EXPECT_LT(remote_speed(w, 32), 2000 * 0.9);
  // Latency-bound at 1: no faster than 1 / L1, and slower once the answer waits for a busy CPU.
  EXPECT_LE(remote_speed(w, 1), 1.0 / 0.002 * 1.001);
  EXPECT_GT(remote_speed(w, 1), 1.0 / 0.002 * 0.8);
  // The curve rises with the depth up to the prep bound, and the json says it is simulated.
  EXPECT_LT(remote_speed(w, 2), remote_speed(w, 8));
  const auto j = remote_whatif_json(w);
  EXPECT_TRUE(j["simulated"].get<bool>());
  EXPECT_NEAR(j["request_cpu"]["charged_us"].get<double>(), 300, 1e-9);
}

// The cold run's process CPU per sample less the cached run's; others from the cold run's
// machine busy CPUs less its own.
TEST(RemoteModel, ARequestsCpuComesFromTheColdRunAgainstTheCachedOne) {
  std::map<std::string, RunOutcome> runs;
  runs["cached"].report["process_cpu"] = {{"per_item_us", 900.0}, {"busy_cpus", 2.0}, {"host_busy_cpus", 2.0}};
  runs["cold"].report["process_cpu"] = {{"per_item_us", 1200.0}, {"busy_cpus", 1.6}, {"host_busy_cpus", 2.0}};
  runs["fetch-cold"].report["process_cpu"] = {{"per_item_us", 180.0}, {"busy_cpus", 0.7}, {"host_busy_cpus", 1.3}};
  runs["fetch-cached"].report["process_cpu"] = {{"per_item_us", 1.0}, {"busy_cpus", 0.5}};
  const RequestCpu c = request_cpu_of(runs, 2, 4);
  EXPECT_NEAR(c.client_s, 300e-6, 1e-12);
  EXPECT_EQ(c.client_from, "cold - cached");
  EXPECT_NEAR(c.others_s, 0.4 / 1.6 * 1200e-6, 1e-12);
  EXPECT_EQ(c.others_from, "cold");
  EXPECT_DOUBLE_EQ(c.share, 0.5);
  EXPECT_DOUBLE_EQ(c.cpus, 2);
  // Older reports (no host_busy_cpus), and no cold run: the fetch-alone runs', no others.
  runs.erase("cold");
  runs["fetch-cold"].report["process_cpu"].erase("host_busy_cpus");
  const RequestCpu f = request_cpu_of(runs, 2, 2);
  EXPECT_NEAR(f.client_s, 179e-6, 1e-12);
  EXPECT_EQ(f.client_from, "fetch-cold - fetch-cached");
  EXPECT_DOUBLE_EQ(f.others_s, 0);
  EXPECT_EQ(f.others_from, "");
}

// Where the reports carry what the client's threads spent (the I/O threads' CPU in their reads and
// the transfer thread's over its requests), that is the client's CPU per request, from the cached
// run (its requests made with prep beside them), not the difference of two runs' process CPU; the
// charge's range spans what the other runs measured of each term.
TEST(RemoteModel, TheClientsCpuIsWhatItsThreadsSpentInTheCachedRun) {
  std::map<std::string, RunOutcome> runs;
  const auto threads = [](double per_read_us, double transfer_s, double requests) {
    return nlohmann::json{
        {"read_ahead", {{"cpu_per_read_us", per_read_us}}},
        {"source_detail", {{"kind", "http"}, {"requests", requests}, {"transfer_cpu_s", transfer_s}}}};
  };
  runs["cached"].report["process_cpu"] = {{"per_item_us", 900.0}, {"busy_cpus", 2.0}, {"host_busy_cpus", 2.0}};
  runs["cached"].report["pipeline"] = threads(50, 0.3, 2000);  // 50 + 150 us
  runs["cold"].report["process_cpu"] = {{"per_item_us", 1500.0}, {"busy_cpus", 1.6}, {"host_busy_cpus", 2.0}};
  runs["cold"].report["pipeline"] = threads(40, 0.24, 2000);  // 40 + 120 us
  runs["fetch-cold"].report["process_cpu"] = {{"per_item_us", 180.0}, {"busy_cpus", 0.6}, {"host_busy_cpus", 0.9}};
  const RequestCpu c = request_cpu_of(runs, 2, 2);
  EXPECT_NEAR(c.client_s, 200e-6, 1e-12);  // not 1500 - 900 = 600 us
  EXPECT_EQ(c.client_from, "cached (its threads)");
  EXPECT_NEAR(c.direct_s.at("cold"), 160e-6, 1e-12);
  EXPECT_NEAR(c.client_lo_s, 160e-6, 1e-12);
  EXPECT_NEAR(c.client_hi_s, 200e-6, 1e-12);
  EXPECT_NEAR(c.others_s, 0.4 / 1.6 * 1500e-6, 1e-12);    // beside the cold run: 375 us
  EXPECT_NEAR(c.others_lo_s, 0.3 / 0.6 * 180e-6, 1e-12);  // beside the fetch-alone run: 90 us
  EXPECT_NEAR(c.others_hi_s, c.others_s, 1e-12);
  // Only the cold run has them: its threads'.
  runs["cached"].report.erase("pipeline");
  const RequestCpu d = request_cpu_of(runs, 2, 2);
  EXPECT_NEAR(d.client_s, 160e-6, 1e-12);
  EXPECT_EQ(d.client_from, "cold (its threads)");
}

// A held-out run is off when it is more than 5% from the prediction and outside the prediction's
// range (the corners of L, B, P and the request CPU's range), as the cache what-if's checks are.
TEST(RemoteModel, AHeldOutDepthInsideItsRangeIsNotOff) {
  RequestCpu cpu;
  cpu.client_s = 250e-6;
  cpu.client_lo_s = 150e-6;
  cpu.client_hi_s = 250e-6;
  cpu.cpus = 2;
  // Prep-bound at 32: 1 / (1/2000 + 250 us / 2) = 1600 predicted; 150 us: 1 / (1/2000 + 75 us) = 1739.
  const std::vector<DepthPoint> measured = {{"iodepth-32", 32, 1720}, {"iodepth-1", 1, 540}};
  const RemoteWhatIf w = remote_whatif(lan(2, 2), 2000, 0.0, 32, measured, cpu);
  ASSERT_EQ(w.checks.size(), 2u);
  const DepthPoint& p32 = w.checks[0];
  EXPECT_NEAR(p32.predicted, 1600, 1e-6);
  EXPECT_NEAR(p32.lo, 1600, 1e-6);
  EXPECT_NEAR(p32.hi, 1.0 / (1.0 / 2000 + 75e-6), 1e-6);
  EXPECT_GT(p32.error_pct(), 5);  // 7.5% off, inside its range
  EXPECT_FALSE(p32.off(kSelfCheckThresholdPct));
  // Depth 1 is latency-bound (500/s, no CPU in its range): 8% off and outside it.
  EXPECT_NEAR(w.checks[1].predicted, 500, 1e-6);
  EXPECT_TRUE(w.checks[1].off(kSelfCheckThresholdPct));
  EXPECT_FALSE(w.passed);
  const auto j = remote_whatif_json(w);
  EXPECT_FALSE(j["measured"][0]["off"].get<bool>());
  EXPECT_NEAR(j["measured"][0]["range"][1].get<double>(), p32.hi, 1e-6);
  EXPECT_TRUE(j["measured"][1]["off"].get<bool>());
  // Depth 32 alone, inside its range: the self-check passes.
  EXPECT_TRUE(remote_whatif(lan(2, 2), 2000, 0.0, 32, {measured[0]}, cpu).passed);
  // Without the charge's range, the same run is off.
  cpu.client_lo_s = cpu.client_hi_s = 0;
  EXPECT_TRUE(remote_whatif(lan(2, 2), 2000, 0.0, 32, {measured[0]}, cpu).checks[0].off(kSelfCheckThresholdPct));
}

// A held-out run measured to ±6% cannot tell a prediction 5% off from one on the mark: it is off only
// when its own 95% interval misses the prediction's range. Each check says where its requests' time
// went, as the run measured it and as the model has it; the console names it for a run that is off.
TEST(RemoteModel, AHeldOutRunIsOffOnlyWhenItsOwnNoiseMissesTheRangeAndSaysWhereTheTimeWent) {
  // Latency-bound at depth 1: 1 / 2 ms = 500/s predicted, no range (no uncertainty anywhere).
  DepthPoint noisy{"iodepth-1", 1, 540};
  noisy.u_measured = 0.06;  // 540 ± 32.4: down to 507.6, above 500
  noisy.read_ms = 1.80;
  noisy.beside_ms = 0.05;
  DepthPoint wide = noisy;
  wide.u_measured = 0.09;  // down to 491.4: 500 inside
  DepthPoint precise = noisy;
  precise.u_measured = 0.01;
  const RemoteWhatIf w = remote_whatif(lan(2, 2), 2000, 0.0, 32, {noisy, wide, precise});
  ASSERT_EQ(w.checks.size(), 3u);
  for (const DepthPoint& p : w.checks) {
    EXPECT_NEAR(p.predicted, 500, 1e-6);
    EXPECT_NEAR(p.error_pct(), 8, 1e-6);
    EXPECT_NEAR(p.model_read_ms, 2.0, 1e-9);  // L1 at depth 1, no growth
  }
  EXPECT_TRUE(w.checks[0].off(kSelfCheckThresholdPct));
  EXPECT_FALSE(w.checks[1].off(kSelfCheckThresholdPct));
  EXPECT_TRUE(w.checks[2].off(kSelfCheckThresholdPct));
  EXPECT_FALSE(w.passed);
  EXPECT_TRUE(remote_whatif(lan(2, 2), 2000, 0.0, 32, {wide}).passed);
  // Within 5%, never off, however precise.
  DepthPoint close{"iodepth-1", 1, 520};
  EXPECT_FALSE(remote_whatif(lan(2, 2), 2000, 0.0, 32, {close}).checks[0].off(kSelfCheckThresholdPct));
  const auto j = remote_whatif_json(w);
  const auto& m = j["measured"][0];
  EXPECT_NEAR(m["measured_u"].get<double>(), 0.06, 1e-12);
  EXPECT_NEAR(m["read_ms"]["measured"].get<double>(), 1.80, 1e-12);
  EXPECT_NEAR(m["read_ms"]["model"].get<double>(), 2.0, 1e-9);
  EXPECT_NEAR(m["beside_read_ms"].get<double>(), 0.05, 1e-12);
  // A run its loader did not time: nulls.
  const auto bare = remote_whatif_json(remote_whatif(lan(2, 2), 2000, 0.0, 32, {close}));
  EXPECT_TRUE(bare["measured"][0]["measured_u"].is_null());
  EXPECT_TRUE(bare["measured"][0]["read_ms"]["measured"].is_null());
  EXPECT_TRUE(bare["measured"][0]["beside_read_ms"].is_null());
}

// L1 probed again after the runs: the mean of the two probes, its uncertainty their drift; a depth-1
// run that the latency's drift explains is inside its range.
TEST(RemoteModel, TheProbeAfterTheRunsMakesL1TheirMeanAndItsDriftTheRange) {
  RemoteRates r = lan(2, 2);
  r.latency_from = "probe";
  r.u_latency = r.u_probe_latency = 0.01;
  with_end_probe(r, 0.0024, 0.02);
  EXPECT_NEAR(r.probe_latency_s, 0.0022, 1e-12);
  EXPECT_NEAR(r.probe_latency_start_s, 0.002, 1e-12);
  EXPECT_NEAR(r.probe_latency_end_s, 0.0024, 1e-12);
  EXPECT_NEAR(r.u_probe_latency, 0.0002 / 0.0022, 1e-12);
  EXPECT_NEAR(r.latency_s, 0.0022, 1e-12);  // L is still the probe's
  EXPECT_NEAR(r.u_latency, r.u_probe_latency, 1e-12);
  // Depth 1 is latency-bound: 1 / 2.2 ms = 454.5/s predicted; 1 / 2.03 ms is 8.4% faster, and
  // inside L1's range of ±9.1%.
  const std::vector<DepthPoint> measured = {{"iodepth-1", 1, 1.0 / 0.00203}};
  const RemoteWhatIf w = remote_whatif(r, 2000, 0.0, 32, measured);
  ASSERT_EQ(w.checks.size(), 1u);
  EXPECT_NEAR(w.checks[0].predicted, 1.0 / 0.0022, 1e-6);
  EXPECT_GT(w.checks[0].error_pct(), 5);
  EXPECT_FALSE(w.checks[0].off(kSelfCheckThresholdPct));
  EXPECT_TRUE(w.passed);
  // One probe only (no end probe): its standard error alone, and the same run is off.
  RemoteRates one = lan(2, 2);
  one.latency_from = "probe";
  one.latency_s = one.probe_latency_s = 0.0022;
  one.u_latency = one.u_probe_latency = 0.01;
  with_end_probe(one, 0, 0);
  EXPECT_DOUBLE_EQ(one.probe_latency_end_s, 0);
  EXPECT_FALSE(remote_whatif(one, 2000, 0.0, 32, measured).passed);
}

// The requests' latency under prep's load (docs/stall.md, "Datasets over HTTP", "Latency under
// prep's load"): calibrated from the cached run's first epoch, growing as u^c, bounded.

RemoteWhatIf loaded_whatif(double ratio, double rate, const RemoteRates& r, int depth = 8) {
  const LoaderShape shape{2, 2, 32, 4};
  const RemoteLoader loader = calibrate_remote_loader(shape, 1e6, 2000, 8000);
  RequestCpu cpu;
  cpu.client_s = 100e-6;
  cpu.cpus = 2;
  return remote_whatif(r, 2000, 0.01, depth, {}, cpu, loader, LoadedLatency{ratio, rate, depth, "cached"});
}

RemoteRates fetch_alone(double latency_ms, double probe_ms) {
  RemoteRates r = lan(latency_ms, probe_ms);
  r.latency_from = "fetch-cold";
  return r;
}

TEST(RemoteModel, UnderPrepsLoadALatencyBoundDepthSlowsAsTheLoadedEpochSaid) {
  // L 5 ms alone at depth 8 (1,600/s of requests); the loaded epoch, prep beside the requests at
  // 1,500 samples/s (prep ~1 ms a sample on 2 CPUs: u ~0.75), read 1.4x that.
  const RemoteRates r = fetch_alone(5, 4.5);
  const RemoteWhatIf old = loaded_whatif(0, 0, r);  // not measured: the latency alone
  const RemoteWhatIf w = loaded_whatif(1.4, 1500, r);
  EXPECT_DOUBLE_EQ(old.load_k_s, 0);
  const double u = 1500 * w.loader->prep_s / 2;
  EXPECT_NEAR(w.u_loaded, u, 1e-12);
  EXPECT_NEAR(w.load_k_s, 0.4 * 0.005 / (u * u), 1e-12);  // k = (L_loaded - L) / u^c, c = 2 CPUs
  // Depth 8 is latency-bound and prep runs at u ~0.7 there: the latency grows by k u^2 (~1.5 ms).
  const double was = remote_speed(old, 8), now = remote_speed(w, 8);
  EXPECT_LT(now, 0.85 * was);
  EXPECT_GT(now, 0.6 * was);
  // One at a time prep runs at u ~0.1: the latency grows by 1% of k, the speed within 3%.
  EXPECT_NEAR(remote_speed(w, 1), remote_speed(old, 1), 0.03 * remote_speed(old, 1));
  const auto j = remote_whatif_json(w)["latency_under_load"];
  EXPECT_EQ(j["from"], "cached");
  EXPECT_NEAR(j["growth_ms"].get<double>(), 1e3 * w.load_k_s, 1e-9);
}

TEST(RemoteModel, NearSaturationTheLatencyUnderLoadGrowsByAtMostTheCalibratedBound) {
  // Deep enough that prep saturates the CPUs: processor sharing's 1 / (1 - u) would grow the
  // latency without bound; this one by at most k, so the speed is no lower than with L + k.
  const RemoteRates r = fetch_alone(2, 1.8);
  const RemoteWhatIf w = loaded_whatif(2.0, 1500, r);
  ASSERT_GT(w.load_k_s, 0);
  RemoteRates bound = r;
  bound.latency_s += w.load_k_s;
  bound.probe_latency_s += w.load_k_s;
  const RemoteWhatIf worst = loaded_whatif(0, 0, bound);
  for (const int depth : {8, 16, 32}) {
    EXPECT_GE(remote_speed(w, depth), 0.98 * remote_speed(worst, depth)) << depth;
    EXPECT_GT(remote_speed(w, depth), 0.5 * remote_speed(w, 256)) << depth;  // not collapsed
  }
  // Prep-bound at 32 (64 / 4 ms of requests > P): the CPU's bound, not the latency, sets it.
  EXPECT_GT(remote_speed(w, 32), 0.9 * remote_speed(loaded_whatif(0, 0, r), 32));
}

TEST(RemoteModel, ALoadedEpochWithLittlePrepCalibratesNothing) {
  // Prep below 30% of the CPUs in the loaded epoch (latency-bound at +20 ms): its latency's growth
  // is noise, and no growth is modelled.
  const RemoteRates r = fetch_alone(21, 20.7);
  EXPECT_DOUBLE_EQ(loaded_whatif(1.05, 370, r).load_k_s, 0);
  // Nor where L is the probe's (no fetch-alone run), the loaded epoch ran at another depth, or
  // the closed form is used.
  EXPECT_DOUBLE_EQ(loaded_whatif(1.4, 1500, lan(5, 4.5)).load_k_s, 0);
  RequestCpu cpu;
  cpu.cpus = 2;
  EXPECT_DOUBLE_EQ(
      remote_whatif(fetch_alone(5, 4.5), 2000, 0.01, 8, {}, cpu, std::nullopt, {1.4, 1500, 8, "cached"}).load_k_s, 0);
  const LoaderShape shape{2, 2, 32, 4};
  EXPECT_DOUBLE_EQ(remote_whatif(fetch_alone(5, 4.5), 2000, 0.01, 8, {}, cpu,
                                 calibrate_remote_loader(shape, 1e6, 2000, 8000), {1.4, 1500, 16, "cached"})
                       .load_k_s,
                   0);
}

TEST(RemoteModel, TheLoadedLatencyIsTheCachedRunsFirstEpochAgainstTheFetchAloneRun) {
  std::map<std::string, RunOutcome> runs;
  runs["cached"].report["pipeline"] = {{"io_depth", 8},
                                       {"read_ahead", {{"per_read_ms", 3.35}}},
                                       {"epochs", {{{"images_per_s", 1978.0}}, {{"images_per_s", 4800.0}}}}};
  runs["fetch-cold"].report["pipeline"] = {{"io_depth", 8}, {"read_ahead", {{"per_read_ms", 2.5}}}};
  const LoadedLatency l = loaded_latency_of(runs);
  ASSERT_TRUE(l.known());
  EXPECT_NEAR(l.ratio, 3.35 / 2.5, 1e-12);
  EXPECT_DOUBLE_EQ(l.rate, 1978);
  EXPECT_EQ(l.depth, 8);
  EXPECT_EQ(l.from, "cached");
  // Older reports without the read-ahead's latency, or no fetch-alone run: not measured.
  runs["fetch-cold"].report["pipeline"]["read_ahead"].erase("per_read_ms");
  EXPECT_FALSE(loaded_latency_of(runs).known());
  runs.erase("fetch-cold");
  EXPECT_FALSE(loaded_latency_of(runs).known());
}

}  // namespace
