// End-to-end runs of the real convnet, convnet_fp16, dcgan, reso, fast_style
// and ssd binaries on tiny settings: each writes a valid report with finite
// losses; runs that read images carry non-zero pipeline stage times; a
// missing dataset is one line naming the mlbench-datagen command (exit 2).
// The tiny datasets are generated once per test program by mlbench-datagen.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/bench_run.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

using RunResult = mlbench::testing_support::BenchRun;

// The generated datasets, shared by the suite's tests (made once, removed after).
fs::path data_root() {
  static const fs::path root = mlbench::testing_support::scratch_dir("vision_e2e_data");
  return root;
}

class VisionE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const char* name : {"fake-imagenet-tiny", "bsds500-tiny", "coco-shapes-tiny"}) {
      const std::string cmd = std::string(MLBENCH_DATAGEN) + " ensure " + name + " --root " + data_root().string();
      const auto r = mlbench::testing_support::run_command(cmd);
      ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
    }
  }
  static void TearDownTestSuite() { fs::remove_all(data_root()); }

  void SetUp() override {
    tmp_ = mlbench::testing_support::temp_dir_for_current_test("vision_e2e");
    dir_ = tmp_->path();
  }
  void TearDown() override {
    if (HasFailure()) tmp_->keep();  // left for inspection
  }

  RunResult run(const std::string& bench, const std::string& args) {
    const fs::path reports = dir_ / "reports";
    return mlbench::testing_support::run_bench(std::string(MLBENCH_BENCH_DIR) + "/" + bench +
                                                   " --cpu-cores 1 --no-cuda --repeat 2 --number 2 --warmup 0 --report " +
                                                   reports.string() + " " + args,
                                               reports, dir_ / (bench + ".log"));
  }

  static std::string data(const std::string& rel) { return (data_root() / rel).string(); }

  // A completed run with finite losses; returns the report.
  static nlohmann::json expect_valid(const RunResult& r, const std::string& name) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    if (r.reports.size() != 1) {
      ADD_FAILURE() << "expected one report\n" << r.output;
      return {};
    }
    const auto& j = r.reports[0];
    EXPECT_EQ(j["name"], name);
    EXPECT_EQ(j["completed"], true);
    EXPECT_GT(j["train_item"]["avg"].get<double>(), 0.0);
    EXPECT_EQ(j["epoch_loss"].size(), 2u) << j.dump();
    for (const auto& l : j["batch_loss"]) {
      EXPECT_TRUE(l.is_number() && std::isfinite(l.get<double>())) << j["batch_loss"].dump();
    }
    EXPECT_TRUE(j["stall"]["stall_pct"].is_number()) << j["stall"].dump();
    return j;
  }

  // Images were read, decoded and collated: every stage did measurable work,
  // and the consumer's waits were timed.
  static void expect_pipeline_times(const nlohmann::json& j) {
    const auto& p = j["pipeline"];
    ASSERT_TRUE(p.contains("stages")) << p.dump();
    for (const char* stage : {"fetch", "decode", "augment", "collate"}) {
      EXPECT_GT(p["stages"][stage]["busy_s"].get<double>(), 0.0) << stage << ": " << p.dump();
      EXPECT_GT(p["stages"][stage]["items"].get<long>(), 0) << stage;
    }
    EXPECT_GT(p["bytes_read"].get<long>(), 0);
    EXPECT_GT(p["consumer_wait_total_s"].get<double>(), 0.0) << p.dump();
    EXPECT_GT(j["stall"]["wait"]["avg"].get<double>(), 0.0) << j["stall"].dump();
  }

  std::unique_ptr<mlbench::testing_support::TempDir> tmp_;
  fs::path dir_;
};

TEST_F(VisionE2E, ConvnetRealData) {
  auto r = run("convnet", "--arch resnet18 --classes 4 --image-size 32 -b 4 --workers 1 --data " +
                              data("fake-imagenet-tiny/train"));
  auto j = expect_valid(r, "convnet");
  if (HasFailure()) return;
  expect_pipeline_times(j);
  EXPECT_EQ(j["metrics"]["arch"], "resnet18");
  EXPECT_EQ(j["metrics"]["parameters"], 11689512 - 513000 + 512 * 4 + 4);
  EXPECT_EQ(j["metrics"]["precision"], "fp32");
}

