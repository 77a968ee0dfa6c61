// End-to-end: the real mlbench-report binary warns about the BLAS the runs used and
// writes a targets file (--write-targets) that a later report reads with no NaN row.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "report_tree_writer.h"

namespace mlbench::report::testing {
namespace {
namespace fs = std::filesystem;

const std::string kBin = MLBENCH_REPORT_BIN;

// A fake report with machine.blas set (omitted when `blas` is empty: an older report).
void write_with_blas(const fs::path& root, const FakeInstance& i, const std::string& blas) {
  const fs::path file = write_fake_report(root, i);
  nlohmann::json j;
  {
    std::ifstream in(file);
    j = nlohmann::json::parse(in);
  }
  if (!blas.empty()) j["machine"] = {{"blas", {{"name", blas}, {"threads", 2}}}};
  core::write_json_atomic(file, j);
}

// wlm and vae, 4 runs each; run values wlm 30 34 36 40 -> median 35, vae 1210 1250 1290 1330 -> 1270.
void build_tree(const fs::path& root, const std::string& blas) {
  const double wlm[4] = {30, 34, 36, 40};
  for (int run = 0; run < 4; ++run) {
    FakeInstance a;
    a.name = "wlm";
    a.run = run;
    a.items_per_s = wlm[run];
    write_with_blas(root, a, blas);
    FakeInstance b;
    b.name = "vae";
    b.run = run;
    b.items_per_s = 1210 + 40 * run;
    write_with_blas(root, b, blas);
  }
}

TEST(ReportBlasE2E, WritesTargetsThatALaterReportReadsWithoutNaN) {
  TempDir dir("report_targets");
  build_tree(dir.path() / "runs", "openblas-openmp");
  const fs::path targets = dir.path() / "cpu.json";
  const auto r = run_command(kBin + " --reports " + (dir.path() / "runs").string() + " --name fast --write-targets " +
                             targets.string() + " --targets-note 'test VM' --color never");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Targets: " + targets.string()), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("reference BLAS"), std::string::npos) << r.output;
  const nlohmann::json j = nlohmann::json::parse(read_text(targets));
  EXPECT_EQ(j["model"], "CPU");
  EXPECT_EQ(j["benchmarks"]["wlm"], 35);
  EXPECT_EQ(j["benchmarks"]["vae"], 1200);  // median 1270, rounded down to 2 digits
  const std::string note = j["note"];
  EXPECT_EQ(note.rfind("test VM; written by mlbench-report --write-targets", 0), 0u) << note;
  EXPECT_NE(note.find("4 runs of suite 'fast', BLAS: openblas-openmp"), std::string::npos) << note;

  const auto again = run_command(kBin + " --reports " + (dir.path() / "runs").string() + " --name fast --targets " +
                                 targets.string() + " --color never --json " + (dir.path() / "out.json").string());
  ASSERT_EQ(again.status, 0) << again.output;
  const nlohmann::json out = nlohmann::json::parse(read_text(dir.path() / "out.json"));
  ASSERT_EQ(out["benchmarks"].size(), 2u) << out.dump(2);
  for (const auto& b : out["benchmarks"]) {
    EXPECT_TRUE(b["target"].is_number()) << b.dump();
    EXPECT_TRUE(b["diff"].is_number()) << b.dump();
  }
}

TEST(ReportBlasE2E, WarnsAboutTheReferenceBlasAndAComparisonAcrossLibraries) {
  TempDir dir("report_blas");
  build_tree(dir.path() / "before", "reference");
  build_tree(dir.path() / "after", "openblas-openmp");
  const auto r = run_command(kBin + " --reports " + (dir.path() / "before").string() + " --name fast --color never");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: vae, wlm ran on the reference BLAS"), std::string::npos) << r.output;
  const auto c = run_command(kBin + " --reports " + (dir.path() / "after").string() + " --name fast --compare " +
                             (dir.path() / "before").string() + " --color never");
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_NE(c.output.find("used another BLAS: reference (R0, R1, R2, R3) there, openblas-openmp (R0, R1, R2, R3) here"),
            std::string::npos)
      << c.output;
}

TEST(ReportBlasE2E, OlderReportsWithoutTheFieldStillRead) {
  TempDir dir("report_old");
  build_tree(dir.path() / "runs", "");
  const auto r = run_command(kBin + " --reports " + (dir.path() / "runs").string() + " --name fast --color never");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("BLAS"), std::string::npos) << r.output;
}

TEST(ReportBlasE2E, WriteTargetsWithNoRunValueIsOneClearError) {
  TempDir dir("report_targets_bad");
  FakeInstance i;
  i.name = "wlm";
  i.completed = false;
  write_fake_report(dir.path() / "runs", i);
  const auto r = run_command(kBin + " --reports " + (dir.path() / "runs").string() +
                             " --name fast --min-runs 1 --write-targets " + (dir.path() / "t.json").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("mlbench-report: error: --write-targets: no benchmark has a run value"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "t.json"));
}

}  // namespace
}  // namespace mlbench::report::testing
