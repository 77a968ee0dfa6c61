// The read-ahead what-if model (stall/readahead_model.h): workers with a window of reads issued
// ahead, simulated. Its reason to exist is the knee, where min(F(x), P) was optimistic.
#include "stall/readahead_model.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace mlbench::stall {
namespace {

// stallsim's read-ahead grid shape: 4 workers on 2 CPUs, batches of 4, prefetch 16, io depth 4.
const LoaderShape kShape{4, 2, 4, 16};

TEST(ReadAheadModel, AtTheKneeItFallsBelowMinOfFetchAndPrepAsTheLoaderDid) {
  // G 500, P 250, S 62.5: fetch meets prep at 75% cached, where stallsim's loader measured
  // 226.1/s (the overlap model said 249, 10.2% high).
  const ReadAheadModel m = calibrate_readahead(kShape, 1, 500, 250, 62.5, 40000);
  const double at_knee = readahead_speed(m, 0.75, CacheKind::Item);
  EXPECT_NEAR(at_knee, 226.1, 0.03 * 226.1);
  EXPECT_LT(at_knee, 0.95 * 250);
  // G 1000, P 500, S 250: the knee at 50%, measured 471.0/s (the overlap model 497, 5.5% high).
  const ReadAheadModel half = calibrate_readahead(kShape, 1, 1000, 500, 250, 40000);
  EXPECT_NEAR(readahead_speed(half, 0.5, CacheKind::Item), 471.0, 0.03 * 471.0);
}

TEST(ReadAheadModel, AwayFromTheKneeItIsTheSlowerStage) {
  const ReadAheadModel m = calibrate_readahead(kShape, 1, 500, 250, 62.5, 40000);
  EXPECT_NEAR(readahead_speed(m, 0.0, CacheKind::Item), 62.5, 0.01 * 62.5);  // storage
  EXPECT_NEAR(readahead_speed(m, 1.0, CacheKind::Page), 250, 0.01 * 250);    // the cached run, as calibrated
  EXPECT_NEAR(readahead_speed(m, 0.25, CacheKind::Item), 1 / (0.75 / 62.5), 0.02 * 83.3);  // fetch alone
  EXPECT_NEAR(readahead_speed_storage(m, 2.0), 125, 0.02 * 125);
}

TEST(ReadAheadModel, AWiderWindowSmoothsTheMissesOut) {
  const ReadAheadModel narrow = calibrate_readahead(kShape, 1, 500, 250, 62.5, 40000);
  const ReadAheadModel wide = calibrate_readahead(kShape, 8, 500, 250, 62.5, 40000);
  EXPECT_GT(readahead_speed(wide, 0.75, CacheKind::Item), readahead_speed(narrow, 0.75, CacheKind::Item) * 1.02);
  EXPECT_LE(readahead_speed(wide, 0.75, CacheKind::Item), 250 * 1.01);
}

TEST(ReadAheadModel, SameSeedSameSpeedAndMoreCacheIsNotSlower) {
  const SampleCosts c{1 / 62.5, 0, 0, 8e-3, 4 / 500.0};
  EXPECT_EQ(simulate_readahead(kShape, 1, c, 0.5), simulate_readahead(kShape, 1, c, 0.5));
  double last = 0;
  for (double x = 0; x <= 1.0001; x += 0.125) {
    const double v = simulate_readahead(kShape, 1, c, x);
    EXPECT_GE(v, last * 0.99) << x;
    last = v;
  }
}

TEST(ReadAheadModel, AReadsCpuSlowsPrepAndAnItemHitSavesIt) {
  // Prep-bound on 2 CPUs: 50 us more per miss and 20 us saved per item-cache hit move the ends.
  ReadCpu cpu{50e-6, 20e-6, 2};
  const ReadAheadModel m = calibrate_readahead(kShape, 2, 1e6, 4000, 1e5, 1e6, std::nullopt, cpu);
  EXPECT_NEAR(m.miss_s, 50e-6, 1e-12);
  const double cached = readahead_speed(m, 1.0, CacheKind::Page);
  EXPECT_NEAR(cached, 4000, 40);
  EXPECT_LT(readahead_speed(m, 0.0, CacheKind::Page), cached * 0.92);  // 500 -> 550 us a sample
  EXPECT_GT(readahead_speed(m, 1.0, CacheKind::Item), cached * 1.03);  // 500 -> 480 us
}

// Real storage serves the reads in flight at once (S in aggregate): where misses are sparse they
// need not wait their turn, and the speed is prep's: with most files in the page cache, a loader
// behind a throttled disk runs faster than one-at-a-time storage would allow (docs/stall.md, "Held
// out: how the answers did").
TEST(ReadAheadModel, AStorageQueueServesSparseMissesWithoutWaitingTheirTurn) {
  const LoaderShape two{2, 2, 64, 4};
  const SampleCosts c{1 / 848.0, 54e-6, 12e-6, 380e-6, 64 / 2e7};
  const double fifo = simulate_readahead(two, 4, c, 0.9, 0, 0);
  const double queue = simulate_readahead(two, 4, c, 0.9, 0, 8);
  const double prep_only = simulate_readahead(two, 4, c, 1.0, 0, 0);
  EXPECT_GT(queue, fifo * 1.02);
  EXPECT_GT(queue, 0.97 * prep_only * (380e-6 / (380e-6 + 0.1 * 54e-6)));
  // Saturated (every sample a miss): S either way.
  EXPECT_NEAR(simulate_readahead(two, 4, c, 0.0, 0, 8), 848, 0.02 * 848);
  EXPECT_NEAR(simulate_readahead(two, 4, c, 0.0, 0, 0), 848, 0.02 * 848);
}

// Over HTTP an answer's CPU takes a prep CPU but its item does not queue behind prep's work: a
// request's CPU-side wait is in its latency (docs/stall.md, "Datasets over HTTP"). 2 workers on 2
// CPUs, 4 requests in flight of 5 ms, prep 2 ms, an answer's CPU 1 ms, half the samples hits: the
// CPUs bound it at 2 / (2 + 0.5 x 1) ms = 800/s. With the items held until their CPU had run
// behind the prep queued before it, workers waited on misses while hits sat ready: 729.6/s.
TEST(ReadAheadModel, AnAnswersCpuTakesAPrepCpuWithoutHoldingItsItemBehindPrep) {
  const LoaderShape shape{2, 2, 32, 4};
  SampleCosts c;
  c.storage_s = 1e-6;
  c.prep_s = 2e-3;
  c.batch_s = 32 / 1e6;
  c.latency_s = 5e-3;
  c.channels = 4;
  c.request_cpu_s = 1e-3;
  const double with_cpu = simulate_readahead(shape, 2, c, 0.5);
  EXPECT_GT(with_cpu, 0.94 * 800);
  EXPECT_LE(with_cpu, 800 * 1.001);  // the CPU it takes still bounds it
  // Every sample a miss, CPU-bound: 2 / (2 + 1) ms.
  c.channels = 8;
  EXPECT_NEAR(simulate_readahead(shape, 4, c, 0.0), 2 / 3e-3, 0.01 * 2 / 3e-3);
}

TEST(ReadAheadModel, BadShapeOrRateIsRejected) {
  EXPECT_THROW(simulate_readahead({0, 1, 1, 1}, 1, {}, 0.5), std::invalid_argument);
  EXPECT_THROW(simulate_readahead(kShape, 0, {}, 0.5), std::invalid_argument);
  EXPECT_THROW(simulate_readahead(kShape, 1, {}, 1.5), std::invalid_argument);
  EXPECT_THROW(calibrate_readahead(kShape, 1, 0, 250, 62.5, 40000), std::invalid_argument);
}

}  // namespace
}  // namespace mlbench::stall
