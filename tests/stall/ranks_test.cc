// The ranks of a distributed job under --exec (stall/ranks.h, docs/stall.md "Distributed jobs"):
// each rank's figures from its probe report, the straggler beyond the noise or "balanced", the
// executor reading every rank's report of a run, and the report's new fields through the typed
// reader.
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/instance_report.h"
#include "stall/executor.h"
#include "stall/ranks.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace mlbench::stall;

nlohmann::json stats(double avg, double sd, int count) {
  return {{"avg", avg}, {"min", avg - sd}, {"max", avg + sd}, {"sd", sd}, {"count", count}, {"unit", "s"}};
}

// A probe report of rank `rank` of `world`: per iteration `wait`, `sync` and `compute` seconds
// (sd 10% of each), 100 iterations of 4 samples.
nlohmann::json rank_report(int rank, int world, double wait, double sync, double compute) {
  const double step = wait + sync + compute;
  return {{"schema_version", 1},
          {"name", "ddp_train"},
          {"suite", "mlbench"},
          {"completed", true},
          {"number", 10},
          {"batch_size", 4},
          {"train", stats(10 * step, 0.01 * step, 10)},
          {"train_item", {{"avg", 4 / step}, {"min", 3.9 / step}, {"max", 4.1 / step}, {"unit", "items/sec"}}},
          {"stall",
           {{"wait", stats(wait, 0.1 * wait, 100)},
            {"h2d", stats(0, 0, 100)},
            {"compute", stats(compute, 0.1 * compute, 100)},
            {"iteration", stats(step, 0.1 * step, 100)},
            {"stall_pct", 100 * wait / step},
            {"sync", stats(sync, 0.1 * sync, 100)},
            {"sync_pct", 100 * sync / step},
            {"warmup_iterations", 20}}},
          {"rank",
           {{"rank", rank},
            {"local_rank", nullptr},
            {"world_size", world},
            {"from", "torch.distributed"},
            {"host", "node1"}}}};
}

TEST(Ranks, TheRankWithTheLargeDataWaitIsTheStragglerAndTheOthersSyncIsReported) {
  // Rank 1 loads 200 ms a step; rank 0 waits for it at the all-reduce.
  std::vector<RankFigures> ranks;
  ranks.push_back(*rank_figures(rank_report(1, 2, 0.200, 0.001, 0.002)));
  ranks.push_back(*rank_figures(rank_report(0, 2, 0.0003, 0.200, 0.002)));
  const JobFigures job = job_figures(ranks);
  ASSERT_TRUE(job.straggler.has_value()) << job.text;
  EXPECT_EQ(*job.straggler, 1);
  EXPECT_EQ(job.ranks.front().rank, 0);  // by rank
  EXPECT_NEAR(job.others_sync_s, 0.200, 1e-9);
  EXPECT_NE(job.text.find("straggler: rank 1"), std::string::npos) << job.text;
  const auto j = ranks_json(job);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["from"], "torch.distributed");
  EXPECT_TRUE(j[0]["local_rank"].is_null());
  EXPECT_NEAR(j[0]["sync_pct"].get<double>() + j[0]["wait_pct"].get<double>() + j[0]["compute_pct"].get<double>(), 100,
              0.2);
  EXPECT_EQ(job_json(job, "cold")["straggler"], 1);
}

TEST(Ranks, RanksWithinTheirNoiseOrBelowTheFloorAreBalanced) {
  // 0.3 ms apart at a 100 ms step: beyond the iterations' noise, but not 5% of the step.
  const JobFigures quiet = job_figures({*rank_figures(rank_report(0, 2, 0.0010, 0.0010, 0.100)),
                                        *rank_figures(rank_report(1, 2, 0.0013, 0.0010, 0.100))});
  EXPECT_FALSE(quiet.straggler.has_value()) << quiet.text;
  EXPECT_NE(quiet.text.find("balanced"), std::string::npos) << quiet.text;
  // Large waits on both, 10% apart with a wide spread over few iterations: within 2 sigma.
  auto a = rank_report(0, 2, 0.100, 0.0, 0.010), b = rank_report(1, 2, 0.110, 0.0, 0.010);
  for (auto* r : {&a, &b}) {
    (*r)["stall"]["wait"]["sd"] = 0.1;
    (*r)["stall"]["wait"]["count"] = 10;
  }
  const JobFigures noisy = job_figures({*rank_figures(a), *rank_figures(b)});
  EXPECT_FALSE(noisy.straggler.has_value()) << noisy.text;
  EXPECT_TRUE(job_json(noisy, "cold")["straggler"].is_null());
}

