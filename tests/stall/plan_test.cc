#include "stall/plan.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace mlbench::stall {
namespace {

bool has(const std::vector<std::string>& args, const std::string& a) {
  return std::find(args.begin(), args.end(), a) != args.end();
}
std::string value_of(const std::vector<std::string>& args, const std::string& flag) {
  auto it = std::find(args.begin(), args.end(), flag);
  return (it == args.end() || it + 1 == args.end()) ? "" : *(it + 1);
}

TEST(Plan, IterationArgsSplitIntoTenObservationsPlusWarmup) {
  EXPECT_EQ(iteration_args(100, 2),
            (std::vector<std::string>{"--repeat", "12", "--number", "10", "--warmup", "2"}));
  EXPECT_EQ(value_of(iteration_args(5, 0), "--number"), "1");
}

TEST(Plan, RunsInOrderWithTheirFlagsAndCacheStates) {
  StallConfig c;
  c.bench = "loader";
  c.data = "/d";
  c.cpus = {1, 2};
  c.cache_fracs = {0, 0.5};
  c.iterations = 20;
  c.extra = {"--image-size", "64", "--workers", "4"};
  const auto runs = plan_runs(c, 1000, 50);
  std::vector<std::string> labels;
  for (const auto& r : runs) labels.push_back(r.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"synthetic", "cached", "cold", "fetch-cold", "fetch-cached", "cpus-1",
                                              "cpus-2", "cache-0.00", "cache-0.50", "page-0.50"}));
  EXPECT_TRUE(has(runs[0].args, "--synthetic"));
  EXPECT_EQ(runs[1].cache, CacheState::Warm);
  EXPECT_EQ(runs[2].cache, CacheState::Cold);
  EXPECT_TRUE(has(runs[2].args, "--drop-after-read"));
  EXPECT_TRUE(has(runs[3].args, "--fetch-only"));
  EXPECT_EQ(runs[4].cache, CacheState::Warm);
  for (const auto& r : runs) {
    EXPECT_EQ(value_of(r.args, "--data"), "/d") << r.label;
    EXPECT_TRUE(has(r.args, "--image-size")) << r.label;
  }
  // The sweep sets workers and cores itself, once.
  EXPECT_EQ(runs[6].cpus, 2);
  EXPECT_EQ(std::count(runs[6].args.begin(), runs[6].args.end(), "--workers"), 1);
  EXPECT_EQ(value_of(runs[6].args, "--workers"), "2");
  EXPECT_EQ(value_of(runs[6].args, "--cpu-cores"), "2");
  // Cache runs: capacity as a percentage; one observation per epoch (1000/50 = 20
  // iterations), one epoch of warm-up (the fill), three timed epochs.
  EXPECT_EQ(value_of(runs[8].args, "--cache-size"), "50%");
  EXPECT_DOUBLE_EQ(runs[8].cache_frac, 0.5);
  EXPECT_EQ(value_of(runs[8].args, "--number"), "20");
  EXPECT_EQ(value_of(runs[8].args, "--warmup"), "1");
  EXPECT_EQ(value_of(runs[8].args, "--repeat"), "4");
  EXPECT_EQ(std::count(runs[8].args.begin(), runs[8].args.end(), "--repeat"), 1);
  // The page-cache check: half the files resident, held there, whole epochs as the cache runs.
  EXPECT_EQ(runs[9].cache, CacheState::Partial);
  EXPECT_DOUBLE_EQ(runs[9].cache_frac, 0.5);
  EXPECT_TRUE(has(runs[9].args, "--hold-page-cache"));
  EXPECT_FALSE(has(runs[9].args, "--drop-after-read"));
  EXPECT_EQ(value_of(runs[9].args, "--repeat"), "4");
  // None asked for (0, or only the ends): no such run.
  c.page_fracs = {0, 1};
  EXPECT_EQ(plan_runs(c, 1000, 50).size(), 9u);
}

TEST(Plan, WarmupCoversThePipelineDepth) {
  StallConfig c;
  c.data = "/d";
  c.iterations = 40;  // 10 observations of 4
  c.cache_fracs = {0.5};
  const auto runs = plan_runs(c, 100, 10, 24);  // 24 batches may be ready before the timer starts
  EXPECT_EQ(value_of(runs[1].args, "--warmup"), "7");   // ceil(24 / 4) + 1
  EXPECT_EQ(value_of(runs[1].args, "--repeat"), "17");
  // Cache run: epochs of 10 batches; warm-up = the fill + ceil(24 / 10) epochs of depth.
  EXPECT_EQ(value_of(runs.back().args, "--number"), "10");
  EXPECT_EQ(value_of(runs.back().args, "--warmup"), "4");
  EXPECT_EQ(value_of(runs.back().args, "--repeat"), "8");  // 4 timed epochs cover 40 iterations
}

TEST(Plan, LongEpochsFallBackToObservationsOfIterations) {
  StallConfig c;
  c.data = "/d";
  c.iterations = 20;
  c.cache_fracs = {0.5};
  const auto runs = plan_runs(c, 100000, 10, 0);  // 10000 iterations per epoch
  EXPECT_EQ(value_of(runs.back().args, "--number"), "2");
  EXPECT_EQ(value_of(runs.back().args, "--warmup"), "5001");  // one epoch + 1 observation
}

