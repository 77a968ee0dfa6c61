#include "core/report.h"

#include <filesystem>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("mlbench_report_test_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  return dir;
}

TEST(ReportName, FollowsTheContract) {
  using namespace std::chrono;
  const auto when = sys_days{year{2026} / 11 / 22} + hours{3} + minutes{4} + seconds{5} + microseconds{123};
  EXPECT_EQ(report_file_name("mlbench", "toy_reg", 2, 1, false, when),
            "mlbench.toy_reg.R2.D1.20261122-030405-000123.json");
  EXPECT_EQ(report_file_name("s", "loader", 0, 3, true, when), "s.loader.R0.D3.FAIL.20261122-030405-000123.json");
  EXPECT_EQ(utc_iso8601(when), "2026-11-22T03:04:05.000123Z");
}

TEST(WriteAtomic, WritesWholeFileCreatesDirectoryAndLeavesNoTemporary) {
  const fs::path dir = temp_dir("atomic");
  const fs::path file = dir / "sub" / "r.json";
  write_json_atomic(file, nlohmann::json{{"a", 1}});
  std::ifstream in(file);
  EXPECT_EQ(nlohmann::json::parse(in)["a"], 1);
  // Replace: readers see the new content, and only one file exists.
  write_json_atomic(file, nlohmann::json{{"a", 2}});
  std::ifstream in2(file);
  EXPECT_EQ(nlohmann::json::parse(in2)["a"], 2);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir / "sub")) ++entries;
  EXPECT_EQ(entries, 1);
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::others_read, fs::perms::others_read);
  fs::remove_all(dir);
}

TEST(WriteAtomic, FailureNamesThePathAndKeepsTheOldFile) {
  const fs::path dir = temp_dir("fail");
  fs::create_directories(dir);
  const fs::path file = dir / "r.json";
  write_file_atomic(file, "old");
  // A directory where the target's parent should be: cannot create.
  const fs::path blocked = dir / "r.json" / "x.json";
  try {
    write_file_atomic(blocked, "new");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.string()), std::string::npos) << e.what();
  }
  std::ifstream in(file);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "old");
  fs::remove_all(dir);
}

TEST(TrainItem, DerivedFromTrainStage) {
  StatAccumulator train;
  for (double t : {0.5, 1.0, 0.25}) train.add(t);  // mean 0.5833
  const auto j = train_item(train, 100.0);
  EXPECT_NEAR(j["avg"].get<double>(), 100.0 / (1.75 / 3), 1e-9);
  EXPECT_DOUBLE_EQ(j["max"].get<double>(), 400.0);  // fastest observation
  EXPECT_DOUBLE_EQ(j["min"].get<double>(), 100.0);  // slowest observation
  EXPECT_DOUBLE_EQ(j["range"].get<double>(), 300.0);
  EXPECT_EQ(j["unit"], "items/sec");
  EXPECT_TRUE(train_item(StatAccumulator(), 10.0)["avg"].is_null());
}

}  // namespace
}  // namespace mlbench::core
