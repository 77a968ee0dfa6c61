// End-to-end: the real toy_reg binary on tiny settings; its report is checked
// against the fields and types documented in docs/report-format.md.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/processes.h"
#include "tests/support/run_command.h"

namespace {

namespace fs = std::filesystem;
using mlbench::testing_support::run_command;
using mlbench::testing_support::scratch_dir;
using nlohmann::json;

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (fs::exists(dir)) {
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  }
  return out;
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

void expect_stats(const json& s, const std::string& what) {
  ASSERT_TRUE(s.is_object()) << what;
  for (const char* k : {"avg", "min", "max", "sd"}) EXPECT_TRUE(s[k].is_number()) << what << "." << k;
  EXPECT_TRUE(s["count"].is_number_integer()) << what;
  EXPECT_EQ(s["unit"], "s") << what;
  EXPECT_LE(s["min"].get<double>(), s["avg"].get<double>()) << what;
  EXPECT_LE(s["avg"].get<double>(), s["max"].get<double>()) << what;
}

TEST(ToyRegE2E, WritesOneValidReport) {
  const fs::path dir = scratch_dir("toy_reg_e2e");
  const auto r = run_command(std::string(TOY_REG_BIN) + " --repeat 6 --number 20 --batch-size 64 --warmup 2 --report " +
                             dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[  6/  6] | ETA:"), std::string::npos) << r.output;  // one progress line per repeat
  EXPECT_NE(r.output.find("Batch Loss"), std::string::npos);
  const auto files = files_in(dir);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(r.output.find("Report: " + files[0].string()), std::string::npos);
  const json j = read_json(files[0]);

  // Identity and configuration.
  EXPECT_EQ(j["name"], "toy_reg");
  EXPECT_EQ(j["suite"], "mlbench");
  EXPECT_EQ(j["run_id"], 0);
  EXPECT_EQ(j["batch_size"], 64);
  EXPECT_EQ(j["repeat"], 6);
  EXPECT_EQ(j["number"], 20);
  EXPECT_EQ(j["warmup"], 2);
  EXPECT_TRUE(j["seed"].is_number_integer());
  EXPECT_TRUE(j["cpu_cores"].is_number_integer());
  EXPECT_TRUE(j["hostname"].is_string());
  EXPECT_TRUE(j["gpu"].is_null() || j["gpu"].is_string());
  EXPECT_EQ(j["unique_id"].get<std::string>().size(), 64u);
  EXPECT_EQ(j["version"]["source"].get<std::string>().size(), 64u);
  EXPECT_TRUE(j["version"]["git"].is_string());
  EXPECT_EQ(j["args"]["degree"], 4);
  EXPECT_EQ(j["machine"]["framework"], "libtorch");

  // Timing: 6 repeats, 2 dropped.
  expect_stats(j["train"], "train");
  EXPECT_EQ(j["train"]["count"], 4);
  const double items_per_obs = 64.0 * 20.0;
  EXPECT_NEAR(j["train_item"]["avg"].get<double>(), items_per_obs / j["train"]["avg"].get<double>(), 1e-6);
  EXPECT_NEAR(j["train_item"]["max"].get<double>(), items_per_obs / j["train"]["min"].get<double>(), 1e-6);
  EXPECT_EQ(j["train_item"]["unit"], "items/sec");

  // Stall block: per-iteration phases, 2 * 20 warm-up iterations dropped.
  for (const char* phase : {"wait", "h2d", "compute", "iteration"}) expect_stats(j["stall"][phase], phase);
  EXPECT_EQ(j["stall"]["iteration"]["count"], 80);
  EXPECT_EQ(j["stall"]["warmup_iterations"], 40);
  const double pct = j["stall"]["stall_pct"];
  EXPECT_GT(pct, 0.0);
  EXPECT_LT(pct, 100.0);

  // Losses: finite, and training makes progress on this convex problem.
  ASSERT_EQ(j["epoch_loss"].size(), 6u);
  EXPECT_LT(j["epoch_loss"].back().get<double>(), j["epoch_loss"].front().get<double>());
  EXPECT_EQ(j["batch_loss"].size(), 100u);
  for (const auto& l : j["batch_loss"]) EXPECT_TRUE(l.is_number());

  EXPECT_EQ(j["completed"], true);
  EXPECT_TRUE(j["start_time"].is_string());
  EXPECT_TRUE(j["end_time"].is_string());
  EXPECT_LE(j["start_time"].get<std::string>(), j["end_time"].get<std::string>());
  fs::remove_all(dir);
}

TEST(ToyRegE2E, SameWorkloadSameUniqueIdDifferentWorkloadNot) {
  const fs::path dir = scratch_dir("toy_reg_uid");
  const std::string base = std::string(TOY_REG_BIN) + " --repeat 2 --number 2 --report " + dir.string();
  ASSERT_EQ(run_command(base + "/a --seed 1 --jr-id 3").exit_code, 0);
  ASSERT_EQ(run_command(base + "/b --seed 2").exit_code, 0);
  ASSERT_EQ(run_command(base + "/c --degree 3").exit_code, 0);
  const json a = read_json(files_in(dir / "a").at(0));
  const json b = read_json(files_in(dir / "b").at(0));
  const json c = read_json(files_in(dir / "c").at(0));
  EXPECT_EQ(a["unique_id"], b["unique_id"]);
  EXPECT_NE(a["unique_id"], c["unique_id"]);
  EXPECT_EQ(files_in(dir / "a").at(0).filename().string().rfind("mlbench.toy_reg.R0.D3.", 0), 0u);
  fs::remove_all(dir);
}

TEST(ToyRegE2E, HelpAndBadFlags) {
  const auto help = run_command(std::string(TOY_REG_BIN) + " --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("--degree"), std::string::npos);
  EXPECT_NE(help.output.find("--batch-size"), std::string::npos);
  const auto bad = run_command(std::string(TOY_REG_BIN) + " --batch-size abc");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(std::count(bad.output.begin(), bad.output.end(), '\n'), 1) << bad.output;
  EXPECT_NE(bad.output.find("--batch-size"), std::string::npos);
  const auto env = run_command("CPU_COUNT=zero " + std::string(TOY_REG_BIN));
  EXPECT_EQ(env.exit_code, 2);
  EXPECT_NE(env.output.find("CPU_COUNT"), std::string::npos);
}

TEST(ToyRegE2E, NoCudaHereMeansCudaFlagIsAUsageError) {
  const auto probe = run_command(std::string(TOY_REG_BIN) + " --repeat 2 --number 1 --cuda --report /tmp/mlbench_no_report");
  if (probe.exit_code == 0) GTEST_SKIP() << "this LibTorch has CUDA: --cuda is valid here";
  EXPECT_EQ(probe.exit_code, 2) << probe.output;
  EXPECT_NE(probe.output.find("no usable CUDA"), std::string::npos) << probe.output;
}

TEST(ToyRegE2E, InterruptWritesFailReportAndExits130) {
  const fs::path dir = scratch_dir("toy_reg_int");
  mlbench::core::ProcessSpec spec;
  spec.executable = TOY_REG_BIN;
  spec.args = {"--repeat", "1000000", "--number", "100", "--report", dir.string()};
  // SIGINT only once the loop runs (its first progress line is printed after the
  // handlers are installed): a fixed sleep raced a slow start on a loaded machine.
  const fs::path log = dir.string() + ".log";
  spec.output = mlbench::core::Output::File;
  spec.log_path = log.string();
  mlbench::core::Process toy(spec);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (!mlbench::testing_support::log_has_line(log, "[  1/")) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "toy_reg printed no progress line in 2 minutes: " << log;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(toy.pid(), SIGINT);
  const mlbench::core::ExitStatus status = toy.wait();
  ASSERT_TRUE(status.exited);
  EXPECT_EQ(status.code, 130);
  const auto files = files_in(dir);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(files[0].string().find(".FAIL."), std::string::npos);
  const json j = read_json(files[0]);
  EXPECT_EQ(j["completed"], false);
  EXPECT_EQ(j["reason"], "interrupted");
  EXPECT_GT(j["iterations"].get<long>(), 0);
  fs::remove_all(dir);
  fs::remove(log);
}

}  // namespace
