// End-to-end runs of the real toy_lstm, vae, wlm, wlmfp16, recom, translator
// and cart binaries on tiny settings: each writes a valid report with a finite
// loss; a missing dataset names the mlbench-datagen command; a malformed input
// file ends the run with a .FAIL. report naming the file and line.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "tests/support/bench_run.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

using RunResult = mlbench::testing_support::BenchRun;

class SeqBenchE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = mlbench::testing_support::temp_dir_for_current_test("seq_e2e");
    root_ = tmp_->path();
  }
  void TearDown() override {
    if (HasFailure()) tmp_->keep();  // left for inspection
  }

  RunResult run(const std::string& bench, const std::string& args) {
    const fs::path reports = root_ / ("reports_" + bench + "_" + std::to_string(runs_++));
    return mlbench::testing_support::run_bench(
        std::string(MLBENCH_BENCH_DIR) + "/" + bench + " --cpu-cores 1 --report " + reports.string() + " " + args,
        reports, reports.string() + ".log");
  }

  // A completed run: exit status 0, exactly one report, positive throughput,
  // every loss finite. The first thing wrong comes back as the failure message;
  // callers ASSERT_TRUE it before reading r.reports[0], so a run without its
  // report fails its own test instead of crashing the whole binary.
  static ::testing::AssertionResult is_valid_run(const RunResult& r, const std::string& name) {
    if (r.exit_code != 0) return ::testing::AssertionFailure() << "exit code " << r.exit_code << "\n" << r.output;
    if (r.reports.size() != 1) {
      return ::testing::AssertionFailure() << r.reports.size() << " reports, expected 1\n" << r.output;
    }
    const nlohmann::json& j = r.reports[0];
    auto field = [&](const char* pointer) -> const nlohmann::json& {
      static const nlohmann::json kMissing;
      const nlohmann::json::json_pointer p(pointer);
      return j.contains(p) ? j.at(p) : kMissing;
    };
    if (field("/name") != name)
      return ::testing::AssertionFailure() << "name " << field("/name") << ", expected " << name;
    if (field("/completed") != true) return ::testing::AssertionFailure() << "not completed: " << j.dump();
    const auto& items = field("/train_item/avg");
    if (!items.is_number() || !(items.get<double>() > 0.0)) {
      return ::testing::AssertionFailure() << "train_item.avg " << items << ", expected > 0";
    }
    const auto& losses = field("/epoch_loss");
    if (!losses.is_array() || losses.empty()) return ::testing::AssertionFailure() << "no epoch_loss: " << j.dump();
    for (const auto& l : losses) {
      if (!l.is_number() || !std::isfinite(l.get<double>())) {
        return ::testing::AssertionFailure() << "epoch_loss not finite: " << losses.dump();
      }
    }
    if (!field("/stall/stall_pct").is_number())
      return ::testing::AssertionFailure() << "stall: " << field("/stall").dump();
    if (!field("/metrics/parameters").is_number()) {
      return ::testing::AssertionFailure() << "metrics.parameters: " << field("/metrics").dump();
    }
    if (!field("/pipeline").is_object()) return ::testing::AssertionFailure() << "no pipeline block: " << j.dump();
    return ::testing::AssertionSuccess();
  }

  std::string write(const std::string& rel, const std::string& content) {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p.parent_path().string();
  }

  std::string words(std::mt19937& rng, int n, int vocab) {
    std::string s;
    std::uniform_int_distribution<int> pick(0, vocab - 1);
    for (int i = 0; i < n; ++i) s += "w" + std::to_string(pick(rng) * pick(rng) / vocab) + " ";
    return s;
  }

  std::unique_ptr<mlbench::testing_support::TempDir> tmp_;
  fs::path root_;
  int runs_ = 0;
};

constexpr const char* kTiny = "--repeat 3 --number 2 --warmup 1 --seed 1";

