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

// stall.steps as the probe writes it: per timed iteration from `first`.
nlohmann::json with_steps(nlohmann::json report, const std::vector<double>& wait, const std::vector<double>& sync,
                          const std::vector<double>& compute, int first = 20) {
  report["stall"]["steps"] = {{"first", first}, {"count", wait.size()}, {"kept", wait.size()}, {"unit", "s"},
                              {"wait", wait},   {"sync", sync},         {"compute", compute}};
  return report;
}

// Rank 1 waits 200 ms a step cold, 50 ms cached, 1 ms from replayed batches: 150 ms fetch stall,
// 49 ms prep stall; rank 0 waits for it at the all-reduce.
TEST(Ranks, EachRanksDifferentialSplitSumsToItsStepAndTheJobsToOneHundred) {
  std::vector<RankFigures> cold{*rank_figures(rank_report(1, 2, 0.200, 0.001, 0.002)),
                                *rank_figures(rank_report(0, 2, 0.0003, 0.200, 0.002))};
  // The other runs list their ranks in another order: matched by rank number.
  const std::vector<RankFigures> cached{*rank_figures(rank_report(0, 2, 0.0003, 0.050, 0.002)),
                                        *rank_figures(rank_report(1, 2, 0.050, 0.001, 0.002))};
  const std::vector<RankFigures> synthetic{*rank_figures(rank_report(1, 2, 0.001, 0.001, 0.002)),
                                           *rank_figures(rank_report(0, 2, 0.0002, 0.001, 0.002))};
  add_split(cold, cached, synthetic);
  const RankFigures& r1 = cold[0];
  ASSERT_TRUE(r1.split_known);
  EXPECT_NEAR(r1.fetch_s, 0.150, 1e-12);
  EXPECT_NEAR(r1.prep_s, 0.049, 1e-12);
  EXPECT_NEAR(r1.split_compute_s, 0.002 + 0.001, 1e-12);  // its compute and the wait replayed batches still had
  EXPECT_NEAR(r1.fetch_s + r1.prep_s + r1.split_compute_s + r1.sync_s, r1.iteration_s, 1e-12);
  EXPECT_EQ(r1.cause(), "fetch");
  EXPECT_FALSE(cold[1].cause().has_value());  // rank 0's wait is 0.1% of its step: no cause to name
  const JobFigures job = job_figures(cold);
  ASSERT_TRUE(job.split_known);
  EXPECT_NEAR(job.compute_pct + job.prep_pct + job.fetch_pct + job.sync_pct, 100, 1e-9);
  // Each rank's shares of its own step, averaged: rank 1's fetch 150/203, rank 0's sync 200/202.3.
  EXPECT_NEAR(job.fetch_pct, 100 * (0.150 / 0.203) / 2, 1e-9);
  EXPECT_NEAR(job.sync_pct, 100 * (0.001 / 0.203 + 0.200 / 0.2023) / 2, 1e-9);
  EXPECT_NEAR(job.step_s, 0.203, 1e-12);  // the slowest rank's step
  ASSERT_TRUE(job.straggler.has_value());
  EXPECT_EQ(job.cause, "fetch");
  EXPECT_NE(job.text.find("straggler: rank 1 (fetch: its data wait 200.0 ms/step"), std::string::npos) << job.text;
  EXPECT_NE(job.text.find("rank 0 waited 200.0 ms/step at collectives"), std::string::npos) << job.text;
  const auto j = job_json(job, "cold");
  EXPECT_EQ(j["cause"], "fetch");
  EXPECT_NEAR(j["split"]["compute_ms"].get<double>() + j["split"]["prep_ms"].get<double>() +
                  j["split"]["fetch_ms"].get<double>() + j["split"]["sync_ms"].get<double>(),
              j["step_ms"].get<double>(), 1e-9);
  const auto rj = ranks_json(job);
  EXPECT_EQ(rj[1]["cause"], "fetch");
  EXPECT_NEAR(rj[1]["split"]["fetch_ms"].get<double>(), 150, 1e-9);
  EXPECT_TRUE(rj[0]["cause"].is_null());
  EXPECT_TRUE(rj[0]["late_steps"].is_null());  // no stall.steps in these reports
}

// Noise: a cached wait above the cold one is no negative fetch stall, and a prep stall is never
// more than the wait it splits; a rank missing from a run leaves the job's split unknown.
TEST(Ranks, TheSplitIsClampedToTheWaitAndAMissingRankLeavesItUnknown) {
  std::vector<RankFigures> cold{*rank_figures(rank_report(0, 2, 0.010, 0.0, 0.090)),
                                *rank_figures(rank_report(1, 2, 0.012, 0.0, 0.090))};
  add_split(cold, {*rank_figures(rank_report(0, 2, 0.011, 0.0, 0.090))},
            {*rank_figures(rank_report(0, 2, 0.0, 0.0, 0.090)), *rank_figures(rank_report(1, 2, 0.0, 0.0, 0.090))});
  EXPECT_TRUE(cold[0].split_known);
  EXPECT_DOUBLE_EQ(cold[0].fetch_s, 0.0);
  EXPECT_DOUBLE_EQ(cold[0].prep_s, 0.010);  // 11 ms cached, clamped to the cold run's 10 ms
  EXPECT_FALSE(cold[1].split_known);        // rank 1 has no cached report
  const JobFigures job = job_figures(cold);
  EXPECT_FALSE(job.split_known);
  EXPECT_TRUE(job_json(job, "cold")["split"].is_null());
  EXPECT_TRUE(ranks_json(job)[1]["split"].is_null());
}

