// Each epoch's start under --exec (stall/epoch_start.h): the probe's `probe.epoch_start` block of the
// cached run turned into a finding and the advice in the script's terms.
#include "stall/epoch_start.h"

#include <gtest/gtest.h>

namespace mlbench::stall {
namespace {

nlohmann::json stat(double avg, double sd, int count) {
  return {{"avg", avg}, {"min", avg - sd}, {"max", avg + sd}, {"sd", sd}, {"count", count}, {"unit", "s"}};
}

// A probe report of a DCGAN-shaped script with one DataLoader worker, 10 batches of 64 an epoch,
// 100 timed iterations (10 epoch starts): a steady step of 110 ms (2 ms waiting), an epoch's first
// step of 300 ms (150 ms waiting for the first batch, 10 ms of it making the iterator).
nlohmann::json gan_report(bool persistent, int workers = 1, double first_wait = 0.150, int epochs = 10) {
  const int steady = 10 * epochs - epochs;
  const double timed = epochs * (first_wait + 0.150) + steady * 0.110;
  return {{"train_item", {{"avg", 64.0 * 10 * epochs / timed}, {"unit", "items/sec"}}},
          {"probe",
           {{"schema", "mlbench-probe-1"},
            {"mode", "normal"},
            {"epoch_start",
             {{"epochs", epochs},
              {"batches_per_epoch", 10},
              {"workers", workers},
              {"persistent_workers", persistent},
              {"wait", stat(first_wait, 0.005, epochs)},
              {"iter", stat(0.010, 0.001, epochs)},
              {"compute", stat(0.150, 0.008, epochs)},
              {"steady_wait", stat(0.002, 0.001, steady)},
              {"steady_compute", stat(0.108, 0.010, steady)}}}}}};
}

TEST(EpochStart, AWorkerStartedAtEveryEpochIsAFindingWithPersistentWorkersAsAdvice) {
  const auto c = epoch_start_cost(gan_report(false));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->epochs, 10);
  EXPECT_NEAR(c->first_step_s, 0.300, 1e-12);
  EXPECT_NEAR(c->steady_step_s, 0.110, 1e-12);
  EXPECT_NEAR(c->cost_s, 0.190, 1e-12);
  // 10 epoch starts of 190 ms in 10 x 300 + 90 x 110 ms = 12.9 s.
  EXPECT_NEAR(c->timed_s, 12.9, 1e-9);
  EXPECT_NEAR(c->share_pct, 100 * 1.9 / 12.9, 1e-9);
  // Without them the run would take 11 s: 640 x 10 / 11 samples/s, as a steady step gives.
  EXPECT_NEAR(c->rate_within, 6400 / 11.0, 1e-6);
  EXPECT_NEAR(c->rate_within, 64 / 0.110, 1e-6);
  EXPECT_TRUE(c->claimed);
  ASSERT_TRUE(c->iter_s);
  EXPECT_NEAR(*c->iter_s, 0.010, 1e-12);