std::string idx(std::vector<std::uint32_t> dims, const std::string& data) {
  std::string s{'\0', '\0', '\x08', static_cast<char>(dims.size())};
  for (auto d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((d >> shift) & 0xff));
  }
  return s + data;
}

}  // namespace

TEST_F(SeqBenchE2E, ToyLstm) {
  ASSERT_TRUE(is_valid_run(run("toy_lstm", std::string(kTiny) + " --batch-size 2 --waves 10 --length 40"), "toy_lstm"));
}

TEST_F(SeqBenchE2E, ToyLstmSyntheticFloat64) {
  ASSERT_TRUE(
      is_valid_run(run("toy_lstm", std::string(kTiny) + " --synthetic --dtype float64 --length 20"), "toy_lstm"));
}

TEST_F(SeqBenchE2E, VaeReadsIdxFiles) {
  std::mt19937 rng(1);
  std::string pixels(100 * 784, '\0');
  for (auto& c : pixels) c = static_cast<char>(rng() % 256);
  write("mnist/train-images-idx3-ubyte", idx({100, 28, 28}, pixels));
  const auto dir = write("mnist/train-labels-idx1-ubyte", idx({100}, std::string(100, '\3')));
  auto r = run("vae", std::string(kTiny) + " --batch-size 16 --data " + dir);
  ASSERT_TRUE(is_valid_run(r, "vae"));
  EXPECT_EQ(r.reports[0]["pipeline"]["items"], 100);
  EXPECT_EQ(r.reports[0]["pipeline"]["source"], "in-memory");
  EXPECT_GT(r.reports[0]["pipeline"]["batches"].get<long>(), 0);
  // Batches built on the training thread instead: same data, no prefetch thread.
  auto sync = run("vae", std::string(kTiny) + " --batch-size 16 --prefetch 0 --data " + dir);
  ASSERT_TRUE(is_valid_run(sync, "vae"));
  EXPECT_EQ(sync.reports[0]["pipeline"]["prefetch"], 0);
}

TEST_F(SeqBenchE2E, VaeMissingDataNamesDatagenCommand) {
  auto r = run("vae", std::string(kTiny) + " --data " + (root_ / "nowhere" / "mnist-tiny").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("mlbench-datagen ensure mnist-tiny --root " + (root_ / "nowhere").string()), std::string::npos)
      << r.output;
  EXPECT_TRUE(r.reports.empty());
}

TEST_F(SeqBenchE2E, WlmGruAndLstm) {
  std::mt19937 rng(2);
  std::string text;
  for (int i = 0; i < 60; ++i) text += words(rng, 20, 200) + "\n";
  const auto dir = write("wt/train.txt", text);
  write("wt/valid.txt", words(rng, 50, 200) + "\n");
  const std::string small = " --batch-size 4 --bptt 8 --nhid 32 --data " + dir;
  auto r = run("wlm", std::string(kTiny) + small + " --emsize 32");
  ASSERT_TRUE(is_valid_run(r, "wlm"));
  EXPECT_EQ(r.reports[0]["metrics"]["precision"], "fp32");
  auto lstm = run("wlm", std::string(kTiny) + small + " --model LSTM --nlayers 1 --untied --emsize 16");
  ASSERT_TRUE(is_valid_run(lstm, "wlm"));
  // Untied: embedding and decoder each vocabulary x size, plus one LSTM(16, 32) layer and the bias.
  const long v = lstm.reports[0]["metrics"]["vocabulary"];
  EXPECT_EQ(lstm.reports[0]["metrics"]["parameters"], v * 16 + v * 32 + v + (4 * 32 * (16 + 32) + 8 * 32));
}

TEST_F(SeqBenchE2E, Wlmfp16OnCpuUsesBf16) {
  std::mt19937 rng(3);
  std::string text;
  for (int i = 0; i < 40; ++i) text += words(rng, 20, 100) + "\n";
  const auto dir = write("wt/train.txt", text);
  auto r = run("wlmfp16", std::string(kTiny) + " --no-cuda --batch-size 4 --bptt 8 --emsize 32 --nhid 32 --data " + dir);
  ASSERT_TRUE(is_valid_run(r, "wlmfp16"));
  EXPECT_EQ(r.reports[0]["metrics"]["precision"], "bf16-autocast");
  EXPECT_TRUE(r.reports[0]["metrics"].contains("cpu_native_bf16"));
}