TEST(Plan, PeerRunsAreNodesWithTheWholeDatasetThenTheirPartitionAndPeers) {
  StallConfig c;
  c.data = "/d";
  c.iterations = 20;
  c.extra = {"--image-size", "64", "--cache-size", "10%", "--peers", "h:1,h:2", "--rank", "1"};
  const auto runs = plan_peer_runs(c, 1000, 50, 0);  // 20 iterations an epoch
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].label, "peer-local");
  EXPECT_EQ(runs[1].label, "peer-2");
  for (const auto& r : runs) {
    EXPECT_EQ(r.nodes, 2);
    EXPECT_EQ(r.cache, CacheState::Warm);
    EXPECT_EQ(value_of(r.args, "--image-size"), "64");
    // The user's cache and peers are the plan's to set: one --cache-size, no --peers or --rank.
    EXPECT_EQ(std::count(r.args.begin(), r.args.end(), "--cache-size"), 1) << r.label;
    EXPECT_FALSE(has(r.args, "--peers") || has(r.args, "--rank")) << r.label;
    // Whole epochs: one of warm-up (the caches fill), three timed.
    EXPECT_EQ(value_of(r.args, "--number"), "20");
    EXPECT_EQ(value_of(r.args, "--warmup"), "1");
    EXPECT_EQ(value_of(r.args, "--repeat"), "4");
  }
  EXPECT_FALSE(runs[0].peers);
  EXPECT_EQ(value_of(runs[0].args, "--cache-size"), "100%");
  EXPECT_TRUE(runs[1].peers);
  EXPECT_EQ(value_of(runs[1].args, "--cache-size"), "50.0000%");
  c.peer_nodes = 4;
  EXPECT_EQ(plan_peer_runs(c, 1000, 50, 0)[1].label, "peer-4");
  EXPECT_EQ(value_of(plan_peer_runs(c, 1000, 50, 0)[1].args, "--cache-size"), "25.0000%");
  c.peer_nodes = 0;
  EXPECT_TRUE(plan_peer_runs(c, 1000, 50, 0).empty());
}

TEST(Plan, SharedDeviceRunsAreKSyntheticJobsAtOnceTimedLonger) {
  StallConfig c;
  c.data = "/d";
  c.iterations = 20;
  c.extra = {"--arch", "resnet18", "--cuda"};
  const auto runs = plan_shared_device_runs(c, {1, 2, 4});
  ASSERT_EQ(runs.size(), 2u) << "one job alone is the synthetic run itself";
  EXPECT_EQ(runs[0].label, "synthetic-x2");
  EXPECT_EQ(runs[1].label, "synthetic-x4");
  for (const auto& r : runs) {
    EXPECT_EQ(r.kind, "synthetic-shared");
    EXPECT_FALSE(r.peers);
    EXPECT_TRUE(has(r.args, "--synthetic"));
    EXPECT_EQ(value_of(r.args, "--arch"), "resnet18");
    EXPECT_TRUE(has(r.args, "--cuda"));
    // kSharedDeviceLength x 20 iterations in 10 observations of 8.
    EXPECT_EQ(value_of(r.args, "--number"), std::to_string(kSharedDeviceLength * 20 / 10));
  }
  EXPECT_EQ(runs[0].nodes, 2);
  EXPECT_EQ(runs[1].nodes, 4);
}

TEST(Plan, PeerRunsMustFitInHalfTheMemoryAvailable) {
  // 2 nodes and the page cache hold 3 copies of a 1 GB dataset: 6 GB available is enough.
  EXPECT_EQ(peer_runs_memory_problem(2, 1'000'000'000, 6'000'000'000), "");
  EXPECT_EQ(peer_runs_memory_problem(2, 1'000'000'000, 0), "") << "unknown memory: no limit";
  EXPECT_EQ(peer_runs_memory_problem(2, 1'000'000'000, 5'999'000'000),
            "2 nodes each caching the whole dataset and the page cache holding it (3 x 1000 MB) need more than half "
            "the memory available (5999 MB)");
  EXPECT_NE(peer_runs_memory_problem(4, 1'000'000'000, 6'000'000'000), "");
}

TEST(Plan, WithoutFlagsDropsFlagAndValue) {
  EXPECT_EQ(without_flags({"--workers", "4", "--x", "-j", "2", "--cpu-cores=3", "--y", "1"}, {"--workers", "-j", "--cpu-cores"}),
            (std::vector<std::string>{"--x", "--y", "1"}));
}

}  // namespace
}  // namespace mlbench::stall

namespace mlbench::stall {
namespace {
// Over HTTP the loader adapts its requests in flight unless --io-depth is given: the runs hold the
// starting depth, so that each is at a known one (the --io-depths runs at theirs).
TEST(Plan, OverHttpEveryRunHoldsADepth) {
  StallConfig c;
  c.bench = "loader";
  c.data = "http://127.0.0.1:1/d/";
  c.iterations = 20;
  c.extra = {"--workers", "2"};
  const auto runs = plan_runs(c, 1000, 50);
  for (const auto& r : runs) {
    if (r.kind == "iodepth") continue;  // the --io-depths runs: their own
    EXPECT_EQ(std::count(r.args.begin(), r.args.end(), "--io-depth"), 1) << r.label;
    EXPECT_EQ(value_of(r.args, "--io-depth"), "8") << r.label;
  }
  c.extra = {"--workers", "2", "--io-depth", "4"};
  for (const auto& r : plan_runs(c, 1000, 50)) {
    if (r.kind == "iodepth") continue;
    EXPECT_EQ(std::count(r.args.begin(), r.args.end(), "--io-depth"), 1) << r.label;
    EXPECT_EQ(value_of(r.args, "--io-depth"), "4") << r.label;
  }
}
}  // namespace
}  // namespace mlbench::stall