  const auto j = epoch_start_json(gan_report(false));
  EXPECT_EQ(j["run"], "cached");
  EXPECT_TRUE(j["claimed"].get<bool>());
  EXPECT_NEAR(j["cost_ms"].get<double>(), 190, 1e-9);
  EXPECT_NEAR(j["first_wait_ms"].get<double>(), 150, 1e-9);
  const std::string text = j["text"];
  EXPECT_NE(text.find("each epoch's start costs 190.0 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("150.0 ms of it waiting for the DataLoader's first batch (2.0 ms within an epoch)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("14.7% of the cached run (10 epoch starts at 10 batches an epoch)"), std::string::npos) << text;
  EXPECT_NE(text.find("496.1 samples/s over whole epochs, 581.8/s without it"), std::string::npos) << text;
  const std::string advice = j["advice"];
  EXPECT_EQ(advice.rfind("DataLoader(persistent_workers=True) starts the loader's 1 worker once", 0), 0u) << advice;
  EXPECT_NE(advice.find("still loaded only once the epoch starts"), std::string::npos) << advice;
}

TEST(EpochStart, PersistentWorkersLeaveOnlyTheFirstBatchAndTheAdviceSaysSo) {
  const auto j = epoch_start_json(gan_report(true));
  ASSERT_TRUE(j.is_object());
  EXPECT_TRUE(j["claimed"].get<bool>());
  EXPECT_EQ(j["persistent_workers"], true);
  const std::string advice = j["advice"];
  EXPECT_EQ(advice.find("persistent_workers=True"), std::string::npos) << advice;
  EXPECT_NE(advice.find("with persistent_workers too"), std::string::npos) << advice;
  EXPECT_NE(advice.find("MultiEpochsDataLoader"), std::string::npos) << advice;
}

TEST(EpochStart, AFirstBatchNoSlowerThanTheOthersIsNoFinding) {
  // The first step as slow as the others (first wait 2 ms, compute 108 ms): within the noise.
  nlohmann::json r = gan_report(false, 1, 0.002);
  r["probe"]["epoch_start"]["compute"] = stat(0.108, 0.010, 10);
  const auto c = epoch_start_cost(r);
  ASSERT_TRUE(c);
  EXPECT_NEAR(c->cost_s, 0.0, 1e-12);
  EXPECT_FALSE(c->claimed);
  const auto j = epoch_start_json(r);
  EXPECT_EQ(j["text"].get<std::string>().rfind("no measurable cost at each epoch's start", 0), 0u) << j["text"];

  // A cost beyond its noise but worth less than x1.02: 10 starts of 2 ms more in ~11 s.
  r["probe"]["epoch_start"]["wait"] = stat(0.004, 0.0002, 10);
  r["probe"]["epoch_start"]["compute"] = stat(0.108, 0.0002, 10);
  r["probe"]["epoch_start"]["steady_compute"] = stat(0.108, 0.0002, 90);
  r["probe"]["epoch_start"]["steady_wait"] = stat(0.002, 0.0002, 90);
  const auto small = epoch_start_cost(r);
  ASSERT_TRUE(small);
  EXPECT_GT(small->cost_s, 2 * small->noise_s);
  EXPECT_FALSE(small->claimed);
}

TEST(EpochStart, OneEpochStartIsNotEnoughToSayEachEpoch) {
  const auto c = epoch_start_cost(gan_report(false, 1, 0.150, 1));
  ASSERT_TRUE(c);
  EXPECT_GT(c->cost_s, 0.1);
  EXPECT_FALSE(c->claimed);
}

TEST(EpochStart, NoWorkersOrNoDataLoaderGiveNoAdvice) {
  auto no_workers = gan_report(false, 0);
  EXPECT_EQ(epoch_start_json(no_workers)["advice"], "");
  auto wrapped = gan_report(false);
  wrapped["probe"]["epoch_start"]["persistent_workers"] = nullptr;  // mlbench_probe.wrap of an iterator
  const auto j = epoch_start_json(wrapped);
  EXPECT_EQ(j["advice"], "");
  EXPECT_TRUE(j["persistent_workers"].is_null());
  EXPECT_NE(j["text"].get<std::string>().find("waiting for the loader's first batch"), std::string::npos) << j["text"];
}

TEST(EpochStart, AReportWithoutTheBlockAddsNothing) {
  nlohmann::json benchmark = {{"train_item", {{"avg", 500.0}}}, {"pipeline", {{"source", "loader"}}}};
  EXPECT_FALSE(epoch_start_cost(benchmark));
  EXPECT_TRUE(epoch_start_json(benchmark).is_null());
  nlohmann::json older = {{"probe", {{"schema", "mlbench-probe-1"}, {"mode", "normal"}}}};  // a probe before it
  EXPECT_TRUE(epoch_start_json(older).is_null());
  // No epoch start within the timed iterations (an epoch longer than the run).
  auto none = gan_report(false);
  none["probe"]["epoch_start"]["epochs"] = 0;
  none["probe"]["epoch_start"]["wait"] = stat(0, 0, 0);
  EXPECT_TRUE(epoch_start_json(none).is_null());

  nlohmann::json result = {{"findings", {{"fetch", nullptr}}}, {"recommendation", {{"advice", {"a note"}}}}};
  const nlohmann::json before = result;
  add_epoch_start_finding(benchmark, result);
  EXPECT_EQ(result, before);
}

TEST(EpochStart, TheHookAddsTheFindingAndItsAdviceToTheResult) {
  nlohmann::json result = {{"findings", {{"fetch", nullptr}}}, {"recommendation", {{"advice", {"a note"}}}}};
  add_epoch_start_finding(gan_report(false), result);
  ASSERT_TRUE(result["findings"]["epoch_start"].is_object());
  EXPECT_TRUE(result["findings"]["epoch_start"]["claimed"].get<bool>());
  ASSERT_EQ(result["recommendation"]["advice"].size(), 2u);
  EXPECT_EQ(result["recommendation"]["advice"][0], "a note");
  EXPECT_EQ(result["recommendation"]["advice"][1], result["findings"]["epoch_start"]["advice"]);
  // Not claimed: the finding is there, the advice is not.
  nlohmann::json quiet = {{"recommendation", {{"advice", nlohmann::json::array()}}}};
  add_epoch_start_finding(gan_report(false, 1, 0.150, 1), quiet);
  EXPECT_FALSE(quiet["findings"]["epoch_start"]["claimed"].get<bool>());
  EXPECT_TRUE(quiet["recommendation"]["advice"].empty());
}

}  // namespace
}  // namespace mlbench::stall