TEST_F(SeqBenchE2E, RecomReadsRatingsCsv) {
  std::mt19937 rng(4);
  std::string csv = "userId,movieId,rating,timestamp\n";
  for (int i = 0; i < 500; ++i) csv += std::to_string(1 + rng() % 40) + "," + std::to_string(1 + rng() % 90) + ",4.0,1000\n";
  const auto dir = write("ml/ratings.csv", csv);
  auto r = run("recom", std::string(kTiny) + " --batch-size 50 --factors 8 --layers 16,8 --data " + dir);
  ASSERT_TRUE(is_valid_run(r, "recom"));
  EXPECT_EQ(r.reports[0]["pipeline"]["items"], 500);
  EXPECT_EQ(r.reports[0]["pipeline"]["source"], "in-memory");
  EXPECT_GT(r.reports[0]["pipeline"]["batches"].get<long>(), 0);
}

TEST_F(SeqBenchE2E, RecomMalformedLineFailsWithFileAndLine) {
  const auto dir = write("ml/ratings.csv", "userId,movieId,rating,timestamp\n1,2,3.5,10\n1;2;3.5;10\n");
  auto r = run("recom", std::string(kTiny) + " --batch-size 50 --data " + dir);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("ratings.csv:3: expected 4 comma-separated fields"), std::string::npos) << r.output;
  ASSERT_EQ(r.reports.size(), 1u);
  EXPECT_EQ(r.reports[0]["completed"], false);
  EXPECT_NE(r.report_names[0].find(".FAIL."), std::string::npos);
}

TEST_F(SeqBenchE2E, TranslatorReadsParallelCorpus) {
  std::mt19937 rng(5);
  std::string en, de;
  for (int i = 0; i < 80; ++i) {
    en += words(rng, 3 + static_cast<int>(rng() % 12), 60) + "\n";
    de += words(rng, 3 + static_cast<int>(rng() % 12), 60) + "\n";
  }
  write("wmt/train.en", en);
  const auto dir = write("wmt/train.de", de);
  auto r = run("translator",
               std::string(kTiny) + " --batch-size 4 --hidden-size 16 --num-layers 3 --max-length 10 --data " + dir);
  ASSERT_TRUE(is_valid_run(r, "translator"));
  EXPECT_EQ(r.reports[0]["metrics"]["num_layers"], 3);
  EXPECT_EQ(r.reports[0]["pipeline"]["items"], 80);
  EXPECT_EQ(r.reports[0]["pipeline"]["source"], "in-memory");
  EXPECT_GT(r.reports[0]["pipeline"]["batches"].get<long>(), 0);
}

TEST_F(SeqBenchE2E, TranslatorSynthetic) {
  ASSERT_TRUE(is_valid_run(
      run("translator",
          std::string(kTiny) + " --synthetic --batch-size 2 --hidden-size 8 --vocab-size 50 --max-length 6"),
      "translator"));
}

TEST_F(SeqBenchE2E, CartCountsEnvironmentSteps) {
  auto r = run("cart", "--repeat 3 --number 150 --warmup 1 --seed 2 --max-steps 60");
  ASSERT_TRUE(is_valid_run(r, "cart"));
  const auto& m = r.reports[0]["metrics"];
  EXPECT_GE(m["episodes"].get<long>(), 450 / 60);
  EXPECT_LE(m["mean_episode_length"].get<double>(), 60.0);
  EXPECT_EQ(r.reports[0]["iterations"], 450);
}

TEST_F(SeqBenchE2E, CartRefusesCuda) {
  auto r = run("cart", "--cuda --repeat 1 --number 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("CPU only"), std::string::npos) << r.output;
}