TEST_F(VisionE2E, ConvnetSynthetic) {
  auto j = expect_valid(run("convnet", "--arch resnet18 --classes 10 --image-size 32 -b 4 --synthetic"), "convnet");
  if (HasFailure()) return;
  EXPECT_EQ(j["pipeline"]["source"], "synthetic");
  EXPECT_DOUBLE_EQ(j["stall"]["wait"]["max"].get<double>(), 0.0);
}

TEST_F(VisionE2E, ConvnetFp16OnCpuUsesBfloat16) {
  auto j = expect_valid(run("convnet_fp16", "--arch resnet18 --classes 4 --image-size 32 -b 4 --workers 1 --data " +
                                                data("fake-imagenet-tiny/train")),
                        "convnet_fp16");
  if (HasFailure()) return;
  expect_pipeline_times(j);
  EXPECT_EQ(j["metrics"]["precision"], "bf16-autocast");
  EXPECT_TRUE(j["metrics"].contains("cpu_native_bf16"));
}

TEST_F(VisionE2E, ConvnetTooFewClassesIsAUsageError) {
  auto r = run("convnet", "--arch resnet18 --classes 2 --image-size 32 -b 4 --data " + data("fake-imagenet-tiny/train"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("more than --classes 2"), std::string::npos) << r.output;
  EXPECT_TRUE(r.reports.empty());
}

TEST_F(VisionE2E, MissingDatasetNamesDatagen) {
  auto r = run("convnet", "--arch resnet18 --image-size 32 -b 4 --data " + (dir_ / "nope").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("mlbench-datagen ensure fake-imagenet-small"), std::string::npos) << r.output;
  auto s = run("ssd", "-b 2 --data " + (dir_ / "nope").string());
  EXPECT_EQ(s.exit_code, 2) << s.output;
  EXPECT_NE(s.output.find("mlbench-datagen ensure coco-shapes-small"), std::string::npos) << s.output;
}

TEST_F(VisionE2E, DcganRealData) {
  auto j = expect_valid(run("dcgan", "-b 4 --workers 1 --data " + data("fake-imagenet-tiny/train")), "dcgan");
  if (HasFailure()) return;
  expect_pipeline_times(j);
  EXPECT_EQ(j["metrics"]["parameters_generator"], 3576704);
  EXPECT_EQ(j["metrics"]["parameters_discriminator"], 2765568);
}

TEST_F(VisionE2E, DcganRejectsOtherImageSizes) {
  auto r = run("dcgan", "--image-size 32 --synthetic");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--image-size must be 64"), std::string::npos) << r.output;
}

TEST_F(VisionE2E, ResoRealData) {
  auto j = expect_valid(run("reso", "--image-size 32 -b 4 --workers 1 --data " + data("bsds500-tiny/train")), "reso");
  if (HasFailure()) return;
  expect_pipeline_times(j);
  EXPECT_EQ(j["metrics"]["parameters"], 58212);
}

TEST_F(VisionE2E, FastStyleRealData) {
  auto j = expect_valid(run("fast_style", "--image-size 32 -b 2 --workers 1 --data " + data("fake-imagenet-tiny/train")),
                        "fast_style");
  if (HasFailure()) return;
  expect_pipeline_times(j);
  EXPECT_EQ(j["metrics"]["parameters_transformer"], 1679235);
}

TEST_F(VisionE2E, SsdRealData) {
  auto j = expect_valid(run("ssd", "-b 2 --workers 1 --data " + data("coco-shapes-tiny")), "ssd");
  if (HasFailure()) return;
  expect_pipeline_times(j);
  EXPECT_EQ(j["metrics"]["default_boxes"], 8732);
}

TEST_F(VisionE2E, SsdSynthetic) {
  auto j = expect_valid(run("ssd", "-b 2 --synthetic"), "ssd");
  if (HasFailure()) return;
  EXPECT_EQ(j["pipeline"]["source"], "synthetic");
}

}  // namespace
