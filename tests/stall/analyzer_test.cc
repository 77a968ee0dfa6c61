#include "stall/analyzer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "stall/charts.h"
#include "stall/exec_target.h"
#include "stall/executor.h"

namespace mlbench::stall {
namespace {

RunOutcome outcome(double rate, double stall_pct = 0) {
  RunOutcome r;
  r.rate = rate;
  r.cv = 0.01;
  r.report = {{"stall", {{"stall_pct", stall_pct}}}, {"pipeline", {{"source", "test"}}}};
  return r;
}

AnalysisContext context() {
  AnalysisContext ctx;
  ctx.config.bench = "sim";
  ctx.config.data = "/d";
  ctx.items = 100;
  ctx.batch_size = 10;
  ctx.cores_now = 2;
  return ctx;
}

// G 400/s, P 200/s, cold 100/s; storage 100/s, memory 1000/s; the sweep's 2-CPU run at `cpus2`.
std::map<std::string, RunOutcome> fetch_bound_runs(double cpus2) {
  return {{"synthetic", outcome(400)},  {"cached", outcome(200, 50)},    {"cold", outcome(100, 74)},
          {"fetch-cold", outcome(100)}, {"fetch-cached", outcome(1000)}, {"cpus-1", outcome(100)},
          {"cpus-2", outcome(cpus2)},   {"cache-0.50", outcome(180)}};
}

TEST(Analyzer, FetchBoundCase) {
  const auto r = analyze(context(), fetch_bound_runs(200), RawRates{});
  EXPECT_DOUBLE_EQ(r["split"]["compute_pct"].get<double>(), 25.0);
  EXPECT_DOUBLE_EQ(r["split"]["prep_pct"].get<double>(), 25.0);
  EXPECT_DOUBLE_EQ(r["split"]["fetch_pct"].get<double>(), 50.0);
  EXPECT_EQ(r["rates"]["S"], 100.0);
  EXPECT_EQ(r["rates"]["C"], 1000.0);
  // The knee, the smallest x with F(x) >= min(P, G) = 200: x = (1/100 - 1/200) / (1/100 - 1/1000) = 5/9.
  // The recommendation, where the speed reaches 95% of it (F(x) = 190): (1/100 - 1/190) / (1/100 - 1/1000).
  EXPECT_NEAR(r["recommendation"]["knee_fraction"].get<double>(), 5.0 / 9.0, 1e-9);
  EXPECT_NEAR(r["recommendation"]["cache_fraction"].get<double>(), (0.01 - 1 / 190.0) / 0.009, 1e-6);
  EXPECT_NEAR(r["recommendation"]["predicted"].get<double>(), 190.0, 1e-3);
  // Its range over the rates' 1% noise: S and C 1% either way move F(x) by about 1%.
  EXPECT_LT(r["recommendation"]["predicted_range"][0].get<double>(), 190.0);
  EXPECT_GT(r["recommendation"]["predicted_range"][1].get<double>(), 190.0);
  EXPECT_NEAR(r["recommendation"]["predicted_range"][0].get<double>(), 190.0 * 0.99, 1.0);
  EXPECT_EQ(r["recommendation"]["cores"], 2);
  EXPECT_TRUE(r["findings"]["fetch"]["claimed"].get<bool>());
  EXPECT_TRUE(r["findings"]["prep"]["claimed"].get<bool>());
  EXPECT_EQ(r["recommendation"]["bound"], "fetch-bound");
  // The measured point against min(F(0.5), P, G) = 181.8.
  ASSERT_EQ(r["whatif"]["measured"].size(), 1u);
  EXPECT_NEAR(r["whatif"]["measured"][0]["predicted"].get<double>(), 181.818, 1e-3);
  EXPECT_NEAR(r["whatif"]["measured"][0]["error_pct"].get<double>(), 100 * (181.818181818 - 180) / 180, 1e-6);
  EXPECT_NEAR(r["direct"]["disagreement_pp"].get<double>(), 1.0, 1e-9);  // 74 direct vs 75 differential
  EXPECT_EQ(r["prep_by_cores"]["2"], 200.0);
  EXPECT_EQ(r["whatif"]["curve"].size(), 21u);
  const std::string text = console_summary(r);
  EXPECT_NE(text.find("fetch-bound"), std::string::npos);
  EXPECT_NE(text.find("recommended cache: 53% of the dataset"), std::string::npos) << text;
  EXPECT_NE(text.find("95% of the plateau: 190.0/s predicted ["), std::string::npos) << text;
  EXPECT_NE(text.find("the knee at 56%"), std::string::npos) << text;
  // The remedies, ranked: the cache takes the cold 100/s to 95% of min(P, G) = 200/s.
  // Coordinated prep for 2 jobs on the 2 CPUs: the step's host CPU h = 2 CPUs / G = 5 ms
  // per sample, prep p = 1/P(1 CPU) - h = 5 ms: uncoordinated 2 / (2 (p + h)) = 100/s per
  // job, coordinated 2 / (p + 2 h) = 133.3/s. No device: twice the CPUs is not predicted.
  const auto& rem = r["recommendation"]["remedies"];
  ASSERT_EQ(rem.size(), 2u) << rem;
  EXPECT_EQ(rem[0]["name"], "item cache");
  EXPECT_NEAR(rem[0]["gain"].get<double>(), 1.9, 1e-6);
  EXPECT_EQ(rem[0]["stall"], "fetch");
  EXPECT_LT(rem[0]["gain_range"][0].get<double>(), 1.9);
  EXPECT_EQ(rem[1]["name"], "coordinated prep");
  EXPECT_NEAR(rem[1]["from"].get<double>(), 100.0, 1e-9);
  EXPECT_NEAR(rem[1]["to"].get<double>(), 400.0 / 3, 1e-9);
  EXPECT_EQ(r["recommendation"]["remedy"], rem[0]);
  EXPECT_NE(text.find("remedy: item cache helps most: x1.90 ("), std::string::npos) << text;
}

// An analysis behind a disk throttled to 70 MB/s named "coordinated prep helps most: x1.03" with gain_range
// [1.028, 1.028]: the coordinated remedy carried no range at all. It now has one from the runs its
// model takes (cpus-1 and G here, each ±1%), and where every run was measured once (no noise known)
// no remedy has a range, and none is named.
TEST(Analyzer, CoordinatedPrepCarriesARangeFromItsRunsAndIsNotNamedWithoutOne) {
  const auto r = analyze(context(), fetch_bound_runs(200), RawRates{});
  const auto& rem = r["recommendation"]["remedies"];
  ASSERT_EQ(rem.size(), 2u) << rem;
  ASSERT_EQ(rem[1]["name"], "coordinated prep");
  // p = 1/P(1) - h, h = 2 CPUs / G: the gain 2 (p + h) / (p + 2h) moves with both.
  EXPECT_LT(rem[1]["gain_range"][0].get<double>(), 4.0 / 3 - 1e-3) << rem[1];
  EXPECT_GT(rem[1]["gain_range"][1].get<double>(), 4.0 / 3 + 1e-3) << rem[1];
  EXPECT_EQ(rem[1]["range_from"], "cpus-1, G at ±1 standard error");
  EXPECT_EQ(rem[1]["basis"], "own model");
  EXPECT_EQ(rem[0]["basis"], "cache what-if");
  EXPECT_FALSE(rem[0]["range_from"].is_null());

  auto once = fetch_bound_runs(200);
  for (auto& [label, run] : once) run.cv = 0;
  const auto o = analyze(context(), once, RawRates{});
  const auto& rec = o["recommendation"];
  EXPECT_TRUE(rec["remedy"].is_null()) << rec.dump(1);
  for (const auto& m : rec["remedies"]) EXPECT_TRUE(m["range_from"].is_null()) << m;
  const auto& not_named = rec["not_named"];
  ASSERT_EQ(not_named.size(), 2u) << not_named;
  EXPECT_EQ(not_named[0], "item cache x1.90: measured once: no range");
  EXPECT_EQ(not_named[1], "coordinated prep x1.33: measured once: no range");
  EXPECT_NE(console_summary(o).find("remedy: none named (item cache x1.90: measured once: no range; "),
            std::string::npos)
      << console_summary(o);
}

// The coordinated what-if's p from the cached run's prep stages (fetch, decode, augment, collate),
// where they took less than 1/P(1) less the step's CPU: the fetch-bound case above has p 5 ms and
// h 5 ms by the difference; stages of 0.2 + 1.5 + 0.2 + 0.1 = 2 ms make p 2 ms and h 8 ms, so 2
// coordinated jobs get 2 / (2 + 2 x 8) ms = 111.1/s, not 133.3.
TEST(Analyzer, CoordinatedPrepIsWhatThePrepStagesTook) {
  auto runs = fetch_bound_runs(200);
  const auto stage = [](double ms) { return nlohmann::json{{"per_item_ms", ms}, {"items", 100}, {"busy_s", ms / 10}}; };
  runs["cached"].report["pipeline"]["stages"] = {
      {"fetch", stage(0.2)}, {"decode", stage(1.5)}, {"augment", stage(0.2)}, {"collate", stage(0.1)}};
  const auto r = analyze(context(), runs, RawRates{});
  const auto& c = r["whatif"]["coordinated"];
  EXPECT_EQ(c["prep_cpu_from"], "stages") << c.dump();
  EXPECT_NEAR(c["prep_cpu_us"].get<double>(), 2000.0, 1e-6);
  EXPECT_NEAR(c["host_compute_cpu_us"].get<double>(), 8000.0, 1e-6);
  EXPECT_NEAR(c["predictions"][0]["coordinated"].get<double>(), 2 / (2e-3 + 2 * 8e-3), 1e-6);
  EXPECT_NEAR(c["predictions"][0]["uncoordinated"].get<double>(), 100.0, 1e-6);
  EXPECT_NE(console_summary(r).find("  a sample's prep CPU (p, shared by a group): 2000 us, what the cached run's prep "
                                    "stages took (fetch, decode, augment, collate); the step's (every job): 8000 us"),
            std::string::npos)
      << console_summary(r);
  // Without stage timers, as before.
  const auto before = analyze(context(), fetch_bound_runs(200), RawRates{});
  const auto& plain = before["whatif"]["coordinated"];
  EXPECT_EQ(plain["prep_cpu_from"], "cpus-1");
  EXPECT_NEAR(plain["predictions"][0]["coordinated"].get<double>(), 400.0 / 3, 1e-6);
  EXPECT_NE(console_summary(before).find("5000 us, a sample's CPU on one CPU (cpus-1) less the step's; the step's "
                                         "(every job): 5000 us"),
            std::string::npos)
      << console_summary(before);
}

// On a GPU one job's G is no bound for K jobs sharing it: a job that launches small kernels leaves
// the GPU mostly idle, and K such jobs each get far more than G / K (docs/stall.md, "Coordinated
// prep"). The what-if reads what K synthetic jobs at once got each, where mlbench-stall measured it.
TEST(Analyzer, JobsSharingTheGpuGetWhatKSyntheticJobsAtOnceGot) {
  auto runs = fetch_bound_runs(200);
  for (auto& [label, run] : runs) run.report["device"] = "cuda:0";
  runs["synthetic"].report["machine"] = {{"gpus", {"NVIDIA H100 80GB HBM3"}}};
  runs["synthetic"].report["process_cpu"] = {{"per_item_us", 1000.0}, {"user_s", 1.0}, {"sys_s", 0.0}};
  runs["synthetic-x2"] = outcome(300);
  const auto r = analyze(context(), runs, RawRates{});
  const auto& c = r["whatif"]["coordinated"];
  EXPECT_EQ(c["devices"], 1) << c.dump();
  EXPECT_NEAR(c["host_compute_cpu_us"].get<double>(), 1000.0, 1e-9);
  const auto& two = c["predictions"][0];
  EXPECT_EQ(two["device_per_job_from"], "measured");
  EXPECT_DOUBLE_EQ(two["device_per_job"].get<double>(), 300.0);
  // 4 jobs: not measured here, G x 1 / 4.
  EXPECT_EQ(c["predictions"][1]["device_per_job_from"], "G x D / K");
  EXPECT_DOUBLE_EQ(c["predictions"][1]["device_per_job"].get<double>(), 100.0);
  const std::string text = console_summary(r);
  EXPECT_NE(text.find("the jobs share 1 device(s); a job's device ceiling (samples/s): 2 jobs 300.0 (measured); 4 "
                      "jobs 100.0 (G x D / K);"),
            std::string::npos)
      << text;
  // On a CPU the runs of K synthetic jobs are not read: compute shares the CPUs, in the budget.
  auto cpu = fetch_bound_runs(200);
  cpu["synthetic-x2"] = outcome(300);
  const auto on_cpu = analyze(context(), cpu, RawRates{});
  EXPECT_EQ(on_cpu["whatif"]["coordinated"]["devices"], 0);
  EXPECT_EQ(on_cpu["whatif"]["coordinated"]["predictions"][0]["device_per_job_from"], "G");
}

TEST(Analyzer, JobsComputingAtOnceOnTheCpusPayWhatKSyntheticJobsPaidBeyondOne) {
  auto runs = fetch_bound_runs(200);
  runs["synthetic"].report["process_cpu"] = {{"per_item_us", 2500.0}, {"user_s", 1.0}, {"sys_s", 0.0}};
  RunOutcome two = outcome(380);
  for (double us : {2800.0, 3000.0}) {
    RunOutcome node = outcome(380);
    node.report["process_cpu"] = {{"per_item_us", us}, {"user_s", 1.0}, {"sys_s", 0.0}};
    two.nodes.push_back(node);
  }
  runs["synthetic-x2"] = two;
  const auto r = analyze(context(), runs, RawRates{});
  const auto& c = r["whatif"]["coordinated"];
  ASSERT_EQ(c["predictions"][0]["jobs"], 2);
  // The mean of the two jobs (2.9 ms) less one alone (2.5 ms); 4 and 8 jobs take it too.
  EXPECT_NEAR(c["predictions"][0]["step_cpu_extra_us"].get<double>(), 400, 1e-9) << c.dump();
  EXPECT_EQ(c["predictions"][0]["step_cpu_extra_from"], "synthetic-x2");
  EXPECT_EQ(c["predictions"][2]["step_cpu_extra_from"], "synthetic-x2");
  // Against the same analysis without the run: slower, as every job pays the extra.
  auto without = runs;
  without.erase("synthetic-x2");
  const auto r0 = analyze(context(), without, RawRates{});
  EXPECT_LT(c["predictions"][0]["uncoordinated"].get<double>(),
            r0["whatif"]["coordinated"]["predictions"][0]["uncoordinated"].get<double>());
  EXPECT_TRUE(r0["whatif"]["coordinated"]["predictions"][0]["step_cpu_extra_from"].is_null());
  const std::string text = console_summary(r);
  EXPECT_NE(text.find("the step's CPU with K jobs computing at once, beyond one alone (us a sample): 2 jobs +400 "
                      "(synthetic-x2);"),
            std::string::npos)
      << text;
  EXPECT_EQ(console_summary(r0).find("computing at once"), std::string::npos);
}

// The cpus-2 run is the cached run's setting measured again, 5% slower by noise. The CPU advice
// once came from it and the DRAM advice from P: "more DRAM helps up to 56% cached, more CPUs help
// beyond the largest count measured" for a loader that 56% cached makes exactly prep-bound.
TEST(Analyzer, CpuAdviceAtThisMachinesCountUsesTheSameRateAsTheCacheAdvice) {
  const auto r = analyze(context(), fetch_bound_runs(190), RawRates{});
  EXPECT_NEAR(r["recommendation"]["knee_fraction"].get<double>(), 5.0 / 9.0, 1e-9);
  EXPECT_EQ(r["recommendation"]["cores"], 2);
  EXPECT_EQ(r["prep_by_cores"]["2"], 190.0);  // the report keeps what the sweep measured
  const std::string text = console_summary(r);
  EXPECT_NE(text.find("more CPUs do not help"), std::string::npos) << text;
  EXPECT_EQ(text.find("beyond the largest count"), std::string::npos) << text;
}

TEST(Analyzer, MedianRunOfTheRoundsKeepsThatRunsReport) {
  auto tagged = [](double rate, const char* path) {
    RunOutcome r = outcome(rate);
    r.report_path = path;
    return r;
  };
  const std::map<std::string, std::vector<RunOutcome>> rounds{
      {"cached", {tagged(300, "a"), tagged(100, "b"), tagged(200, "c")}},
      {"cold", {tagged(50, "d"), tagged(40, "e")}},
      {"synthetic", {tagged(7, "f")}}};
  EXPECT_EQ(median_run(rounds.at("cached")).rate, 200);
  EXPECT_EQ(median_run(rounds.at("cached")).report_path, "c");
  EXPECT_EQ(median_run(rounds.at("cold")).rate, 40);  // the lower middle of an even count
  EXPECT_EQ(median_run(rounds.at("synthetic")).report_path, "f");
  const auto j = rounds_json(rounds, 3);
  EXPECT_EQ(j["count"], 3);
  EXPECT_EQ(j["runs"]["cached"]["rates"], nlohmann::json({300.0, 100.0, 200.0}));  // in round order
  EXPECT_EQ(j["runs"]["cached"]["chosen"], 200.0);
  EXPECT_DOUBLE_EQ(j["runs"]["cached"]["spread_pct"].get<double>(), 100.0);
  EXPECT_EQ(j["runs"]["cached"]["report"], "c");
  EXPECT_THROW(median_run({}), std::invalid_argument);
}

TEST(Analyzer, APartitionedCacheIsPredictedWhenThePeerRateWasMeasured) {
  // The fetch-bound case above, with peers measured at 1,000 items/s (no CPU cost).
  auto runs = fetch_bound_runs(200);
  RawRates raw;
  raw.peer_rate = 1000;
  const auto r = analyze(context(), runs, raw);
  EXPECT_EQ(r["schema_version"], 14);
  const auto& pj = r["whatif"]["partitioned"];
  ASSERT_TRUE(pj.is_object()) << r["whatif"].dump();
  EXPECT_EQ(pj["memory_fraction"], "1/N");
  ASSERT_EQ(pj["predictions"].size(), 3u);
  // 2 nodes of 50%: own 1 / (0.5/1000 + 0.5 x 2/100) = 95.2/s (their misses share S = 100/s);
  // partitioned, half local and half from the peer, 1,000/s of fetch: prep-bound at P = 200/s.
  const auto& two = pj["predictions"][0];
  EXPECT_EQ(two["nodes"], 2);
  EXPECT_NEAR(two["own"].get<double>(), 1.0 / (0.5 / 1000 + 0.5 * 2 / 100), 1e-9);
  EXPECT_NEAR(two["partitioned"].get<double>(), 200.0, 1e-9);
  EXPECT_EQ(two["bound_partitioned"], "prep");
  // It ranks among the remedies: x2.10, above the item cache's x2.00.
  const auto& rem = r["recommendation"]["remedies"];
  ASSERT_EQ(rem.size(), 3u) << rem;
  EXPECT_EQ(rem[0]["name"], "partitioned cache");
  EXPECT_NEAR(rem[0]["gain"].get<double>(), 200.0 * (0.5 / 1000 + 0.5 * 2 / 100), 1e-9);
  EXPECT_NE(console_summary(r).find("partitioned cache (per node, samples/s, own -> partitioned): 2 nodes caching "
                                    "50% each 95.2 -> 200.0 (x2.10)"),
            std::string::npos)
      << console_summary(r);
  // Not measured: no prediction, and not a remedy.
  const auto plain = analyze(context(), runs, RawRates{});
  EXPECT_TRUE(plain["whatif"]["partitioned"].is_null());
  EXPECT_EQ(plain["recommendation"]["remedies"].size(), 2u);
}

// A run of nodes whose CPU per sample was `per_item_us` (one entry per node; pairs of runs
// list their nodes in turn).
RunOutcome nodes_run(double rate, const std::vector<double>& per_item_us) {
  std::vector<RunOutcome> each;
  for (double us : per_item_us) {
    RunOutcome n = outcome(rate);
    n.report["process_cpu"] = {{"per_item_us", us}, {"user_s", 1.0}, {"sys_s", 0.1}, {"wall_s", 1.0}};
    each.push_back(n);
  }
  return combine_nodes(std::move(each));
}

TEST(Analyzer, APeerFetchsCpuComesFromTheNodesRunsWhenTheyWereMade) {
  // The fetch-bound case above on 2 CPUs with P(1 CPU) = 100/s (10 ms of CPU a sample), peers at
  // 1,000 items/s and 1 ms of CPU an item back to back on loopback, one item a request. Batches
  // of one item: one request per item from a peer, as without read-ahead (batches: below).
  auto runs = fetch_bound_runs(200);
  RawRates raw;
  raw.peer_rate = 1000;
  raw.peer_cpu_s = 1e-3;
  auto ctx = context();
  ctx.batch_size = 1;
  ctx.config.nodes_share_cpus = true;
  const auto loopback = analyze(ctx, runs, raw)["whatif"]["partitioned"];
  EXPECT_EQ(loopback["peer_cpu"]["source"], "loopback");
  EXPECT_NEAR(loopback["peer_request_cpu_us"].get<double>(), 1000.0, 1e-9);
  EXPECT_EQ(loopback["peer_cpu"]["per"], "request");
  EXPECT_TRUE(loopback["peer_cpu"]["nodes_us"].is_null());
  RawRates skipped = raw;
  skipped.peer_runs_note = "no peer runs: too big";
  EXPECT_EQ(analyze(ctx, runs, skipped)["whatif"]["partitioned"]["peer_cpu"]["note"], "no peer runs: too big");
  // The peer runs: 2 nodes with the whole dataset 10,000 us a sample, with half of it and peers
  // 12,000: half of a node's samples come from the peer, so k = 2,000 / 0.5 = 4,000 us.
  runs["peer-local"] = nodes_run(90, {10000, 10000});
  runs["peer-2"] = nodes_run(70, {12000, 12000});
  const auto r = analyze(ctx, runs, raw);
  EXPECT_EQ(r["schema_version"], 14);
  const auto& pj = r["whatif"]["partitioned"];
  EXPECT_EQ(pj["peer_cpu"]["source"], "nodes");
  EXPECT_EQ(pj["peer_cpu"]["nodes"], 2);
  EXPECT_NEAR(pj["peer_cpu"]["nodes_us"].get<double>(), 4000.0, 1e-6);
  EXPECT_NEAR(pj["peer_request_cpu_us"].get<double>(), 4000.0, 1e-6);
  EXPECT_NEAR(pj["peer_cpu"]["local_cpu_per_item_us"].get<double>(), 10000.0, 1e-6);
  // 2 nodes sharing 2 CPUs, a CPU each: 1 / (10 ms + 0.5 x 4 ms) = 83.3/s, where the loopback
  // k gave 1 / (10 ms + 0.5 x 1 ms) = 95.2/s.
  const auto& two = pj["predictions"][0];
  EXPECT_NEAR(two["partitioned"].get<double>(), 1.0 / (10e-3 + 0.5 * 4e-3), 1e-6);
  EXPECT_NEAR(loopback["predictions"][0]["partitioned"].get<double>(), 1.0 / (10e-3 + 0.5 * 1e-3), 1e-6);
  EXPECT_EQ(r["runs"]["peer-2"]["nodes"].size(), 2u);
  EXPECT_NEAR(r["runs"]["peer-2"]["cpu_per_item_us"].get<double>(), 12000.0, 1e-6);
  EXPECT_EQ(pj["peer_cpu"]["pairs_us"].size(), 1u);
  EXPECT_FALSE(two.contains("partitioned_range")) << "a range from one pair";
  // Two pairs, k 2,000 and 6,000 us (mean 4,000): the prediction with each as its range.
  runs["peer-local"] = nodes_run(90, {10000, 10000, 10000, 10000});
  runs["peer-2"] = nodes_run(70, {11000, 11000, 13000, 13000});
  const auto pairs = analyze(ctx, runs, raw);
  const auto& pp = pairs["whatif"]["partitioned"];
  ASSERT_EQ(pp["peer_cpu"]["pairs_us"].size(), 2u);
  EXPECT_NEAR(pp["peer_cpu"]["pairs_us"][0].get<double>(), 2000.0, 1e-6);
  EXPECT_NEAR(pp["peer_cpu"]["pairs_us"][1].get<double>(), 6000.0, 1e-6);
  EXPECT_NEAR(pp["peer_request_cpu_us"].get<double>(), 4000.0, 1e-6);
  const auto& range = pp["predictions"][0]["partitioned_range"];
  ASSERT_TRUE(range.is_array()) << pp.dump();
  EXPECT_NEAR(range[0].get<double>(), 1.0 / (10e-3 + 0.5 * 6e-3), 1e-6);
  EXPECT_NEAR(range[1].get<double>(), 1.0 / (10e-3 + 0.5 * 2e-3), 1e-6);
  EXPECT_NE(console_summary(pairs).find("2 nodes caching 50% each 95.2 -> 83.3 [77-91]"), std::string::npos)
      << console_summary(pairs);
  EXPECT_NE(console_summary(pairs).find("(pairs of runs: 2000, 6000 us;"), std::string::npos) << console_summary(pairs);
  EXPECT_EQ(pp["predictions"][0]["partitioned_pairs"].size(), 2u);
  // The host slower in the second pair: its nodes paid 11 ms a sample without peers (the first 9
  // ms), 14 with (the first 10): p 10 ms and k 4 ms as before, but the pairs alone predict
  // 1 / (9 ms + 0.5 x 2 ms) = 100/s and 1 / (11 ms + 0.5 x 6 ms) = 71.4/s, and that is the range.
  runs["peer-local"] = nodes_run(90, {9000, 9000, 11000, 11000});
  runs["peer-2"] = nodes_run(70, {10000, 10000, 14000, 14000});
  const auto drift = analyze(ctx, runs, raw);
  const auto& dp = drift["whatif"]["partitioned"];
  EXPECT_NEAR(dp["prep_cpu_us"].get<double>(), 10000.0, 1e-6);
  EXPECT_NEAR(dp["peer_request_cpu_us"].get<double>(), 4000.0, 1e-6);
  ASSERT_EQ(dp["peer_cpu"]["pairs_local_cpu_per_item_us"].size(), 2u);
  EXPECT_NEAR(dp["peer_cpu"]["pairs_local_cpu_per_item_us"][1].get<double>(), 11000.0, 1e-6);
  const auto& d2 = dp["predictions"][0];
  EXPECT_NEAR(d2["partitioned"].get<double>(), 1.0 / (10e-3 + 0.5 * 4e-3), 1e-6);
  ASSERT_EQ(d2["partitioned_pairs"].size(), 2u);
  EXPECT_NEAR(d2["partitioned_pairs"][0].get<double>(), 1.0 / (9e-3 + 0.5 * 2e-3), 1e-6);
  EXPECT_NEAR(d2["partitioned_pairs"][1].get<double>(), 1.0 / (11e-3 + 0.5 * 6e-3), 1e-6);
  EXPECT_NEAR(d2["partitioned_range"][0].get<double>(), 1.0 / (11e-3 + 0.5 * 6e-3), 1e-6);
  EXPECT_NEAR(d2["partitioned_range"][1].get<double>(), 1.0 / (9e-3 + 0.5 * 2e-3), 1e-6);
  EXPECT_NE(console_summary(drift).find("2 nodes caching 50% each 95.2 -> 83.3 [71-100]"), std::string::npos)
      << console_summary(drift);
  EXPECT_NE(console_summary(drift).find("a sample's CPU (p): 10000.0 us, from the peer-local nodes (pairs of runs: "
                                        "9000, 11000 us)"),
            std::string::npos)
      << console_summary(drift);
  // Peer runs that measured less CPU with peers than without: noise; the loopback k, with a note.
  runs["peer-local"] = nodes_run(90, {10000, 10000});
  runs["peer-2"] = nodes_run(95, {9900, 9900});
  const auto noisy = analyze(ctx, runs, raw)["whatif"]["partitioned"];
  EXPECT_EQ(noisy["peer_cpu"]["source"], "loopback");
  EXPECT_NEAR(noisy["peer_request_cpu_us"].get<double>(), 1000.0, 1e-9);
  EXPECT_NEAR(noisy["peer_cpu"]["nodes_us"].get<double>(), -200.0, 1e-6);
  EXPECT_NE(noisy["peer_cpu"]["note"].get<std::string>().find("within their noise"), std::string::npos);
  // p too comes from the nodes where they ran: the one-CPU run said 10 ms a sample, the
  // peer-local nodes pay 8 ms (k = 2,000 / 0.5 = 4,000 us): 1 / (8 ms + 0.5 x 4 ms) = 100/s.
  EXPECT_EQ(loopback["prep_cpu_from"], "cpus-1");
  EXPECT_NEAR(loopback["prep_cpu_us"].get<double>(), 10000.0, 1e-6);
  runs["peer-local"] = nodes_run(120, {8000, 8000});
  runs["peer-2"] = nodes_run(100, {10000, 10000});
  const auto faster = analyze(ctx, runs, raw)["whatif"]["partitioned"];
  EXPECT_EQ(faster["prep_cpu_from"], "peer-local");
  EXPECT_NEAR(faster["prep_cpu_us"].get<double>(), 8000.0, 1e-6);
  EXPECT_NEAR(faster["predictions"][0]["partitioned"].get<double>(), 1.0 / (8e-3 + 0.5 * 4e-3), 1e-6);
  EXPECT_EQ(faster["P_from"], "cached");  // the nodes' 120/s is below P
  EXPECT_EQ(loopback["P_from"], "cached");
  // A `cached` run slower than the peer-local nodes: P, a node's ceiling, is at least their speed.
  // P = 90/s here, the nodes 120/s, each costing 8 ms + 0.5 x 4 ms: 100/s, not 90.
  auto slow = runs;
  slow["cached"] = outcome(90);
  const auto lifted = analyze(ctx, slow, raw)["whatif"]["partitioned"];
  EXPECT_EQ(lifted["P_from"], "peer-local");
  EXPECT_NEAR(lifted["P"].get<double>(), 120.0, 1e-6);
  EXPECT_NEAR(lifted["predictions"][0]["partitioned"].get<double>(), 1.0 / (8e-3 + 0.5 * 4e-3), 1e-6);
}

// nodes_run, each node's report also counting its requests to peers and the items it took from
// them over `images` samples (pipeline.partitioned_cache.peer, pipeline.epochs).
RunOutcome nodes_run_with_traffic(double rate, const std::vector<double>& per_item_us, double requests,
                                  double peer_items, double images) {
  std::vector<RunOutcome> each;
  for (double us : per_item_us) {
    RunOutcome n = outcome(rate);
    n.report["process_cpu"] = {{"per_item_us", us}, {"user_s", 1.0}, {"sys_s", 0.1}, {"wall_s", 1.0}};
    n.report["pipeline"] = {
        {"partitioned_cache",
         {{"max_ids_per_request", 256}, {"peer", {{"requests", requests}, {"cache_items", peer_items}}}}},
        {"epochs", nlohmann::json::array({{{"epoch", 0}, {"images", images}}})}};
    each.push_back(n);
  }
  return combine_nodes(std::move(each));
}

TEST(Analyzer, APeerFetchsCpuIsPaidPerRequestAndNodesAskEachPeerOnceABatch) {
  // Measured on 2 vCPUs (docs/performance.md, "Partitioned cache"): 4 nodes paid 1.8-5.8 times (2.9 pooled) the peer
  // CPU a sample of 2 nodes, where a cost per item predicted 1.5 times: with read-ahead a node asks
  // each peer once a batch, so 4 nodes make 3 requests a batch where 2 make 1.
  // Batches of 10; 2 nodes at once: 1,000 samples each, 500 from the peer in 100 requests (one a
  // batch), 10,000 us a sample alone and 10,400 with peers: 400 us over 0.1 requests a sample.
  auto runs = fetch_bound_runs(200);
  RawRates raw;
  raw.peer_rate = 1e6;  // the network out of the way: prep-bound
  raw.peer_cpu_s = 1e-4;
  auto ctx = context();
  ctx.config.nodes_share_cpus = true;
  runs["peer-local"] = nodes_run(90, {10000, 10000});
  runs["peer-2"] = nodes_run_with_traffic(90, {10400, 10400}, 100, 500, 1000);
  const auto r = analyze(ctx, runs, raw);
  const auto& pj = r["whatif"]["partitioned"];
  EXPECT_EQ(pj["peer_cpu"]["per"], "request");
  EXPECT_NEAR(pj["peer_cpu"]["requests_per_sample"].get<double>(), 0.1, 1e-12);
  EXPECT_NEAR(pj["peer_request_cpu_us"].get<double>(), 4000.0, 1e-6);
  EXPECT_DOUBLE_EQ(pj["batch_items"].get<double>(), 10.0);
  EXPECT_EQ(pj["max_ids_per_request"], 256);
  // 2 nodes on the 2 CPUs: 1 / (10 ms + (1 - 0.5^10) / 10 x 4 ms). 4 nodes, half a CPU each, asking 3 peers a
  // batch (each has items in a batch of 10 but for (3/4)^10 = 5.6% of batches):
  // 0.5 / (10 ms + 3 (1 - 0.75^10) / 10 x 4 ms); by items it would be 0.5 / (10 ms + 0.75 x 0.8 ms).
  const auto& two = pj["predictions"][0];
  const auto& four = pj["predictions"][1];
  ASSERT_EQ(four["nodes"], 4);
  EXPECT_NEAR(two["partitioned"].get<double>(), 1.0 / (10e-3 + (1 - std::pow(0.5, 10)) / 10 * 4e-3), 1e-6);
  const double four_requests = 3 * (1 - std::pow(0.75, 10)) / 10;
  EXPECT_NEAR(four["peer_requests_per_sample"].get<double>(), four_requests, 1e-12);
  EXPECT_NEAR(four["partitioned"].get<double>(), 0.5 / (10e-3 + four_requests * 4e-3), 1e-6);
  EXPECT_LT(four["partitioned"].get<double>(), 0.5 / (10e-3 + 0.75 * 0.8e-3) - 1);
  EXPECT_NE(console_summary(r).find("a peer request's CPU (k): 4000.0 us, from 2 nodes"), std::string::npos)
      << console_summary(r);
  EXPECT_NE(console_summary(r).find("a node asks each peer once per batch of 10"), std::string::npos)
      << console_summary(r);
  // Nodes that asked once per item (no read-ahead, or --peer-batch 1): 500 requests for 500 items,
  // 0.5 a sample, k = 400 / 0.5 = 800 us, and the model counts (N-1)/N requests a sample.
  runs["peer-2"] = nodes_run_with_traffic(90, {10400, 10400}, 500, 500, 1000);
  const auto per_item = analyze(ctx, runs, raw)["whatif"]["partitioned"];
  EXPECT_DOUBLE_EQ(per_item["batch_items"].get<double>(), 1.0);
  EXPECT_NEAR(per_item["peer_request_cpu_us"].get<double>(), 800.0, 1e-6);
  EXPECT_NEAR(per_item["predictions"][1]["peer_requests_per_sample"].get<double>(), 0.75, 1e-12);
  EXPECT_NEAR(per_item["predictions"][1]["partitioned"].get<double>(), 0.5 / (10e-3 + 0.75 * 0.8e-3), 1e-6);
  // The loopback measurement carried 16 items a request: 100 us an item is 1,600 us a request.
  raw.peer_ids_per_request = 16;
  runs.erase("peer-local");
  runs.erase("peer-2");
  const auto loopback = analyze(ctx, runs, raw);
  EXPECT_NEAR(loopback["whatif"]["partitioned"]["peer_request_cpu_us"].get<double>(), 1600.0, 1e-6);
  EXPECT_EQ(loopback["storage"]["peer_ids_per_request"], 16);
}

TEST(Analyzer, AFullRunFasterThanTheSyntheticOneLiftsG) {
  // stallsim's compute_fetch case (G 500, P 1000, F 250) where the synthetic run met a slow
  // moment of the host: 474/s, while the cached run, the sweep's and the 50% cache run fed the same
  // consumer at 500. With G = 474 the 50% point was predicted at 474 (5.2% low); a ceiling is
  // at least what a run reached.
  std::map<std::string, RunOutcome> runs{{"synthetic", outcome(474.1)},  {"cached", outcome(500.5)},
                                         {"cold", outcome(250.2, 50)},   {"fetch-cold", outcome(250.1)},
                                         {"fetch-cached", outcome(1e5)}, {"cpus-2", outcome(500.5)},
                                         {"cache-0.50", outcome(500.1)}};
  const auto r = analyze(context(), runs, RawRates{});
  EXPECT_NEAR(r["rates"]["G"].get<double>(), 500.5, 1e-9);
  EXPECT_NEAR(r["split"]["compute_pct"].get<double>(), 100 * 250.2 / 500.5, 1e-6);
  ASSERT_EQ(r["whatif"]["measured"].size(), 1u);
  EXPECT_LT(std::abs(r["whatif"]["measured"][0]["error_pct"].get<double>()), 1.0) << r["whatif"]["measured"].dump();
  bool warned = false;
  for (const auto& w : r["warnings"]) {
    warned |= w.get<std::string>().find("G is taken as 500.5") != std::string::npos;
  }
  EXPECT_TRUE(warned) << r["warnings"].dump();
  // A synthetic run at the consumer's speed stays G, with no warning.
  runs["synthetic"] = outcome(520);
  const auto steady = analyze(context(), runs, RawRates{});
  EXPECT_NEAR(steady["rates"]["G"].get<double>(), 520.0, 1e-9);
  for (const auto& w : steady["warnings"]) EXPECT_EQ(w.get<std::string>().find("G is taken"), std::string::npos);
}

TEST(Analyzer, ASweepRunWithMoreComputeCpusDoesNotLiftG) {
  // A convnet (ResNet-18, 32 px) analysed with --cpu-cores 1 on 2 CPUs: the synthetic
  // run 222.8/s, the sweep's cpus-2 run 264.7/s, with --cpu-cores 2, so its step computed on 2
  // CPUs: not the consumer the analysis measures. G was taken from it (19% high).
  const auto on_cpus = [](double rate, int cpu_cores) {
    RunOutcome o = outcome(rate);
    o.report["device"] = "cpu";
    o.report["cpu_cores"] = cpu_cores;
    return o;
  };
  std::map<std::string, RunOutcome> runs{{"synthetic", on_cpus(222.8, 1)}, {"cached", on_cpus(170.4, 1)},
                                         {"cold", on_cpus(168.9, 1)},      {"fetch-cold", outcome(1e4)},
                                         {"fetch-cached", outcome(1e5)},   {"cpus-1", on_cpus(184.7, 1)},
                                         {"cpus-2", on_cpus(264.7, 2)}};
  const auto r = analyze(context(), runs, RawRates{});
  EXPECT_NEAR(r["rates"]["G"].get<double>(), 222.8, 1e-9);
  for (const auto& w : r["warnings"]) EXPECT_EQ(w.get<std::string>().find("G is taken"), std::string::npos) << w;
  // The sweep's run at the analysed count is the same consumer: faster, it lifts G.
  runs["cpus-1"] = on_cpus(230.0, 1);
  EXPECT_NEAR(analyze(context(), runs, RawRates{})["rates"]["G"].get<double>(), 230.0, 1e-9);
  // On a device the sweep's CPUs do not compute: any of its runs is the same consumer.
  for (auto& [label, o] : runs) o.report["device"] = "cuda";
  EXPECT_NEAR(analyze(context(), runs, RawRates{})["rates"]["G"].get<double>(), 264.7, 1e-9);
}

TEST(Analyzer, MoreCpusIsARemedyOnlyWithComputeOnADeviceOfItsOwn) {
  // Prep-bound on a GPU: P 200/s, G 1000/s, storage fast. Twice the CPUs: 400/s.
  auto on_gpu = [](double rate) {
    RunOutcome o = outcome(rate);
    o.report["device"] = "cuda";
    return o;
  };
  std::map<std::string, RunOutcome> runs{
      {"synthetic", on_gpu(1000)},     {"cached", on_gpu(200)}, {"cold", on_gpu(198)},  {"fetch-cold", outcome(5000)},
      {"fetch-cached", outcome(9000)}, {"cpus-1", on_gpu(100)}, {"cpus-2", on_gpu(200)}};
  const auto r = analyze(context(), runs, RawRates{});
  const auto& rec = r["recommendation"];
  ASSERT_TRUE(rec["remedy"].is_object()) << rec;
  bool found = false;
  for (const auto& m : rec["remedies"]) {
    if (m["name"] != "more CPUs") continue;
    found = true;
    EXPECT_NEAR(m["to"].get<double>(), 400.0, 1e-6);
    EXPECT_NE(m["detail"].get<std::string>().find("4 CPUs instead of 2"), std::string::npos) << m;
  }
  EXPECT_TRUE(found) << rec;
}

// The same with the loader reading ahead (its report gives workers and io depth, so the read-ahead
// model): twice the workers on twice the CPUs. The remedy was dropped for every read-ahead loader
// when that model came in.
TEST(Analyzer, MoreCpusIsARemedyForAReadAheadLoaderOnADeviceToo) {
  auto on_gpu = [](double rate) {
    RunOutcome o = outcome(rate);
    o.report["device"] = "cuda";
    o.report["pipeline"] = {{"workers", 2}, {"io_depth", 4}};
    return o;
  };
  std::map<std::string, RunOutcome> runs{
      {"synthetic", on_gpu(1000)},    {"cached", on_gpu(200)}, {"cold", on_gpu(198)},  {"fetch-cold", on_gpu(5000)},
      {"fetch-cached", on_gpu(9000)}, {"cpus-1", on_gpu(100)}, {"cpus-2", on_gpu(200)}};
  const auto r = analyze(context(), runs, RawRates{});
  ASSERT_EQ(r["whatif"]["model"], "read-ahead");
  bool found = false;
  for (const auto& m : r["recommendation"]["remedies"]) {
    if (m["name"] != "more CPUs") continue;
    found = true;
    EXPECT_NEAR(m["to"].get<double>(), 400.0, 0.03 * 400) << m;
    EXPECT_EQ(m["stall"], "prep");
  }
  EXPECT_TRUE(found) << r["recommendation"].dump(1);
}

// A blkio-throttled disk (0.5 MB/s, 4 KB JPEGs, read-ahead on): the fetch-only
// run kept fewer reads in flight than the pipeline and measured storage at
// 118.4/s, but the cold run read every item from storage at 123.1/s. The
// overlap model takes the larger: with the fetch-only S the 75% point was
// predicted at 472/s against 501 measured (5.7% off), the self-check failed
// and the recommendation was withheld.
// When storage limits the cold run and the fetch-only run agrees with it
// within their noise, the two are pooled by their standard errors.
TEST(Analyzer, StorageRatesThatAgreeArePooledByTheirNoise) {
  auto with_noise = [](RunOutcome r, double cv, int n) {
    r.cv = cv;
    r.observations = n;
    return r;
  };
  // S 128 +- 10% (cv 31.6%, 10 observations), F_obs 123.1 +- 6% (cv 19%, 10).
  std::map<std::string, RunOutcome> runs{{"synthetic", outcome(5e6)},
                                         {"cached", outcome(53000)},
                                         {"cold", with_noise(outcome(123.1, 99), 0.06 * std::sqrt(10.0), 10)},
                                         {"fetch-cold", with_noise(outcome(128), 0.10 * std::sqrt(10.0), 10)},
                                         {"fetch-cached", outcome(116000)},
                                         {"cache-0.50", outcome(239.9)}};
  const auto r = analyze(context(), runs, RawRates{});
  const double var_s = std::pow(0.10 * 128, 2), var_f = std::pow(0.06 * 123.1, 2);
  EXPECT_NEAR(r["rates"]["S_model"].get<double>(), (128 / var_s + 123.1 / var_f) / (1 / var_s + 1 / var_f), 1e-6);
  EXPECT_LT(r["whatif"]["measured"][0]["error_pct"].get<double>(), 5.0) << r["whatif"].dump();
  EXPECT_NE(console_summary(r).find("pooled"), std::string::npos);
  // Storage that is not the limit (P below S) keeps the fetch-only S.
  runs["cached"] = outcome(100);
  EXPECT_EQ(analyze(context(), runs, RawRates{})["rates"]["S_model"], 128.0);
}

TEST(Analyzer, StorageRateIsAtLeastWhatTheColdRunRead) {
  std::map<std::string, RunOutcome> runs{
      {"synthetic", outcome(5.1e6)},  {"cached", outcome(48210)},        {"cold", outcome(123.1, 99)},
      {"fetch-cold", outcome(118.4)}, {"fetch-cached", outcome(124963)}, {"cpus-2", outcome(43707)},
      {"cache-0.25", outcome(164.5)}, {"cache-0.50", outcome(240.1)},    {"cache-0.75", outcome(500.9)}};
  const auto r = analyze(context(), runs, RawRates{});
  EXPECT_EQ(r["rates"]["S"], 118.4);
  EXPECT_EQ(r["rates"]["S_model"], 123.1);
  for (const auto& m : r["whatif"]["measured"]) EXPECT_LT(m["error_pct"].get<double>(), 5.0) << m.dump();
  EXPECT_NEAR(r["whatif"]["measured"][2]["predicted"].get<double>(), 1.0 / (0.75 / 124963 + 0.25 / 123.1), 1e-6);
  const std::string text = console_summary(r);
  EXPECT_NE(text.find("S  for the what-if"), std::string::npos) << text;
  EXPECT_EQ(text.find("self-check failed"), std::string::npos) << text;
}

// A measured curve (real photographs behind a 70 MB/s throttle, 2 workers): G far above,
// P 4328, S 1919, C 118,700; the cache runs' measured speeds. Storage limits
// the cold run (1905/s), which agrees with S within their noise: the what-if
// pools them, 1912/s (F(0.5) = 3763; with S alone it was 3777).
// S and the cold run pooled by their standard errors (1% each in outcome()).
double issue14_storage() {
  const double vs = std::pow(0.01 * 1919, 2), vf = std::pow(0.01 * 1905, 2);
  return (1919 / vs + 1905 / vf) / (1 / vs + 1 / vf);
}

std::map<std::string, RunOutcome> issue14_runs(double at_50, double at_75) {
  return {{"synthetic", outcome(1e6)},    {"cached", outcome(4328)},         {"cold", outcome(1905, 56)},
          {"fetch-cold", outcome(1919)},  {"fetch-cached", outcome(118700)}, {"cpus-1", outcome(2164)},
          {"cpus-2", outcome(4328)},      {"cache-0.00", outcome(1905)},     {"cache-0.25", outcome(2522)},
          {"cache-0.50", outcome(at_50)}, {"cache-0.75", outcome(at_75)},    {"cache-1.00", outcome(4104)}};
}

TEST(Analyzer, SelfCheckOffByEighteenPercentWithholdsTheRecommendation) {
  const auto r = analyze(context(), issue14_runs(3187, 3590), RawRates{});
  const auto& rec = r["recommendation"];
  const std::string verdict = rec["verdict"];
  EXPECT_EQ(verdict.find("more DRAM helps"), std::string::npos) << verdict;
  EXPECT_NE(verdict.find("self-check failed"), std::string::npos) << verdict;
  EXPECT_NE(verdict.find("50% cached: measured 3187/s, predicted 3763/s ["), std::string::npos) << verdict;
  EXPECT_NE(verdict.find("], 18.1% off"), std::string::npos) << verdict;
  EXPECT_TRUE(rec["cache_fraction"].is_null());
  EXPECT_TRUE(rec["cores"].is_null());
  EXPECT_EQ(rec["bound"], "fetch-bound");
  ASSERT_TRUE(r.contains("self_check"));
  EXPECT_EQ(r["whatif"].at("model"), "overlap");
  EXPECT_EQ(r["whatif"].at("cache"), "item cache");
  EXPECT_EQ(r["whatif"].at("model_formula"), "min(F(x), P, G): fetch overlaps prep and compute");
  const auto& c = r["self_check"];
  EXPECT_EQ(c["passed"], false);
  EXPECT_EQ(c["threshold_pct"], 5.0);
  EXPECT_NEAR(c["max_error_pct"].get<double>(), 100 * (4328.0 - 3590) / 3590, 0.05);
  ASSERT_EQ(c["points"].size(), 3u);
  EXPECT_EQ(c["points"][0]["off"], false);  // 25%: 0.9%
  EXPECT_EQ(c["points"][1]["off"], true);   // 50%: 18.1%
  EXPECT_EQ(c["points"][2]["off"], true);   // 75%: 20.6%
  EXPECT_NEAR(c["points"][1]["predicted"].get<double>(), 3763, 1);
  EXPECT_NEAR(r["rates"]["S_model"].get<double>(), issue14_storage(), 1e-9);
  EXPECT_TRUE(c["points"][1]["item_cache_fraction"].is_null());
  EXPECT_NE(c["cause"].get<std::string>().find("serial workers"), std::string::npos) << c["cause"];
  EXPECT_EQ(rec.at("withheld"), true);
  // The cache remedy comes from the curve that failed: not among the remedies. Coordinated prep,
  // its own model, stands on its own range, and both outputs say which is which.
  for (const auto& m : rec["remedies"]) {
    EXPECT_NE(m["name"], "item cache") << m;
    EXPECT_EQ(m["basis"], "own model") << m;
  }
  const std::string note = rec.at("withheld_note");
  EXPECT_NE(note.find("the self-check's failure withholds the remedies the cache what-if predicts (item cache, more "
                      "CPUs, partitioned cache)"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("they stand on their own ranges (coordinated prep)"), std::string::npos) << note;
  const std::string text = console_summary(r);
  EXPECT_NE(text.find("withheld: " + note + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("recommended cache: none (the what-if failed its self-check)"), std::string::npos) << text;
  EXPECT_NE(text.find("what-if model: overlap"), std::string::npos) << text;
}

TEST(Analyzer, SelfCheckWithinFivePercentKeepsTheRecommendation) {
  const auto r = analyze(context(), issue14_runs(3700, 4200), RawRates{});
  const auto& c = r["self_check"];
  EXPECT_EQ(c["passed"], true);
  EXPECT_TRUE(c["cause"].is_null());
  EXPECT_LT(c["max_error_pct"].get<double>(), 5.0);
  const auto& rec = r["recommendation"];
  EXPECT_EQ(rec["withheld"], false);
  // The knee, the smallest x with F(x) >= P = 4328, S 1912: (1/1912 - 1/4328) / (1/1912 - 1/118700) = 0.567;
  // the recommendation where F(x) reaches 95% of P: 0.544.
  const double S = issue14_storage();
  EXPECT_NEAR(rec["knee_fraction"].get<double>(), (1 / S - 1 / 4328.0) / (1 / S - 1 / 118700.0), 1e-9);
  EXPECT_NEAR(rec["cache_fraction"].get<double>(), (1 / S - 1 / (0.95 * 4328)) / (1 / S - 1 / 118700.0), 1e-6);
  EXPECT_EQ(rec["cores"], 2);
  const std::string verdict = rec["verdict"];
  EXPECT_NE(verdict.find("more DRAM helps up to 54% cached"), std::string::npos) << verdict;
  EXPECT_NE(verdict.find("self-check passed"), std::string::npos) << verdict;
  EXPECT_NE(console_summary(r).find("recommended cache: 54% of the dataset"), std::string::npos);
}

// The process CPU a run's report records: `per_item_us` of which `sys_us` in the kernel
// (user_s and sys_s as if over a million samples).
nlohmann::json process_cpu_of(double per_item_us, double sys_us) {
  return {{"per_item_us", per_item_us}, {"user_s", per_item_us - sys_us}, {"sys_s", sys_us}, {"busy_cpus", 2.0}};
}

// issue14_runs with the runs' process CPU (`process_cpu`): the cached run 400 us a sample
// (10 us of it system), the cold one 470 us (60 us system: a storage read's 50 us more in the
// kernel, and 20 us more user time of its own), the fetch-only run on warm files 20 us.
std::map<std::string, RunOutcome> with_process_cpu(std::map<std::string, RunOutcome> runs) {
  runs.at("cached").report["process_cpu"] = process_cpu_of(400, 10);
  runs.at("cold").report["process_cpu"] = process_cpu_of(470, 60);
  runs.at("fetch-cached").report["process_cpu"] = process_cpu_of(20, 15);
  return runs;
}

TEST(Analyzer, TheReadAheadModelChargesAReadsCpuToPrep) {
  auto runs = with_process_cpu(issue14_runs(3700, 4200));
  for (auto& [label, r] : runs) r.report["pipeline"] = {{"workers", 2}, {"io_depth", 4}};
  const auto r = analyze(context(), runs, RawRates{});
  const auto& w = r["whatif"];
  EXPECT_EQ(w["model"], "read-ahead");
  ASSERT_TRUE(w["read_cpu"].is_object()) << w.dump();
  EXPECT_NEAR(w["read_cpu"]["storage_extra_us"].get<double>(), 50.0, 1e-9);
  EXPECT_NEAR(w["read_cpu"]["page_read_us"].get<double>(), 20.0, 1e-9);
  EXPECT_EQ(w["read_cpu"]["cpus"], 2);  // the loader's 2 workers on the context's 2 CPUs
  ASSERT_TRUE(w["read_ahead"].is_object()) << w.dump();
  EXPECT_EQ(w["read_ahead"]["window"], 2);  // io depth 4 over 2 workers
  EXPECT_NEAR(w["read_ahead"]["miss_us"].get<double>(), 50.0, 1e-9);
  const double P = 4328;
  // The page cache's curve at x = 1 is the cached run, P, as calibrated; the item cache's is above
  // it (a hit saves a page-cache read's 20 us of CPU on prep-bound CPUs).
  const auto& page = w["page_cache"]["curve"];
  EXPECT_NEAR(page[20]["predicted"].get<double>(), P, 0.01 * P);
  EXPECT_GT(w["curve"][20]["predicted"].get<double>(), 1.02 * page[20]["predicted"].get<double>());
  // Each curve rises with x, and the recommendation is where it reaches 95% of its plateau, below
  // the knee (98%).
  const auto& rec = r["recommendation"];
  for (const auto& [key, knee, curve] : {std::tuple{"cache_fraction", rec["knee_fraction"], w["curve"]},
                                         {"page_cache_fraction", w["page_cache"]["knee_fraction"], page}}) {
    const double x = rec[key].get<double>();
    EXPECT_LT(x, knee.get<double>()) << key;
    const auto i = static_cast<std::size_t>(x * 20);  // the curve's points around x, 5% apart
    EXPECT_LT(curve[i]["predicted"].get<double>(), 0.95 * curve[20]["predicted"].get<double>() + 1) << key;
    EXPECT_GE(curve[i + 1]["predicted"].get<double>(), 0.95 * curve[20]["predicted"].get<double>() - 1) << key;
  }

  // The run with an empty item cache is another cold run: its system CPU per sample is pooled with the cold run's.
  runs.at("cache-0.00").report["process_cpu"] = process_cpu_of(520, 80);
  const auto pooled = analyze(context(), runs, RawRates{});
  EXPECT_NEAR(pooled["whatif"]["read_cpu"]["storage_extra_us"].get<double>(), 60.0, 1e-9);  // (60 + 80) / 2 - 10
  // Cold runs that spent less system time per sample than the cached one: noise, no negative cost.
  runs.at("cold").report["process_cpu"] = process_cpu_of(470, 8);
  runs.at("cache-0.00").report["process_cpu"] = process_cpu_of(470, 9);
  EXPECT_DOUBLE_EQ(analyze(context(), runs, RawRates{})["whatif"]["read_cpu"]["storage_extra_us"].get<double>(), 0.0);
  // With the whole dataset in the item cache measured, a hit's saving is the cached run's CPU per
  // sample minus that run's, all of it, negative when a hit costs more than a page-cache read.
  runs.at("cache-1.00").report["process_cpu"] = process_cpu_of(410, 1);
  EXPECT_NEAR(analyze(context(), runs, RawRates{})["whatif"]["read_cpu"]["page_read_us"].get<double>(), -10.0, 1e-9);
  // A report with per_item_us but no user / sys split gives no term.
  runs.at("cold").report["process_cpu"] = {{"per_item_us", 470.0}};
  EXPECT_TRUE(analyze(context(), runs, RawRates{})["whatif"]["read_cpu"].is_null());
}

TEST(Analyzer, NoReadCpuTermWithoutTheRunsProcessCpuOrInTheSerialModel) {
  const auto old = analyze(context(), issue14_runs(3700, 4200), RawRates{});  // reports before process_cpu
  EXPECT_TRUE(old["whatif"]["read_cpu"].is_null());
  EXPECT_EQ(old["recommendation"]["page_cache_fraction"], old["recommendation"]["cache_fraction"]);
  auto runs = with_process_cpu(issue14_runs(3700, 4200));
  for (auto& [label, r] : runs) r.report["pipeline"] = {{"workers", 2}, {"io_depth", 0}};
  const auto serial = analyze(context(), runs, RawRates{});
  EXPECT_EQ(serial["whatif"]["model"], "serial");
  EXPECT_TRUE(serial["whatif"]["read_cpu"].is_null());  // the serial model simulates its workers instead
}

TEST(Analyzer, SelfCheckReadsWhatTheRunsCachesHeld) {
  auto runs = issue14_runs(3187, 4200);
  // 100 items (context()); the hits include the filling epoch's misses, so they are not read.
  runs["cache-0.50"].report["pipeline"]["cache"] = {{"items", 30}, {"hits", 90}, {"misses", 310}};
  runs["cache-0.50"].after = Residency{1000, 50};
  runs["cache-0.75"].report["pipeline"]["cache"] = {{"items", 75}, {"hits", 225}, {"misses", 175}};
  const auto r = analyze(context(), runs, RawRates{});
  const auto& p = r["self_check"]["points"];
  EXPECT_DOUBLE_EQ(p[1]["item_cache_fraction"].get<double>(), 0.3);
  EXPECT_DOUBLE_EQ(p[1]["page_cache_fraction_after"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(p[2]["item_cache_fraction"].get<double>(), 0.75);
  EXPECT_NE(
      r["self_check"]["cause"].get<std::string>().find("the item cache held 30% of the dataset in the run at 50%"),
      std::string::npos)
      << r["self_check"]["cause"];
}

// The same runs, from a loader whose report says it ran 2 workers with
// --io-depth 0 (or no io_depth: every report before read-ahead): the serial
// model, calibrated on the measured rates, and a curve for each cache.
TEST(Analyzer, SerialWorkersGetTheSerialModelForBothCaches) {
  auto runs = issue14_runs(3187, 3590);
  for (auto& [label, r] : runs) {
    r.report["pipeline"]["workers"] = 2;
    r.report["pipeline"]["prefetch"] = 4;
    r.report["cpu_cores"] = 2;
  }
  auto ctx = context();
  ctx.batch_size = 64;
  const auto r = analyze(ctx, runs, RawRates{});
  const auto& w = r["whatif"];
  EXPECT_EQ(w["model"], "serial");
  EXPECT_EQ(w["io_depth"], 0);
  EXPECT_EQ(w["loader"]["workers"], 2);
  EXPECT_EQ(w["loader"]["prep_cpus"], 2);
  EXPECT_NE(w["model_formula"].get<std::string>().find("simulation"), std::string::npos);
  // Fetch and prep add per worker: half cached is well below min(F(0.5), P) = 3777.
  const auto& points = r["self_check"]["points"];
  ASSERT_EQ(points.size(), 3u);
  EXPECT_LT(points[1]["predicted"].get<double>(), 0.9 * 3777);
  // The cold run (1905/s) is within 1% of storage alone (S 1919/s): a miss
  // costs its worker next to nothing beyond its turn on storage.
  EXPECT_LT(w["serial"]["cold_error_pct"].get<double>(), 1.0) << w["serial"];
  EXPECT_LT(w["serial"]["miss_us"].get<double>(), 0.3 * w["serial"]["storage_us"].get<double>()) << w["serial"];
  // Both caches, the page cache's hits costing a page-cache read (2 / C) each.
  ASSERT_EQ(w["page_cache"]["curve"].size(), 21u);
  EXPECT_NEAR(w["page_cache"]["hit_us"].get<double>(), 1e6 * 2 / 118700, 1e-6);
  EXPECT_EQ(w["page_cache"]["cache"], "page cache");
  EXPECT_GE(w["curve"][10]["predicted"].get<double>(), w["page_cache"]["curve"][10]["predicted"].get<double>());
  EXPECT_EQ(r["recommendation"]["cache"], "item cache");
  EXPECT_NE(console_summary(r).find("what-if model: serial"), std::string::npos);
  // Measured above the serial model (3187/s at 50%): storage served
  // the thinned-out misses faster than its average rate; no recommendation.
  EXPECT_EQ(r["self_check"]["passed"], false);
  EXPECT_NE(r["self_check"]["cause"].get<std::string>().find("burst allowance"), std::string::npos)
      << r["self_check"]["cause"];
  EXPECT_TRUE(r["recommendation"]["cache_fraction"].is_null());
}

// Reads ahead: the read-ahead model, a simulation of the workers' windows of reads (before, the
// overlap model's min(F(x), P), 5.5% and 10.2% high at the knee of stallsim's read-ahead configs).
TEST(Analyzer, ReadAheadGetsTheReadAheadModel) {
  auto runs = issue14_runs(3700, 4200);
  for (auto& [label, r] : runs) {
    r.report["pipeline"]["workers"] = 2;
    r.report["pipeline"]["io_depth"] = 8;
  }
  const auto r = analyze(context(), runs, RawRates{});
  EXPECT_EQ(r["whatif"]["model"], "read-ahead");
  EXPECT_EQ(r["whatif"]["io_depth"], 8);
  EXPECT_EQ(r["whatif"]["read_ahead"]["window"], 4);
  EXPECT_TRUE(r["whatif"]["serial"].is_null());
  // At 50% cached: within 5% of min(F(0.5), P) = 3763 (fetch is the bound there; hits that do not
  // queue behind misses can take it a little beyond F(x), whose x/C term queues them).
  const double at_50 = r["self_check"]["points"][1]["predicted"].get<double>();
  EXPECT_NEAR(at_50, 3763, 0.05 * 3763);
  EXPECT_EQ(r["whatif"]["read_ahead"]["storage_burst"], 8);  // a real disk's queue: the io depth
}

// A dataset over HTTP, latency-bound (2 workers, --io-depth 8, 20 ms a request: 400/s; 100 MB/s of
// 100 KB objects: 1000/s; P 2000/s): the cache what-if's fetch is the io-depth what-if's. A device's
// model, S in aggregate, had half the dataset cached double the fetch rate (800/s), where
// read-ahead's window of 8 still waits on each miss 20 ms; its self-check missed 10 of the 11
// analyses over HTTP of 2026-11-29, by 10-70%, and withheld the verdict's advice.
std::map<std::string, RunOutcome> http_runs(double at_50) {
  std::map<std::string, RunOutcome> runs = {{"synthetic", outcome(1e5)},    {"cached", outcome(2000, 1)},
                                            {"cold", outcome(400, 80)},     {"fetch-cold", outcome(400)},
                                            {"fetch-cached", outcome(1e5)}, {"cpus-1", outcome(1000)},
                                            {"cpus-2", outcome(2000)},      {"cache-0.50", outcome(at_50, 60)}};
  for (auto& [label, r] : runs) {
    r.report["pipeline"]["workers"] = 2;
    r.report["pipeline"]["io_depth"] = 8;
    r.report["pipeline"]["read_ahead"] = {{"window_per_worker", 4}};
  }
  return runs;
}

RawRates http_raw() {
  RawRates raw;
  raw.remote.latency_s = raw.remote.probe_latency_s = 0.020;
  raw.remote.bandwidth_Bps = 100e6;
  raw.remote.mean_bytes = 100e3;
  raw.remote.probe_depth = 32;
  return raw;
}

TEST(Analyzer, OverHttpTheCacheWhatIfFetchesAsTheIoDepthWhatIfDoes) {
  const auto runs_with = http_runs;
  const RawRates raw = http_raw();
  const auto first = analyze(context(), runs_with(500), raw);
  const auto http_at_50 = [](const nlohmann::json& r) {
    for (const auto& m : r["whatif"]["http"]["measured"]) {
      if (m["run"] == "cache-0.50") return m["predicted"].get<double>();
    }
    return 0.0;
  };
  const double predicted = http_at_50(first);
  ASSERT_GT(predicted, 400);
  EXPECT_LT(predicted, 0.8 * 800) << "a device's model: 2 S";
  const auto& point = first["self_check"]["points"][0];
  EXPECT_EQ(point["x"], 0.5);
  EXPECT_NEAR(point["predicted"].get<double>(), predicted, 0.005 * predicted);
  // Measured at the io-depth what-if's prediction: the self-check passes, and the verdict names no
  // page cache (none holds an object fetched over HTTP).
  const auto r = analyze(context(), runs_with(predicted), raw);
  EXPECT_EQ(r["self_check"]["passed"], true) << r["self_check"];
  const std::string verdict = r["recommendation"]["verdict"];
  EXPECT_EQ(verdict.find("page cache"), std::string::npos) << verdict;
  // The curve's fetch column is the requests' rate: 8 / 20 ms at every share (latency-bound).
  EXPECT_NEAR(r["whatif"]["curve"][0]["fetch"].get<double>(), 400, 1e-6);
  EXPECT_NEAR(r["whatif"]["curve"][10]["fetch"].get<double>(), 400, 1e-6);
}

// The model the curve is said to be is the one it is: over HTTP the io-depth what-if's. It was
// named "read-ahead" with a storage device's formula ("a miss served by storage at S in
// aggregate"), and whatif.read_ahead showed that unused model's error on the cold run (29% in an
// analysis of real photographs at +2 ms, 2026-11-30).
TEST(Analyzer, OverHttpTheWhatIfNamesTheModelItsCurveComesFrom) {
  const auto r = analyze(context(), http_runs(300), http_raw());
  const auto& w = r["whatif"];
  EXPECT_EQ(w["model"], "http");
  const std::string formula = w["model_formula"];
  EXPECT_NE(formula.find("the io-depth what-if at the cold run's 8 requests in flight"), std::string::npos) << formula;
  EXPECT_EQ(formula.find("S in aggregate"), std::string::npos) << formula;
  EXPECT_TRUE(w["read_ahead"].is_null()) << w["read_ahead"];
  const std::string text = console_summary(r);
  EXPECT_NE(text.find("what-if model: http (the io-depth what-if"), std::string::npos) << text;
  // On a storage device the read-ahead model stays.
  auto runs = http_runs(300);
  EXPECT_EQ(analyze(context(), runs, RawRates{})["whatif"]["model"], "read-ahead");
}

// An io-depth run the model misses: off beyond its own noise (outcome(): cv 1%, one observation:
// ±2%), and the console says where its requests' time went against the model.
TEST(Analyzer, OverHttpARunThatIsOffSaysWhereItsRequestsTimeWent) {
  auto runs = http_runs(500);
  RunOutcome d2 = outcome(150, 90);  // 2 / 20 ms = 100/s predicted: 50% off
  d2.report["pipeline"]["io_depth"] = 2;
  d2.report["pipeline"]["workers"] = 2;
  d2.report["pipeline"]["read_ahead"] = {{"window_per_worker", 1}, {"per_read_ms", 13.1}, {"queue_wait_ms", 0.2},
                                         {"takes_waited", 1.0},    {"wake_ms", 0.05},     {"item_wait_ms", nullptr}};
  runs["iodepth-2"] = d2;
  const auto r = analyze(context(), runs, http_raw());
  const auto& io = r["whatif"]["http"];
  EXPECT_FALSE(io["self_check_passed"].get<bool>());
  nlohmann::json check;
  for (const auto& m : io["measured"]) {
    if (m["run"] == "iodepth-2") check = m;
  }
  ASSERT_TRUE(check.is_object()) << io;
  EXPECT_TRUE(check["off"].get<bool>());
  EXPECT_NEAR(check["measured_u"].get<double>(), 0.0196, 1e-9);
  EXPECT_NEAR(check["read_ms"]["measured"].get<double>(), 13.1, 1e-9);
  EXPECT_NEAR(check["read_ms"]["model"].get<double>(), 20.0, 1e-6);
  EXPECT_NEAR(check["beside_read_ms"].get<double>(), 0.25, 1e-9);
  const std::string text = console_summary(r);
  EXPECT_NE(text.find("measured    150.0 ±2.0%, predicted    100.0"), std::string::npos) << text;
  EXPECT_NE(text.find("(+50.0%, off; a read 13.10 ms, modelled 20.00; 0.25 ms beside it)"), std::string::npos) << text;
  EXPECT_NE(text.find("(beyond 5%, and outside its range with the run's own noise): no io-depth advice"),
            std::string::npos)
      << text;
}

// Over HTTP on a device, prep-bound (P 300/s on 2 CPUs, each request 1.5 ms of the client's CPU;
// 8 requests of 20 ms in flight): twice the CPUs reach the requests' bound, as the io-depth
// what-if has it. The remedy's `to` was a storage device's model (S in aggregate, no request
// CPU), its `from` the io-depth what-if's: one gain from two models.
TEST(Analyzer, OverHttpMoreCpusIsPredictedAsTheIoDepthWhatIfPredicts) {
  std::map<std::string, RunOutcome> runs = {{"synthetic", outcome(1e5)},    {"cached", outcome(300, 1)},
                                            {"cold", outcome(245, 80)},     {"fetch-cold", outcome(400)},
                                            {"fetch-cached", outcome(1e5)}, {"cpus-1", outcome(150)},
                                            {"cpus-2", outcome(300)}};
  for (auto& [label, r] : runs) {
    r.report["device"] = "cuda";
    r.report["pipeline"]["workers"] = 2;
    r.report["pipeline"]["io_depth"] = 8;
    r.report["pipeline"]["read_ahead"] = {{"window_per_worker", 4}};
  }
  // Each request takes 1.5 ms of the client's CPU (its I/O thread's 1 ms, the transfer thread's 0.5).
  runs["cached"].report["pipeline"]["read_ahead"]["cpu_per_read_us"] = 1000;
  runs["cached"].report["pipeline"]["source_detail"] = {{"requests", 2000}, {"transfer_cpu_s", 1.0}};
  const auto r = analyze(context(), runs, http_raw());
  ASSERT_EQ(r["whatif"]["http"]["request_cpu"]["charged_us"], 1500.0) << r["whatif"]["http"]["request_cpu"];
  nlohmann::json more;
  for (const auto& m : r["recommendation"]["remedies"]) {
    if (m["name"] == "more CPUs") more = m;
  }
  ASSERT_TRUE(more.is_object()) << r["recommendation"].dump(1);
  // From: prep with each request's CPU beside it, 2 CPUs / (6.67 + 1.5 ms) = 245/s. To: the
  // requests' bound, each of the 8 slots busy 20 ms and then its 1.5 ms of CPU: 8 / 21.5 ms = 372/s
  // (a storage device's model had 400/s, the fetch-alone run's S, and no request CPU).
  EXPECT_NEAR(more["from"].get<double>(), 245, 0.02 * 245) << more;
  EXPECT_NEAR(more["to"].get<double>(), 8 / 0.0215, 0.02 * 372) << more;
}

TEST(Analyzer, MissingRunIsNamed) {
  std::map<std::string, RunOutcome> runs{{"synthetic", outcome(400)}};
  try {
    analyze(context(), runs, RawRates{});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'cached'"), std::string::npos);
  }
}

TEST(Charts, SplitBarHasThreeSegmentsSizedByShare) {
  const std::string svg = split_svg("a<b", Split{50, 25, 25});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("a&lt;b"), std::string::npos);
  EXPECT_NE(svg.find(R"(data-part="compute" x="10.0" y="26" width="250.0")"), std::string::npos) << svg;
  EXPECT_NE(svg.find(R"(data-part="fetch stall" x="385.0" y="26" width="125.0")"), std::string::npos);
}

TEST(Charts, WhatIfHasCurvesAndMeasuredPoints) {
  const auto curve = whatif_curve({0, 0.5, 1}, 200, 400, 1000, 100);
  const std::string svg = whatif_svg("sim", curve, 200, 400, {{0.5, 180}, {1.0, 199}});
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 10, true);
  size_t circles = 0;
  for (size_t pos = svg.find(R"(class="measured")"); pos != std::string::npos;
       pos = svg.find(R"(class="measured")", pos + 1)) {
    ++circles;
  }
  EXPECT_EQ(circles, 2u);
  EXPECT_NE(svg.find(R"(data-name="predicted")"), std::string::npos);
  EXPECT_NE(svg.find("data-name=\"F(x)\""), std::string::npos) << svg;
  EXPECT_NE(svg.find(">fetch F(x)</text>"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("F(x)svg"), std::string::npos) << "the what-if curve is labelled F(x)";
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

// A public training script (docs/stall.md, "Answers you can act on") through the whole analyzer: the fetch share is the
// difference of two noisy runs over storage 1,369x the consumer. Before, the analyzer said "compute-bound ... neither
// DRAM nor CPUs help" and then "remedy: item cache helps most: x1.21".
TEST(Analyzer, NamesNoCacheForAFetchShareThatStorageCannotHaveCaused) {
  const auto outcome = [](double rate) {
    RunOutcome r;
    r.rate = rate;
    r.cv = 0.10;
    r.report = {{"stall", {{"stall_pct", 10.0}}}, {"pipeline", {{"source", "test"}}}};
    return r;
  };
  AnalysisContext ctx;
  ctx.config.bench = "exec";
  ctx.config.data = "/d";
  ctx.items = 256;
  ctx.batch_size = 32;
  ctx.cores_now = 2;
  const std::map<std::string, RunOutcome> runs = {{"synthetic", outcome((6.5 / 0.777))},
                                                  {"cached", outcome((1.0 / (0.777 / 6.5 + 0.032 / 6.5)))},
                                                  {"cold", outcome(6.5)},
                                                  {"fetch-cold", outcome(8901.0)},
                                                  {"fetch-cached", outcome(4e4)},
                                                  {"cpus-1", outcome(4.1)},
                                                  {"cpus-2", outcome((1.0 / (0.777 / 6.5 + 0.032 / 6.5)))}};
  const auto r = analyze(ctx, runs, RawRates{});
  const auto& rec = r["recommendation"];
  EXPECT_TRUE(rec["remedy"].is_null()) << rec.dump(1);
  EXPECT_TRUE(rec["cache_fraction"].is_null()) << rec.dump(1);
  EXPECT_EQ(rec["bound"], "compute-bound");
  const std::string text = console_summary(r);
  EXPECT_EQ(text.find("helps most"), std::string::npos) << text;
  EXPECT_NE(text.find("no measurable fetch stall"), std::string::npos) << text;
  EXPECT_NE(text.find("recommended cache: none (no measurable fetch stall)"), std::string::npos) << text;
}

// Under --exec the remedies are the script's: RAM for the OS page cache in GB, faster storage, and
// mlbench's own loader as a measured alternative; none of mlbench's flags.
TEST(Analyzer, UnderExecTheRemediesAreTheScriptsOwn) {
  AnalysisContext ctx = context();
  ctx.config.bench = "exec";
  ctx.exec = true;
  ctx.dataset_bytes = 2e9;
  auto runs = fetch_bound_runs(200);  // G 400, P 200, cold 100 over storage 100/s: fetch-bound
  runs.erase("cache-0.50");           // --exec measures no cache fraction
  RunOutcome loader = outcome(900);
  loader.report["pipeline"] = {{"workers", 2}, {"image_size", 224}};
  runs["mlbench-loader"] = loader;
  const auto r = analyze(ctx, runs, RawRates{});
  const auto& rec = r["recommendation"];
  ASSERT_TRUE(rec["remedy"].is_object()) << rec.dump(1);
  EXPECT_EQ(rec["remedy"]["stall"], "fetch");
  std::set<std::string> names;
  for (const auto& m : rec["remedies"]) {
    names.insert(m["name"].get<std::string>());
    EXPECT_EQ(m["detail"].get<std::string>().find("--"), std::string::npos) << m;
  }
  EXPECT_TRUE(names.count("OS page cache")) << rec.dump(1);
  EXPECT_TRUE(names.count("faster storage")) << rec.dump(1);
  EXPECT_FALSE(names.count("item cache")) << rec.dump(1);
  EXPECT_FALSE(names.count("coordinated prep")) << rec.dump(1);
  for (const auto& m : rec["remedies"]) {
    if (m["name"] == "OS page cache") {
      EXPECT_NE(m["detail"].get<std::string>().find(" GB of RAM free for the OS page cache"), std::string::npos) << m;
      EXPECT_NE(m["detail"].get<std::string>().find("vmtouch -t /d"), std::string::npos) << m;
    }
    // Storage fast enough for 95% of the plateau (P 200/s): 190/s, against today's 100.
    if (m["name"] == "faster storage") {
      EXPECT_NE(m["detail"].get<std::string>().find("serving 190 samples/s"), std::string::npos) << m;
    }
  }
  bool alternative = false;
  for (const auto& a : rec["advice"]) {
    if (a.get<std::string>().find("mlbench's own prepared 900 samples/s") != std::string::npos) alternative = true;
  }
  EXPECT_TRUE(alternative) << rec["advice"];
  EXPECT_EQ(console_summary(r).find("--cache-size"), std::string::npos) << console_summary(r);
}

TEST(ExecTarget, TheLoaderAlternativeRunsOnTheSameFilesWithTheCommandsBatch) {
  StallConfig c;
  c.data = "/d";
  c.iterations = 20;
  const RunSpec r = plan_exec_loader_run(c, 2, 16);
  EXPECT_EQ(r.label, "mlbench-loader");
  EXPECT_EQ(r.cache, CacheState::Warm);
  EXPECT_TRUE(r.command.empty());  // the loader benchmark, not the command
  const auto at = [&](const std::string& flag) {
    const auto it = std::find(r.args.begin(), r.args.end(), flag);
    return it == r.args.end() || it + 1 == r.args.end() ? std::string() : *(it + 1);
  };
  EXPECT_EQ(at("--data"), "/d");
  EXPECT_EQ(at("--workers"), "2");
  EXPECT_EQ(at("--batch-size"), "16");
}

}  // namespace
}  // namespace mlbench::stall

namespace {
// A run sized by its noise states the 95% half-width it reached where that is wider than its
// observations' standard error: every range then spans it (docs/stall.md, "How runs are sized").
TEST(Analyzer, ASizedRunsRangeCarriesTheHalfWidthItReached) {
  using namespace mlbench::stall;
  auto runs = issue14_runs(3700, 4200);
  const auto fixed = analyze(context(), runs, RawRates{});
  const double u_fixed = fixed["whatif"]["uncertainty"]["P"].get<double>();
  runs.at("cached").half_width = 0.08;  // stopped short at ±8%
  const auto sized = analyze(context(), runs, RawRates{});
  EXPECT_NEAR(sized["whatif"]["uncertainty"]["P"].get<double>(), std::max(u_fixed, 0.08), 1e-12);
  EXPECT_GT(0.08, u_fixed);
  // A half-width below the standard error changes nothing.
  runs.at("cached").half_width = u_fixed / 2;
  EXPECT_NEAR(analyze(context(), runs, RawRates{})["whatif"]["uncertainty"]["P"].get<double>(), u_fixed, 1e-12);
}
}  // namespace