TEST(Ranks, TheExecutorReadsEveryRanksReportAndTakesTheSlowestRanksRate) {
  mlbench::testing_support::TempDir dir("ranks_outcome");
  const auto r0 = rank_report(0, 2, 0.0003, 0.200, 0.002), r1 = rank_report(1, 2, 0.200, 0.001, 0.0021);
  std::ofstream(dir.path() / "mlbench.ddp_train.rank0.R0.D0.20261129-100000-000000.json") << r0.dump();
  std::ofstream(dir.path() / "mlbench.ddp_train.rank1.R0.D0.20261129-100000-000001.json") << r1.dump();
  const RunOutcome out = read_outcome(dir.path(), "cold");
  ASSERT_EQ(out.ranks.size(), 2u);
  EXPECT_DOUBLE_EQ(out.rate, r1["train_item"]["avg"].get<double>());  // rank 1's step is the longer
  EXPECT_EQ(out.report["rank"]["rank"], 1);                           // and it waited longest for data
  std::map<std::string, RunOutcome> runs{{"cold", out}};
  nlohmann::json result = {{"runs", {{"cold", nlohmann::json::object()}}}};
  add_ranks_block(runs, result);
  EXPECT_EQ(result["job"]["straggler"], 1) << result.dump(1);
  EXPECT_EQ(result["runs"]["cold"]["ranks"].size(), 2u);
  EXPECT_NE(ranks_text(result).find("straggler: rank 1"), std::string::npos) << ranks_text(result);
  // A failed rank fails the run, naming it.
  auto failed = r0;
  failed["completed"] = false;
  failed["reason"] = "the script raised RuntimeError: boom";
  std::ofstream(dir.path() / "mlbench.ddp_train.rank0.R0.D0.20261129-100000-000000.json") << failed.dump();
  try {
    read_outcome(dir.path(), "cold");
    FAIL() << "a failed rank passed";
  } catch (const RunFailed& e) {
    EXPECT_NE(std::string(e.what()).find("cold rank 0"), std::string::npos) << e.what();
  }
}

TEST(Ranks, OneProcessHasNoRanksBlockInTheResult) {
  mlbench::testing_support::TempDir dir("ranks_one");
  std::ofstream(dir.path() / "mlbench.train.R0.D0.20261129-100000-000000.json") << rank_report(0, 1, 0.01, 0, 0.1);
  const RunOutcome out = read_outcome(dir.path(), "cold");
  EXPECT_TRUE(out.ranks.empty());
  nlohmann::json result = {{"runs", {{"cold", nlohmann::json::object()}}}};
  add_ranks_block({{"cold", out}}, result);
  EXPECT_FALSE(result.contains("job"));
  EXPECT_EQ(ranks_text(result), "");
}

TEST(Ranks, TheTypedReaderKeepsTheRankBlockAndTheSyncFields) {
  const auto j = rank_report(1, 2, 0.2, 0.001, 0.002);
  const auto r = mlbench::core::parse_instance_report(j);
  ASSERT_TRUE(r.stall.has_value());
  const auto back = mlbench::core::to_json(r);
  EXPECT_EQ(back["rank"], j["rank"]);
  EXPECT_EQ(back["stall"]["sync"], j["stall"]["sync"]);
  EXPECT_EQ(back["stall"]["sync_pct"], j["stall"]["sync_pct"]);
}

}  // namespace