// Per step: the late rank is the one with the largest data wait at that step, when it waited at
// least 5% of the step longer than the others; its lateness then is the delay it caused.
TEST(Ranks, PerStepTheLateRankIsCountedWithTheDelayItCaused) {
  std::vector<double> w0(10, 0.001), w1(10, 0.001), y(10, 0.0), c(10, 0.010);
  for (int i = 0; i < 6; ++i) w1[i] = 0.081;  // rank 1 late at steps 0-5 by 80 ms
  w0[7] = 0.041;                              // rank 0 late at step 7 by 40 ms
  w0[8] = 0.0015;                             // step 8: 0.5 ms apart, under 5% of the step: on time
  auto a = with_steps(rank_report(0, 2, 0.005, 0.048, 0.010), w0, y, c);
  auto b = with_steps(rank_report(1, 2, 0.049, 0.004, 0.010), w1, y, c);
  const JobFigures job = job_figures({*rank_figures(a), *rank_figures(b)});
  EXPECT_EQ(job.steps, 10);
  EXPECT_EQ(job.on_time_steps, 3);
  EXPECT_EQ(job.ranks[1].late_steps, 6);
  EXPECT_NEAR(job.ranks[1].delay_s, 6 * 0.080, 1e-9);
  EXPECT_EQ(job.ranks[0].late_steps, 1);
  EXPECT_NEAR(job.ranks[0].delay_s, 0.040, 1e-9);
  ASSERT_TRUE(job.straggler.has_value()) << job.text;
  EXPECT_NE(job.text.find("late at 6 of 10 steps"), std::string::npos) << job.text;
  EXPECT_NE(job.text.find("(data, prep or fetch: not split"), std::string::npos) << job.text;
  const auto rj = ranks_json(job);
  EXPECT_EQ(rj[1]["late_steps"], 6);
  EXPECT_NEAR(rj[1]["delay_ms"].get<double>(), 480, 1e-6);
  EXPECT_EQ(job_json(job, "cold")["on_time_steps"], 3);
  // Records that start at different iterations are compared by iteration, where both have them:
  // rank 0 from iteration 20 (late at 21), rank 1 from 22 (late at 24 and 25).
  std::vector<double> v0(10, 0.001), v1(8, 0.001);
  v0[1] = 0.041;
  v1[2] = v1[3] = 0.081;
  const JobFigures shifted =
      job_figures({*rank_figures(with_steps(rank_report(0, 2, 0.005, 0.048, 0.010), v0, y, c, 20)),
                   *rank_figures(with_steps(rank_report(1, 2, 0.049, 0.004, 0.010), v1,
                                            std::vector<double>(8, 0.0), std::vector<double>(8, 0.010), 22))});
  EXPECT_EQ(shifted.steps, 8);
  EXPECT_EQ(shifted.ranks[0].late_steps, 0);  // iteration 21 is before rank 1's records
  EXPECT_EQ(shifted.ranks[1].late_steps, 2);
  EXPECT_EQ(shifted.on_time_steps, 6);
}

// analyze()'s hook: the cold run's ranks split by the cached and synthetic runs' reports, in
// stall.json's blocks and the console's lines.
TEST(Ranks, TheResultSplitsTheColdRunsRanksByTheOtherRunsAndTheConsoleSaysIt) {
  const auto run = [](double wait1) {
    RunOutcome o;
    for (int rank : {0, 1}) {
      RunOutcome one;
      one.report = rank == 1 ? rank_report(1, 2, wait1, 0.001, 0.002) : rank_report(0, 2, 0.0003, wait1, 0.002);
      o.ranks.push_back(one);
    }
    return o;
  };
  std::map<std::string, RunOutcome> runs{{"cold", run(0.080)}, {"cached", run(0.079)}, {"synthetic", run(0.0005)}};
  nlohmann::json result = {{"runs", {{"cold", nlohmann::json::object()}, {"cached", nlohmann::json::object()}}}};
  add_ranks_block(runs, result);
  EXPECT_EQ(result["job"]["run"], "cold");
  EXPECT_EQ(result["job"]["cause"], "prep") << result["job"].dump(1);
  EXPECT_NEAR(result["ranks"][1]["split"]["prep_ms"].get<double>(), 78.5, 1e-9);
  EXPECT_NEAR(result["ranks"][1]["split"]["fetch_ms"].get<double>(), 1.0, 1e-9);
  EXPECT_TRUE(result["runs"]["cached"]["job"]["split"].is_null());  // only the cold run is split
  const std::string text = ranks_text(result);
  EXPECT_NE(text.find("rank 1 48.2/s compute 3% prep 95% fetch 1% sync 1%"), std::string::npos) << text;
  EXPECT_NE(text.find("job: compute "), std::string::npos) << text;
  EXPECT_NE(text.find("the sync wait is rank 1's lateness (prep)"), std::string::npos) << text;
  EXPECT_NE(text.find("straggler: rank 1 (prep: its data wait 80.0 ms/step"), std::string::npos) << text;
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
