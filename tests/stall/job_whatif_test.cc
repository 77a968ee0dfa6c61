// The job's what-if (stall/job_whatif.h): CPUs per rank, the job stepping at its slowest rank, the
// server's page cache and storage shared by its ranks, the held-out checks and the advice, on
// injected numbers.
#include "stall/job_whatif.h"
#include "stall/analysis.h"

#include <gtest/gtest.h>

#include <string>

namespace mlbench::stall {
namespace {

JobRank rank(int r, double own_ms, double sync_ms, int cpus = 0, double u = 0, double items = 4) {
  JobRank j;
  j.rank = r;
  j.own_s = own_ms / 1e3;
  j.wait_s = j.own_s;
  j.sync_s = sync_ms / 1e3;
  j.cpus = cpus;
  for (int i = 0; i < cpus; ++i) j.cpu_set.push_back(i);
  j.u = u;
  j.items = items;
  return j;
}

JobRun run(const std::string& label, std::vector<JobRank> ranks, double c, bool split, double cached) {
  JobRun r;
  r.label = label;
  r.ranks = std::move(ranks);
  r.cpus_per_rank = c;
  r.split = split;
  r.cached = cached;
  return r;
}

// Two ranks, 4 samples a step each, compute 10 ms; at 1 CPU per rank rank 0 steps in 10 ms and
// rank 1 in 30 ms (prep); the all-reduce's own time 1 ms (rank 1's sync: it waits for no one).
JobInputs two_ranks(double S = 1e9, double C = 1e9, int workers = 2) {
  JobInputs in;
  in.ranks = 2;
  in.cpus = 2;
  in.workers = workers;
  in.compute = run("synthetic", {rank(0, 10, 1), rank(1, 10, 1)}, 1, false, 1);
  in.warm[1] = run("cpus-1", {rank(0, 10, 21, 1), rank(1, 30, 1, 1)}, 1, true, 1);
  in.S = S;
  in.C = C;
  in.dataset_gb = 10;
  in.mean_sample_bytes = 100e3;
  return in;
}

TEST(JobWhatIf, ASweepPointBeyondTheServersCpusIsNotGivenAndSaysWhy) {
  EXPECT_EQ(sweep_point_problem(2, 1, 2), "");
  const std::string why = sweep_point_problem(2, 2, 2);
  EXPECT_NE(why.find("cpus-2: not run"), std::string::npos) << why;
  EXPECT_NE(why.find("4 CPUs, more than the 2 CPUs here"), std::string::npos) << why;
}

TEST(JobWhatIf, TheSweepRunGivesTheJobKTimesCCpusAndTellsTheProbeTheSplit) {
  RunSpec spec;
  spec.label = "cpus-2";
  spec.kind = "cpus";
  spec.cpus = 2;
  EXPECT_EQ(split_cpus_per_rank(spec, 2, {4, 5, 6, 7, 8}), "");
  EXPECT_EQ(spec.cpus, 4);
  EXPECT_EQ(spec.env.at("MLBENCH_PROBE_CPUS_PER_RANK"), "2");
  EXPECT_EQ(spec.env.at("MLBENCH_PROBE_JOB_CPUS"), "4,5,6,7");
  EXPECT_EQ(spec.env.at("MLBENCH_PROBE_RANKS_PER_NODE"), "2");
  RunSpec too_many = spec;
  too_many.cpus = 3;
  too_many.env.clear();
  EXPECT_NE(split_cpus_per_rank(too_many, 2, {0, 1, 2, 3, 4}), "");
  EXPECT_TRUE(too_many.env.empty());
}

TEST(JobWhatIf, TheJobStepsAtItsSlowestRankPlusTheAllReduce) {
  const JobPrediction p = job_predict(two_ranks(), 1, 1);
  EXPECT_NEAR(p.rate, 8 / 0.031, 1e-6);
  EXPECT_EQ(p.slowest, 1);
  EXPECT_EQ(p.bound, "prep");
  EXPECT_DOUBLE_EQ(p.lo, p.rate);  // no noise: the range is one value
  EXPECT_DOUBLE_EQ(p.hi, p.rate);
}

TEST(JobWhatIf, BeyondTheMeasuredCountsPrepScalesWithTheCpusPerRankDownToTheCompute) {
  const JobInputs in = two_ranks();
  EXPECT_NEAR(job_predict(in, 2, 1).rate, 8 / 0.016, 1e-6);  // rank 1: 30 ms / 2
  EXPECT_NEAR(job_predict(in, 4, 1).rate, 8 / 0.011, 1e-6);  // 7.5 ms, below its 10 ms compute
  EXPECT_EQ(job_predict(in, 4, 1).bound, "compute");
}

// Storage serves 200 samples/s to the server; its 2 ranks share it: 100 each, 40 ms for 4 samples.
TEST(JobWhatIf, TheServersStorageAndPageCacheAreSharedByItsRanks) {
  const JobInputs in = two_ranks(200, 1e9);
  const JobPrediction cold = job_predict(in, 1, 0);
  EXPECT_NEAR(cold.rate, 8 / 0.041, 1e-3);
  EXPECT_EQ(cold.bound, "fetch");
  // Half the dataset in the page cache: 20 ms of fetch, hidden behind rank 1's 30 ms of prep.
  EXPECT_EQ(job_predict(in, 1, 0.5).bound, "prep");
  EXPECT_NEAR(job_predict(in, 1, 0.5).rate, 8 / 0.031, 1e-3);
  // Twice the storage: as half cached.
  EXPECT_NEAR(job_predict(in, 1, 0, 2).rate, 8 / 0.031, 1e-3);
}

// A loader without workers fetches in its loop: the fetch beyond the page cache's adds to the step.
TEST(JobWhatIf, WithoutWorkersTheFetchAddsToTheMeasuredStep) {
  const JobInputs in = two_ranks(200, 1e9, 0);
  EXPECT_NEAR(job_predict(in, 1, 0).rate, 8 / (0.030 + 0.040 + 0.001), 1e-3);
}

TEST(JobWhatIf, TheRangeComesFromTheRunsNoise) {
  JobInputs in = two_ranks();
  in.warm[1].ranks[1].u = 0.1;
  const JobPrediction p = job_predict(in, 1, 1);
  EXPECT_NEAR(p.lo, 8 / (0.033 + 0.001), 1e-3);
  EXPECT_NEAR(p.hi, 8 / (0.027 + 0.001), 1e-3);
}

JobWhatIfRuns runs_with(double cold_measured, double cached_measured) {
  JobWhatIfRuns r;
  r.inputs = two_ranks(200, 1e9);
  JobRun cold = run("cold", {rank(0, 10, 31, 2), rank(1, 40, 1, 2)}, 1, false, 0);
  cold.measured = cold_measured;
  JobRun cached = run("cached", {rank(0, 10, 21, 2), rank(1, 30, 1, 2)}, 1, false, 1);
  cached.measured = cached_measured;
  r.held_out = {cold, cached};
  r.sweep = {r.inputs.warm.at(1)};
  r.skipped = {sweep_point_problem(2, 2, 2)};
  return r;
}

TEST(JobWhatIf, HeldOutRunsAreCheckedAsTheSingleProcessSelfCheckIs) {
  const auto j = job_whatif_json(runs_with(8 / 0.041 * 1.02, 8 / 0.031 * 0.99));
  ASSERT_EQ(j["held_out"].size(), 2u) << j.dump(1);
  EXPECT_EQ(j["held_out"][0]["run"], "cold");
  EXPECT_NEAR(j["held_out"][0]["error_pct"].get<double>(), 2.0, 1e-6);
  EXPECT_NEAR(j["held_out"][1]["error_pct"].get<double>(), -1.0, 1e-6);
  EXPECT_EQ(j["self_check_passed"], true);
  EXPECT_NEAR(j["max_error_pct"].get<double>(), 2.0, 1e-6);
  const auto off = job_whatif_json(runs_with(8 / 0.041 * 1.2, 8 / 0.031));
  EXPECT_EQ(off["self_check_passed"], false);
  EXPECT_EQ(off["held_out"][0]["within"], false);
}

// With two sweep points, each is predicted from the other (a CPU count the model did not use).
TEST(JobWhatIf, EachSweepPointIsHeldOutFromTheOthers) {
  JobWhatIfRuns r = runs_with(8 / 0.041, 8 / 0.031);
  JobRun two = run("cpus-2", {rank(0, 10, 6, 2), rank(1, 15, 1, 2)}, 2, true, 1);
  two.measured = 8 / 0.016;
  r.inputs.warm[2] = two;
  JobRun one = r.inputs.warm.at(1);
  one.measured = 8 / 0.031;
  r.inputs.warm[1] = one;
  const auto j = job_whatif_json(r);
  int sweep_checks = 0;
  for (const auto& h : j["held_out"]) {
    if (h["run"] == "cpus-2") {
      ++sweep_checks;
      EXPECT_NEAR(h["predicted"].get<double>(), 8 / 0.016, 1e-3) << h.dump();
    }
    if (h["run"] == "cpus-1") ++sweep_checks;
  }
  EXPECT_EQ(sweep_checks, 2) << j["held_out"].dump(1);
}

TEST(JobWhatIf, TheTableIsCpusPerRankByDramWithRanges) {
  const auto j = job_whatif_json(runs_with(8 / 0.041, 8 / 0.031));
  EXPECT_EQ(j["ranks_per_node"], 2);
  ASSERT_EQ(j["dram_gb"].size(), 5u);
  EXPECT_DOUBLE_EQ(j["dram_gb"][4].get<double>(), 10.0);
  ASSERT_GE(j["table"].size(), 3u);  // 1 (run), 2, 4
  EXPECT_EQ(j["table"][0]["cpus_per_rank"], 1.0);
  EXPECT_EQ(j["table"][0]["measured"], true);
  EXPECT_EQ(j["table"][1]["measured"], false);
  for (const auto& row : j["table"]) {
    ASSERT_EQ(row["cells"].size(), 5u);
    for (const auto& cell : row["cells"]) {
      EXPECT_LE(cell["lo"].get<double>(), cell["rate"].get<double>());
      EXPECT_GE(cell["hi"].get<double>(), cell["rate"].get<double>());
    }
  }
  EXPECT_EQ(j["skipped"].size(), 1u);
  const std::string text = job_whatif_text({{"job_whatif", j}});
  EXPECT_NE(text.find("job what-if: 2 ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("cpus-2: not run"), std::string::npos) << text;
  EXPECT_NE(text.find("job what-if held out: cold"), std::string::npos) << text;
  const std::string svg = job_whatif_svg("exec", j);
  EXPECT_NE(svg.find("data-cpus-per-rank=\"1\""), std::string::npos);
  EXPECT_NE(svg.find("class=\"measured\""), std::string::npos);
}

// The advice: num_workers per rank and srun's --cpus-per-task, DRAM for the server, storage.
TEST(JobWhatIf, TheAdviceIsPerRankInTheScriptsTerms) {
  const auto j = job_whatif_json(runs_with(8 / 0.041, 8 / 0.031));
  std::string all;
  for (const auto& a : j["advice"]) all += a.get<std::string>() + "\n";
  // 4 CPUs per rank reach the compute (the best), 2 do not (16 ms against 11).
  EXPECT_EQ(j["cpus_per_rank_recommended"], 4.0);
  EXPECT_NE(all.find("DataLoader(num_workers=4) in each rank; srun --cpus-per-task=4"), std::string::npos) << all;
  EXPECT_NE(all.find("DRAM: "), std::string::npos) << all;
  EXPECT_NE(all.find("faster storage: "), std::string::npos) << all;
  EXPECT_GT(j["dram_gb_recommended"].get<double>(), 0.0);
  EXPECT_TRUE(j["straggler_cpu_share"].is_null());
}

// A what-if that missed a run it did not use advises nothing it predicts: no CPUs per rank, DRAM or
// storage (the real 2-rank ImageNet job's self-check failed by 5.8% and it still advised 2 CPUs
// per rank); the notes that need no prediction stay.
TEST(JobWhatIf, AFailedSelfCheckWithholdsThePredictedAdvice) {
  const auto passed = job_whatif_json(runs_with(8 / 0.041, 8 / 0.031));
  ASSERT_EQ(passed["self_check_passed"], true) << passed.dump(1);
  EXPECT_EQ(passed["advice_withheld"], false);
  JobWhatIfRuns r = runs_with(8 / 0.041, 8 / 0.031);
  r.held_out[0].measured *= 0.7;
  const auto j = job_whatif_json(r);
  ASSERT_EQ(j["self_check_passed"], false) << j.dump(1);
  EXPECT_EQ(j["advice_withheld"], true);
  std::string all;
  for (const auto& a : j["advice"]) all += a.get<std::string>() + "\n";
  EXPECT_EQ(all.find("withheld: the job's what-if missed a run it did not use"), 0u) << all;
  EXPECT_EQ(all.find("srun --cpus-per-task"), std::string::npos) << all;
  EXPECT_EQ(all.find("DRAM: "), std::string::npos) << all;
  EXPECT_EQ(all.find("faster storage: "), std::string::npos) << all;
  EXPECT_FALSE(j["table"].empty());  // the table stays, beside its held-out errors
}

// Rank 1 has 1 CPU where rank 0 has 2, and is the slowest: its smaller share is named.
TEST(JobWhatIf, AStragglerWithASmallerShareOfTheCpusIsNamed) {
  const JobRun uneven = run("cold", {rank(0, 10, 16, 2, 0.01), rank(1, 25, 1, 1, 0.01)}, 1, false, 0);
  const std::string why = smaller_share_straggler(uneven);
  EXPECT_NE(why.find("rank 1 is the straggler because its share of the CPUs is smaller: 1 CPU against 2 CPUs"),
            std::string::npos)
      << why;
  // The same ranks with equal shares, or the one with fewer CPUs not the slowest: nothing to say.
  EXPECT_EQ(smaller_share_straggler(run("cold", {rank(0, 10, 16, 2), rank(1, 25, 1, 2)}, 1, false, 0)), "");
  EXPECT_EQ(smaller_share_straggler(run("cold", {rank(0, 25, 1, 2), rank(1, 10, 16, 1)}, 1, false, 0)), "");
  // Within its noise: not claimed.
  EXPECT_EQ(smaller_share_straggler(run("cold", {rank(0, 24, 2, 2, 0.1), rank(1, 25, 1, 1, 0.1)}, 1, false, 0)), "");
  JobWhatIfRuns r = runs_with(8 / 0.041, 8 / 0.031);
  r.held_out[0] = uneven;
  r.held_out[0].measured = 8 / 0.026;
  const auto j = job_whatif_json(r);
  ASSERT_TRUE(j["straggler_cpu_share"].is_string()) << j.dump(1);
  bool advised = false;
  for (const auto& a : j["advice"]) advised = advised || a.get<std::string>().find("rank 1 is the straggler") == 0;
  EXPECT_TRUE(advised) << j["advice"].dump(1);
}

nlohmann::json rank_report(int r, const std::string& host, const std::vector<int>& cpus, double wait, double compute,
                           double sync) {
  nlohmann::json rep = {
      {"batch_size", 4},
      {"workers", 1},
      {"train_item", {{"avg", 4 / (wait + compute + sync)}}},
      {"rank",
       {{"rank", r}, {"local_rank", nullptr}, {"world_size", 2}, {"from", "torch.distributed"}, {"host", host}}},
      {"stall",
       {{"wait", {{"avg", wait}, {"sd", 0}, {"count", 10}}},
        {"compute", {{"avg", compute}, {"sd", 0}, {"count", 10}}},
        {"sync", {{"avg", sync}, {"sd", 0}, {"count", 10}}}}}};
  if (!cpus.empty()) rep["cpu_split"] = {{"cpus_per_rank", cpus.size()}, {"cpus", cpus}};
  return rep;
}

RunOutcome job_run(double wait1, const std::vector<int>& cpus0 = {}, const std::vector<int>& cpus1 = {}) {
  RunOutcome out;
  for (int r = 0; r < 2; ++r) {
    RunOutcome one;
    one.report = rank_report(r, "h", r == 0 ? cpus0 : cpus1, r == 0 ? 0.001 : wait1, 0.01, r == 0 ? wait1 : 0.001);
    one.rate = one.report["train_item"]["avg"].get<double>();
    out.ranks.push_back(one);
  }
  out.rate = std::min(out.ranks[0].rate, out.ranks[1].rate);
  return out;
}

// Two ranks on two Slurm nodes of one host (the private test cluster): one rank per node, not a
// server of two (job_whatif grouped ranks by host, and took such a job for one 2-rank server).
TEST(JobWhatIf, RanksAreCountedPerNodeNotPerHost) {
  RunOutcome run = job_run(0.02);
  EXPECT_EQ(ranks_per_node(run), 2);  // one host "h", no node: one server
  run.ranks[0].report["rank"]["node"] = "mlb1n1";
  run.ranks[1].report["rank"]["node"] = "mlb1n2";
  EXPECT_EQ(ranks_per_node(run), 1);
  run.ranks[1].report["rank"]["node"] = "mlb1n1";
  EXPECT_EQ(ranks_per_node(run), 2);
}

// --rounds: a sweep run whose rounds drifted more than its observations' noise widens the range
// the what-if states (its ranks' u), as the single-process what-if's rates are widened.
TEST(JobWhatIf, TheRoundsDriftWidensTheStatedRange) {
  std::map<std::string, RunOutcome> runs;
  runs["synthetic"] = job_run(0.0);
  runs["cpus-1"] = job_run(0.02, {0}, {1});
  runs["fetch-cold"].rate = 1000;
  runs["fetch-cached"].rate = 1e6;
  AnalysisContext ctx;
  ctx.exec = true;
  ctx.cores_now = 2;
  ctx.config.cpus = {1};
  const auto one = job_whatif_runs(ctx, runs);
  ASSERT_TRUE(one.has_value());
  const JobPrediction narrow = job_predict(one->inputs, 1, 1);
  ctx.round_rates["cpus-1"] = {320, 391, 352};
  const auto drifted = job_whatif_runs(ctx, runs);
  ASSERT_TRUE(drifted.has_value());
  EXPECT_NEAR(drifted->inputs.warm.at(1).u(), rounds_uncertainty({320, 391, 352}), 1e-12);
  const JobPrediction wide = job_predict(drifted->inputs, 1, 1);
  EXPECT_NEAR(wide.rate, narrow.rate, 1e-9);
  EXPECT_LT(wide.lo, narrow.lo * 0.97);
  EXPECT_GT(wide.hi, narrow.hi * 1.03);
}

TEST(JobWhatIf, FromTheRunsEachRanksCpuSetAndTheSkippedPoints) {
  std::map<std::string, RunOutcome> runs;
  runs["synthetic"] = job_run(0.0);
  runs["cached"] = job_run(0.02);
  runs["cold"] = job_run(0.025);
  runs["cpus-1"] = job_run(0.02, {0}, {1});
  runs["fetch-cold"].rate = 1000;
  runs["fetch-cached"].rate = 1e6;
  EXPECT_EQ(ranks_per_node(runs["cold"]), 2);
  AnalysisContext ctx;
  ctx.exec = true;
  ctx.cores_now = 2;
  ctx.config.cpus = {1, 2};
  ctx.items = 100;
  ctx.dataset_bytes = 1e8;
  const auto r = job_whatif_runs(ctx, runs);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->inputs.ranks, 2);
  ASSERT_EQ(r->sweep.size(), 1u);
  EXPECT_EQ(r->sweep[0].ranks[1].cpu_set, std::vector<int>{1});
  ASSERT_EQ(r->held_out.size(), 2u);  // cold, cached: the sweep gives the warm step
  EXPECT_EQ(r->held_out[0].label, "cold");
  EXPECT_EQ(r->skipped.size(), 1u);
  nlohmann::json result;
  add_job_whatif(ctx, runs, result);
  ASSERT_TRUE(result.contains("job_whatif"));
  // A benchmark's own ranks (--bench scaling --ranks K) split their CPUs themselves: none.
  AnalysisContext bench = ctx;
  bench.exec = false;
  nlohmann::json bench_result;
  add_job_whatif(bench, runs, bench_result);
  EXPECT_FALSE(bench_result.contains("job_whatif"));
  EXPECT_EQ(result["job_whatif"]["sweep"][0]["ranks"][0]["cpus"], nlohmann::json::array({0}));
  // One process: no job what-if.
  std::map<std::string, RunOutcome> single{{"synthetic", RunOutcome{}}};
  EXPECT_FALSE(job_whatif_runs(ctx, single).has_value());
}

}  // namespace
}  // namespace mlbench::stall
