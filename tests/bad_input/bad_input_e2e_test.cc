// The real commands on bad flags, bad values and a full disk (docs/reliability.md,
// defects 13-21): each says, in one line, which input is wrong and why.
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using mlbench::testing_support::CommandResult;
using mlbench::testing_support::run_command;
using mlbench::testing_support::TempDir;

namespace {

std::string bin(const std::string& name) {
  return std::string(MLBENCH_BIN_DIR) + "/" + name;
}

bool has(const CommandResult& r, const std::string& text) {
  return r.output.find(text) != std::string::npos;
}

// CLI11's range checks printed the largest double in full (309 digits).
bool has_long_number(const std::string& text) {
  int run = 0;
  for (char c : text) {
    run = std::isdigit(static_cast<unsigned char>(c)) ? run + 1 : 0;
    if (run > 40) return true;
  }
  return false;
}

TEST(BadInputE2E, RunnerTimeoutZeroOrTextSaysWhatIsWrong) {
  CommandResult r = run_command(bin("mlbench-run") + " --timeout 0 --dry 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r, "mlbench-run: error: --timeout must be > 0 (got 0)")) << r.output;
  EXPECT_FALSE(has_long_number(r.output)) << r.output;
  r = run_command(bin("mlbench-run") + " --timeout abc --dry 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r, "--timeout must be a number (got abc)")) << r.output;
  r = run_command(bin("mlbench-run") + " --slots 0 --dry 2>&1");
  EXPECT_TRUE(has(r, "--slots must be >= 1 (got 0)")) << r.output;
}

TEST(BadInputE2E, DatagenClassesZeroSaysWhatIsWrong) {
  TempDir tmp("classes");
  const CommandResult r =
      run_command(bin("mlbench-datagen") + " fake-imagenet --classes 0 --out " + (tmp.path() / "d").string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r, "mlbench-datagen: error: --classes must be >= 1 (got 0)")) << r.output;
  EXPECT_FALSE(has_long_number(r.output)) << r.output;
  EXPECT_FALSE(fs::exists(tmp.path() / "d"));
}

TEST(BadInputE2E, DatagenUnknownOptionOrRecipeListsWhatExists) {
  CommandResult r = run_command(bin("mlbench-datagen") + " --bogus 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r, "unknown option --bogus")) << r.output;
  EXPECT_TRUE(has(r, "recipes: fake-imagenet, ")) << r.output;
  EXPECT_TRUE(has(r, "commands: ensure, list")) << r.output;
  r = run_command(bin("mlbench-datagen") + " bogus-recipe --out /tmp/x 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r, "unknown recipe or command 'bogus-recipe' (recipes: fake-imagenet, ")) << r.output;
  EXPECT_FALSE(has(r, "A subcommand is required")) << r.output;
}

TEST(BadInputE2E, StallRefusesATimeoutBelowOneSecond) {
  for (const std::string value : {"0", "-5"}) {
    const CommandResult r = run_command(bin("mlbench-stall") + " --bench nothing --timeout=" + value + " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_TRUE(has(r, "mlbench-stall: error: --timeout must be >= 1 (got " + value + ")")) << r.output;
  }
}

TEST(BadInputE2E, StallRefusesPeerRunsOfOneNode) {
  CommandResult r = run_command(bin("mlbench-stall") + " --bench nothing --peer-nodes 1 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r, "mlbench-stall: error: --peer-nodes 1: peers need two nodes or more (0 turns the peer runs off)"))
      << r.output;
  r = run_command(bin("mlbench-stall") + " --bench nothing --peer-nodes 17 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r, "mlbench-stall: error: --peer-nodes must be <= 16 (got 17)")) << r.output;
}

// A reports tree with one run holding one report of suite "s".
fs::path one_run_tree(const fs::path& dir) {
  fs::create_directories(dir / "R0");
  std::ofstream(dir / "R0" / "s.b.R0.D0.20260101T000000Z.json")
      << R"({"name": "b", "suite": "s", "completed": true, "train_item": {"avg": 5.0}})";
  return dir;
}

TEST(BadInputE2E, ReportNamesCompareForAMissingCompareTree) {
  TempDir tmp("compare");
  const fs::path tree = one_run_tree(tmp.path() / "tree");
  const std::string base = bin("mlbench-report") + " --name s --min-runs 1 --reports " + tree.string();
  CommandResult r = run_command(base + " --compare /nonexistent-mlbench 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r, "mlbench-report: error: --compare /nonexistent-mlbench: not a directory")) << r.output;
  fs::create_directories(tmp.path() / "empty");
  r = run_command(base + " --compare " + (tmp.path() / "empty").string() + " 2>&1");
  EXPECT_TRUE(has(r, "--compare " + (tmp.path() / "empty").string() + ": no run directories")) << r.output;
  r = run_command(base + " --stall /nonexistent-mlbench 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r, "--stall /nonexistent-mlbench: no such file or directory")) << r.output;
}

TEST(BadInputE2E, ReportSaysWhyASpeedOfZeroFails) {
  TempDir tmp("zero");
  fs::create_directories(tmp.path() / "R0");
  std::ofstream(tmp.path() / "R0" / "s.b.R0.D0.20260101T000000Z.json")
      << R"({"name": "b", "suite": "s", "completed": true, "train_item": {"avg": 0}})";
  const CommandResult r =
      run_command(bin("mlbench-report") + " --name s --min-runs 1 --reports " + tmp.path().string() + " 2>&1");
  EXPECT_TRUE(has(r, "train_item.avg is 0 (not a positive number)")) << r.output;
}

// `--suite ../x` once wrote the reports outside the run's folder (and showed the finished
// instance as FAILED (no report)); a newline in it reached the Slurm batch script.
TEST(BadInputE2E, RunnerRefusesASuiteNameThatIsNoName) {
  TempDir tmp("suite");
  const fs::path jobs = tmp.path() / "jobs.json";
  std::ofstream(jobs) << R"([{"name": "ok", "cmd": ")" << FAKEBENCH << R"(", "args": {}, "cgroup": "all"}])";
  for (const std::string suite : {"../x", "a/b", "..", "s\ntouch x"}) {
    const CommandResult r = run_command(bin("mlbench-run") + " --no-cgroup --jobs " + jobs.string() + " --outdir " +
                                        (tmp.path() / "out").string() + " --suite '" + suite + "' 2>&1");
    EXPECT_EQ(r.exit_code, 2) << suite << ": " << r.output;
    EXPECT_TRUE(has(r, "mlbench-run: error: --suite")) << r.output;
  }
  EXPECT_FALSE(fs::exists(tmp.path() / "x")) << "a report outside the run's folder";
  // A newline in the name: one error line, the newline written as \x0a.
  const CommandResult r = run_command(bin("mlbench-run") + " --no-cgroup --jobs " + jobs.string() + " --outdir " +
                                      (tmp.path() / "out2").string() + " --suite 'a\nb' 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_TRUE(has(r, "'a\\x0ab'")) << r.output;
}

TEST(BadInputE2E, RunnerPrintsTheBenchmarksReasonForANanLoss) {
  TempDir tmp("nan");
  const fs::path jobs = tmp.path() / "jobs.json";
  std::ofstream(jobs) << R"([{"name": "nan", "cmd": ")" << FAKEBENCH << R"(", "args": {"--nan-loss": ""},
                             "cgroup": "all"}])";
  const CommandResult r = run_command(bin("mlbench-run") + " --no-cgroup --jobs " + jobs.string() + " --outdir " +
                                      (tmp.path() / "out").string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r, "FAILED (exit 1: loss is nan at repeat 0 iteration 0)")) << r.output;
  // The FAIL report keeps the benchmark's own reason apart as well.
  bool found = false;
  for (const auto& e : fs::directory_iterator(tmp.path() / "out")) {
    if (e.path().filename().string().find(".FAIL.") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(std::ifstream(e.path()));
    EXPECT_EQ(j.value("benchmark_reason", ""), "loss is nan at repeat 0 iteration 0") << j.dump();
    found = true;
  }
  EXPECT_TRUE(found);
}

TEST(BadInputE2E, DatagenSaysWhenItKeepsADatasetOfAnotherSeed) {
  TempDir tmp("keep");
  const std::string out = (tmp.path() / "mnist").string();
  CommandResult r = run_command(bin("mlbench-datagen") + " mnist --size tiny -q --out " + out + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(bin("mlbench-datagen") + " mnist --size tiny -q --seed 7 --out " + out + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "mlbench-datagen: warning: " + out + " was kept as it is: it holds seed 0 where seed 7 was asked"))
      << r.output;
  r = run_command(bin("mlbench-datagen") + " mnist --size tiny -q --out " + out + " 2>&1");
  EXPECT_FALSE(has(r, "warning")) << r.output;  // the same dataset: nothing to say
}

// A small tmpfs, mounted for the test and unmounted after it.
class SmallDisk {
 public:
  SmallDisk(const fs::path& where, const std::string& size) : where_(where) {
    fs::create_directories(where_);
    const std::string options = "size=" + size;
    if (::mount("tmpfs", where_.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      why_ = std::string("mount tmpfs: ") + std::strerror(errno);
    }
  }
  ~SmallDisk() {
    if (why_.empty()) ::umount2(where_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return why_.empty(); }
  const std::string& why() const { return why_; }

 private:
  fs::path where_;
  std::string why_;
};

TEST(BadInputE2E, DatagenOnAFullDiskNamesTheFileAndTheCause) {
  TempDir tmp("full");
  SmallDisk disk(tmp.path() / "disk", "256k");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a small tmpfs here (" << disk.why() << "; needs root)";
  const fs::path out = tmp.path() / "disk" / "fi";
  const CommandResult r =
      run_command(bin("mlbench-datagen") + " fake-imagenet --size tiny -q -j 1 --out " + out.string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r, "mlbench-datagen: error: ")) << r.output;
  EXPECT_TRUE(has(r, "No space left on device")) << r.output;
  EXPECT_TRUE(has(r, (tmp.path() / "disk").string())) << r.output;  // names the file
  // Nothing half-made stays: no dataset folder, no partial folder.
  EXPECT_TRUE(fs::is_empty(tmp.path() / "disk")) << r.output;
}

}  // namespace
