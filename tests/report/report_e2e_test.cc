// End-to-end tests of the real mlbench-report binary on generated reports
// trees: failures (FAIL file, completed false, NaN loss), another suite's
// reports, non-report files, too few runs, targets, stall analyses, CSV, JSON,
// HTML and --compare.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "report_tree_writer.h"

namespace mlbench::report::testing {
namespace {
namespace fs = std::filesystem;

const std::string kBin = MLBENCH_REPORT_BIN;

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

// toy_reg: 2 slots x 5 runs, run values 1010 1050 990 1100 1030 -> result 1030, sd 42.19.
// loader: 1 slot; R2 NaN loss, R3 a FAIL report -> values 100 110 90 -> n = 3, result 100, sd 10.
// vae: suite "other" -> ignored. Plus machine.json (not a report) and a corrupt report of the suite.
void build_tree(const fs::path& root, double toy_scale = 1.0) {
  const double toy[5][2] = {{1000, 1020}, {1040, 1060}, {980, 1000}, {1100, 1100}, {1030, 1030}};
  const double loader[5] = {100, 110, 999, 999, 90};
  for (int run = 0; run < 5; ++run) {
    for (int slot = 0; slot < 2; ++slot) {
      FakeInstance i;
      i.name = "toy_reg";
      i.run = run;
      i.slot = slot;
      i.items_per_s = toy[run][slot] * toy_scale;
      i.stall_pct = 10.0;
      write_fake_report(root, i);
    }
    FakeInstance l;
    l.name = "loader";
    l.run = run;
    l.items_per_s = loader[run];
    l.stall_pct = 30.0;
    l.nan_loss = run == 2;
    l.fail_file = run == 3;
    l.completed = run != 3;
    write_fake_report(root, l);
    FakeInstance other;
    other.suite = "other";
    other.name = "vae";
    other.run = run;
    write_fake_report(root, other);
    write(root / ("R" + std::to_string(run)) / "machine.json", R"({"cpu": "test"})");
  }
}

fs::path write_targets(const fs::path& dir) {
  const fs::path file = dir / "targets" / "testgpu.json";
  write(file,
        R"({"model": "TestGPU", "benchmarks": {"toy_reg": 1000, "loader": {"target": 100}, "missing_bench": 10}})");
  return file;
}

CommandResult report(const std::string& args) {
  return run_command(kBin + " " + args);
}

TEST(ReportE2E, ConsoleCsvJsonOnATreeWithFailures) {
  TempDir tmp;
  const fs::path tree = tmp.path() / "out";
  build_tree(tree);
  write(tree / "R1" / "fast.toy_reg.R1.D9.20260101-000000-000000.json", "{ truncated");
  const fs::path targets = write_targets(tmp.path());
  const CommandResult r =
      report("--reports " + tree.string() + " --name fast --targets " + targets.string() + " --csv " +
             (tmp.path() / "r.csv").string() + " --json " + (tmp.path() / "r.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string& out = r.output;
  EXPECT_NE(out.find("Suite fast | 5 runs (R0 R1 R2 R3 R4)"), std::string::npos) << out;
  // The Mila table (pandas layout: each float column with the fewest decimals, up to 6, that show it).
  EXPECT_NE(out.find("               target  result         sd       sd%  diff  n  fail  stall%\n"
                     "bench                                                                    \n"),
            std::string::npos)
      << out;
  // The corrupt toy_reg report counts as a failure of toy_reg in R1.
  EXPECT_NE(out.find("toy_reg        1000.0  1030.0  42.190046  0.040961  0.03  5     1   10.00\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("loader          100.0   100.0  10.000000  0.100000  0.00  3     2   30.00\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("missing_bench    10.0     NaN        NaN       NaN   NaN  0     0     NaN\n"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("vae"), std::string::npos) << "another suite's bench is shown:\n" << out;
  EXPECT_NE(out.find("Bench Passes             :           | False\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Deviation Quantile (80%) : +8.8192 % | False |\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Performance              : +1.5000 % | True\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Without 4 runs of results: loader, missing_bench"), std::string::npos) << out;
  EXPECT_NE(out.find("loader: R2/D0: NaN in batch_loss"), std::string::npos) << out;
  EXPECT_NE(out.find("loader: R3/D0: loss is NaN"), std::string::npos) << out;
  EXPECT_NE(out.find("toy_reg: R1/D9: unreadable report"), std::string::npos) << out;
  EXPECT_NE(out.find("Ignored: 5 report(s) of other suites, 1 unreadable file(s)"), std::string::npos) << out;
  EXPECT_EQ(out.find('\033'), std::string::npos) << "colour codes although stdout is not a terminal";

  const std::string csv = read_text(tmp.path() / "r.csv");
  EXPECT_NE(csv.find(",run_R0,run_R1,run_R2,run_R3,run_R4\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\ntoy_reg,1000,1030,42.190046219457976,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",1010,1050,990,1100,1030\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nloader,100,100,10,0.1,0,3,2,5,30,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",100,110,,,90\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("bench_passes,,False\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("performance_pct,1.50000000000000"), std::string::npos) << csv;

  const nlohmann::json j = nlohmann::json::parse(read_text(tmp.path() / "r.json"));
  ASSERT_EQ(j["benchmarks"].size(), 3u);
  const nlohmann::json& toy = j["benchmarks"][2];
  EXPECT_EQ(toy["bench"], "toy_reg");
  EXPECT_DOUBLE_EQ(toy["result"].get<double>(), 1030.0);
  EXPECT_NEAR(toy["sd"].get<double>(), 42.190046219457976, 1e-9);
  EXPECT_NEAR(toy["diff"].get<double>(), 0.03, 1e-12);
  EXPECT_EQ(toy["n"], 5);
  EXPECT_EQ(toy["failures"], 1);
  EXPECT_DOUBLE_EQ(toy["runs"][1]["items_per_s"].get<double>(), 1050.0);
  EXPECT_EQ(toy["runs"][1]["instances"], 3);
  const nlohmann::json& loader = j["benchmarks"][0];
  EXPECT_EQ(loader["bench"], "loader");
  EXPECT_EQ(loader["n"], 3);
  EXPECT_FALSE(loader["enough_runs"].get<bool>());
  EXPECT_TRUE(loader["runs"][2]["items_per_s"].is_null());
  EXPECT_TRUE(j["benchmarks"][1]["result"].is_null());
  EXPECT_FALSE(j["statistics"]["bench_passes"]["pass"].get<bool>());
  EXPECT_NEAR(j["statistics"]["deviation_quantile_80"]["value_pct"].get<double>(), 8.819224196, 1e-6);
  EXPECT_NEAR(j["statistics"]["performance"]["value_pct"].get<double>(), 1.5, 1e-9);
  EXPECT_EQ(j["statistics"]["score"]["failed_instances"], 3);
  EXPECT_EQ(j["statistics"]["score"]["total_instances"], 16);
  EXPECT_EQ(j["ignored"]["other_suite"], 5);
  EXPECT_EQ(j["ignored"]["not_reports"], 5);
}

// Fewer runs than --min-runs (./run.sh --repeat-suite 3) show what they can, with a note saying
// what needs more; no run at all, and targets from too few, are one clear error.
TEST(ReportE2E, TooFewRunsShowWhatTheyCanWithANote) {
  TempDir tmp;
  const fs::path tree = tmp.path() / "out";
  build_tree(tree);
  fs::remove_all(tree / "R3");
  fs::remove_all(tree / "R4");
  const CommandResult r = report("--reports " + tree.string() + " --name fast");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("3 runs: sd and sd% need at least 2 runs, and the Mila rules compare on 4 or more "
                          "(mlbench-run --repeat-suite 4)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("toy_reg"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Without 4 runs of results"), std::string::npos) << "3 runs give every result they can";
  const CommandResult lowered = report("--reports " + tree.string() + " --name fast --min-runs 3");
  EXPECT_EQ(lowered.status, 0) << lowered.output;
  const CommandResult targets =
      report("--reports " + tree.string() + " --name fast --write-targets " + (tmp.path() / "t.json").string());
  EXPECT_EQ(targets.status, 1) << targets.output;
  EXPECT_NE(targets.output.find("--write-targets: 3 run(s) in " + tree.string() +
                                "; targets are made from at least 4 (--min-runs lowers it)"),
            std::string::npos)
      << targets.output;
  EXPECT_FALSE(fs::exists(tmp.path() / "t.json"));
  // A suite with no reports at all: 0 runs found.
  const CommandResult none = report("--reports " + tree.string() + " --name nosuchsuite");
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.output.find("found 0 run(s)"), std::string::npos) << none.output;
}

TEST(ReportE2E, MilaOutputDirectoriesAndGpuModelLookup) {
  TempDir tmp;
  for (int run = 0; run < 4; ++run) {
    FakeInstance i;
    i.run = run;
    i.items_per_s = 300000.0 + run * 1000.0;
    write_fake_report(tmp.path() / "out", i, "output" + std::to_string(run));
  }
  const std::string dirs = (fs::path(MLBENCH_SOURCE_DIR) / "configs" / "targets").string();
  const CommandResult r =
      report("--reports " + (tmp.path() / "out").string() + " --name fast --gpu-model rTx --targets-dir " + dirs);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("4 runs (output0 output1 output2 output3) | targets: RTX"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("toy_reg"), std::string::npos);
  EXPECT_NE(r.output.find("Bench Passes             :           | False"), std::string::npos) << r.output;
  const CommandResult bad = report("--reports " + (tmp.path() / "out").string() +
                                   " --name fast --gpu-model H9000 "
                                   "--targets-dir " +
                                   dirs);
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find("--gpu-model H9000: no targets file for this model"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("rtx"), std::string::npos) << bad.output;
}

TEST(ReportE2E, BadInputGivesOneLineAndNonZeroExit) {
  TempDir tmp;
  CommandResult r = report("--reports " + (tmp.path() / "nope").string() + " --name fast");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "mlbench-report: error: --reports " + (tmp.path() / "nope").string() + ": not a directory\n");
  r = report("--reports " + tmp.path().string() + " --name fast");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("no run directories"), std::string::npos) << r.output;
  r = report("--reports " + tmp.path().string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--name is required"), std::string::npos) << r.output;
  write(tmp.path() / "t.json", R"({"benchmarks": {"x": "fast"}})");
  build_tree(tmp.path() / "out");
  r = report("--reports " + (tmp.path() / "out").string() + " --name fast --targets " +
             (tmp.path() / "t.json").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("benchmarks.x must be a number or an object"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_EQ(report("--help").status, 0);
}

TEST(ReportE2E, StallSelfCheckIsCarriedToJsonAndHtml) {
  TempDir tmp;
  const fs::path tree = tmp.path() / "out";
  build_tree(tree);
  write(tree / "stall" / "loader" / "stall.json",
        R"({"bench": "loader", "split": {"compute_pct": 40.0, "prep_pct": 35.0, "fetch_pct": 25.0},
            "self_check": {"passed": false, "max_error_pct": 20.6, "threshold_pct": 5.0, "points": [],
                           "cause": "serial workers", "text": "self-check failed: 50% & 75% off"}})");
  write(tree / "stall" / "loader" / "split.svg",
        R"(<svg xmlns="http://www.w3.org/2000/svg"><rect width="5" height="5"/></svg>)");
  const CommandResult r = report("--reports " + tree.string() + " --name fast --min-runs 3 --html " +
                                 (tmp.path() / "r.html").string() + " --json " + (tmp.path() / "r.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(read_text(tmp.path() / "r.json"));
  EXPECT_EQ(j["benchmarks"][0]["stall_analysis"]["self_check"]["passed"], false);
  EXPECT_EQ(j["benchmarks"][0]["stall_analysis"]["self_check"]["cause"], "serial workers");
  EXPECT_NE(read_text(tmp.path() / "r.html").find("<p class=\"note\">self-check failed: 50% &amp; 75% off</p>"),
            std::string::npos);
}

TEST(ReportE2E, StallAnalysisAddsFetchPrepColumnsAndCharts) {
  TempDir tmp;
  const fs::path tree = tmp.path() / "out";
  build_tree(tree);
  write(tree / "stall" / "loader" / "stall.json",
        R"({"bench": "loader", "split": {"compute_pct": 40.0, "prep_pct": 35.0, "fetch_pct": 25.0},
            "rates": {"G": 900, "P": 500, "F_obs": 360, "C": 2000, "S": 400}})");
  write(tree / "stall" / "loader" / "split.svg",
        R"(<svg xmlns="http://www.w3.org/2000/svg"><rect width="5" height="5"/></svg>)");
  const CommandResult r = report("--reports " + tree.string() + " --name fast --min-runs 3 --html " +
                                 (tmp.path() / "r.html").string() + " --json " + (tmp.path() / "r.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("stall%  fetch%  prep%"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("30.00   25.00  35.00"), std::string::npos) << r.output;
  const nlohmann::json j = nlohmann::json::parse(read_text(tmp.path() / "r.json"));
  EXPECT_DOUBLE_EQ(j["benchmarks"][0]["stall_analysis"]["fetch_pct"].get<double>(), 25.0);
  EXPECT_TRUE(j["benchmarks"][0]["stall_analysis"]["has_split_svg"].get<bool>());
  EXPECT_TRUE(j["benchmarks"][0]["stall_analysis"]["self_check"].is_null()) << "older stall.json: no self-check";
  EXPECT_TRUE(j["benchmarks"][1]["stall_analysis"].is_null());
  const std::string html = read_text(tmp.path() / "r.html");
  EXPECT_NE(html.find("data-bench=\"loader\" data-source=\"mlbench-stall\""), std::string::npos);
  EXPECT_NE(html.find("data-bench=\"toy_reg\" data-source=\"reports\""), std::string::npos);
  EXPECT_NE(html.find("alt=\"split chart of loader\" src=\"data:image/svg+xml;base64,"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // no links but the SVG namespace

  // The same analysis found through --stall when it lies outside the reports tree.
  fs::rename(tree / "stall", tmp.path() / "analyses");
  const CommandResult flag =
      report("--reports " + tree.string() + " --name fast --min-runs 3 --stall " + (tmp.path() / "analyses").string());
  ASSERT_EQ(flag.status, 0) << flag.output;
  EXPECT_NE(flag.output.find("30.00   25.00  35.00"), std::string::npos) << flag.output;
  const CommandResult none = report("--reports " + tree.string() + " --name fast --min-runs 3");
  EXPECT_EQ(none.output.find("fetch%"), std::string::npos) << none.output;
  const CommandResult missing =
      report("--reports " + tree.string() + " --name fast --min-runs 3 --stall " + (tmp.path() / "nope").string());
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("--stall " + (tmp.path() / "nope").string() + ": no such file or directory"),
            std::string::npos)
      << missing.output;
}

// What mlbench-stall told its user (stall.json schema 13: the verdict, the remedy or why none, the
// advice) reaches the HTML and JSON reports as the console said it.
TEST(ReportE2E, TheStallAnalysisAdviceReachesTheHtmlAndJson) {
  TempDir tmp;
  const fs::path tree = tmp.path() / "out";
  build_tree(tree);
  write(tree / "stall" / "loader" / "stall.json",
        R"json({"schema_version": 13, "bench": "loader", "split": {"compute_pct": 25.0, "prep_pct": 25.0, "fetch_pct": 50.0},
            "recommendation": {"verdict": "fetch-bound: more DRAM helps up to 53% cached, more CPUs do not help",
                               "remedy_text": "OS page cache helps most: x1.90 (3.1 GB of RAM <free> ...)",
                               "advice": ["OS page cache: 3.1 GB of RAM free for the OS page cache (x1.90)",
                                          "an alternative to the script's loader: mlbench's own"]}})json");
  write(tree / "stall" / "loader" / "split.svg",
        R"(<svg xmlns="http://www.w3.org/2000/svg"><rect width="5" height="5"/></svg>)");
  const CommandResult r = report("--reports " + tree.string() + " --name fast --min-runs 3 --html " +
                                 (tmp.path() / "r.html").string() + " --json " + (tmp.path() / "r.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(read_text(tmp.path() / "r.json"));
  const auto& a = j["benchmarks"][0]["stall_analysis"];
  EXPECT_EQ(a["verdict"], "fetch-bound: more DRAM helps up to 53% cached, more CPUs do not help");
  EXPECT_EQ(a["advice"].size(), 2u);
  const std::string html = read_text(tmp.path() / "r.html");
  EXPECT_NE(html.find("<li>verdict: fetch-bound: more DRAM helps up to 53% cached"), std::string::npos);
  EXPECT_NE(html.find("<li>remedy: OS page cache helps most: x1.90 (3.1 GB of RAM &lt;free&gt; ...)</li>"),
            std::string::npos);
  EXPECT_NE(html.find("<li>advice: an alternative to the script&#39;s loader: mlbench&#39;s own</li>"),
            std::string::npos)
      << html.substr(html.find("advice"), 300);
}

// A job of several ranks (stall.json's ranks[] and job, docs/stall.md "Distributed jobs"): the
// HTML shows the ranks side by side, a row and a stacked bar each, with the straggler named; a
// rank without a split (older results) shows its data wait unsplit.
TEST(ReportE2E, TheRanksOfADistributedJobAreShownSideBySideWithTheStragglerNamed) {
  TempDir tmp;
  const fs::path tree = tmp.path() / "out";
  build_tree(tree);
  write(tree / "stall" / "loader" / "stall.json",
        R"json({"schema_version": 14, "bench": "loader", "split": {"compute_pct": 2.0, "prep_pct": 96.0, "fetch_pct": 2.0},
            "ranks": [{"rank": 0, "host": "vm", "rate": 47.8, "wait_pct": 0.3, "sync_pct": 98.8, "compute_pct": 1.0,
                       "split": {"compute_pct": 1.0, "prep_pct": 0.2, "fetch_pct": 0.0, "sync_pct": 98.8},
                       "cause": null, "late_steps": 0},
                      {"rank": 1, "host": "vm", "rate": 47.8, "wait_pct": 97.3, "sync_pct": 1.3, "compute_pct": 1.4,
                       "split": {"compute_pct": 1.4, "prep_pct": 97.3, "fetch_pct": 0.0, "sync_pct": 1.3},
                       "cause": "prep", "late_steps": 10},
                      {"rank": 2, "host": "vm2", "rate": 47.8, "wait_pct": 5.0, "sync_pct": 90.0, "compute_pct": 5.0,
                       "split": null, "cause": null, "late_steps": null}],
            "job": {"run": "cold", "ranks": 3, "straggler": 1, "balanced": false, "cause": "prep", "step_ms": 83.7,
                    "steps": 10, "split": {"compute_pct": 2.5, "prep_pct": 32.5, "fetch_pct": 0.0, "sync_pct": 65.0},
                    "text": "straggler: rank 1 (prep: its data wait 81.5 ms/step, 97% of the 83.7 ms step)"}})json");
  const CommandResult r = report("--reports " + tree.string() + " --name fast --min-runs 3 --html " +
                                 (tmp.path() / "r.html").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string html = read_text(tmp.path() / "r.html");
  const auto at = html.find("<h4>Ranks of the job</h4>");
  ASSERT_NE(at, std::string::npos) << "no split.svg nor whatif.svg: the ranks alone make the section";
  EXPECT_NE(html.find("<strong>straggler: rank 1 (prep: its data wait 81.5 ms/step", at), std::string::npos);
  EXPECT_NE(html.find("compute 2.5%, prep stall 32.5%, fetch stall 0.0%, sync wait 65.0% of the ranks' time", at),
            std::string::npos);
  // A row per rank, the straggler's marked, with its cause and the steps it was late.
  EXPECT_NE(html.find("<tr data-rank=\"1\" class=\"straggler\"><td>rank 1 (straggler)</td>", at), std::string::npos)
      << html.substr(at, 2000);
  EXPECT_NE(html.find("<td>prep</td><td>10 of 10</td></tr>", at), std::string::npos) << html.substr(at, 2000);
  EXPECT_NE(html.find("<tr data-rank=\"0\"><td>rank 0</td>", at), std::string::npos);
  // A stacked bar per rank: the straggler's prep stall, the others' sync wait, rank 2's unsplit wait.
  EXPECT_NE(html.find(R"(<g class="rank-bar" data-bench="loader" data-rank="1" data-straggler="1">)", at),
            std::string::npos);
  EXPECT_NE(html.find("<title>rank 1 prep stall: 97.3 %</title>", at), std::string::npos);
  EXPECT_NE(html.find("<title>rank 0 sync wait: 98.8 %</title>", at), std::string::npos);
  EXPECT_NE(html.find("<title>rank 2 data wait: 5.0 %</title>", at), std::string::npos);
  EXPECT_EQ(html.find("data-straggler", html.find("data-rank=\"2\"", html.find("rank-bar", at))), std::string::npos);
}

TEST(ReportE2E, CompareFlagsChangesBeyondTheCombinedSd) {
  TempDir tmp;
  build_tree(tmp.path() / "a", 1.2);
  build_tree(tmp.path() / "b", 1.0);
  const CommandResult r = report("--reports " + (tmp.path() / "a").string() + " --name fast --compare " +
                                 (tmp.path() / "b").string() + " --csv " + (tmp.path() / "c.csv").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Compared with " + (tmp.path() / "b").string() + " (5 runs)"), std::string::npos) << r.output;
  // toy_reg: 1236 vs 1030, sds 50.63 and 42.19 -> combined 65.9 < 206: flagged.
  EXPECT_NE(r.output.find("1236.0000"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1.2000    +20.00%  *"), std::string::npos) << r.output;
  const std::string csv = read_text(tmp.path() / "c.csv");
  EXPECT_NE(csv.find("\ntoy_reg,1236,"), std::string::npos) << csv;
  // Significant by the Mann-Whitney U test too: all 5 passes of A above all 5 of B, p = 2/252.
  EXPECT_NE(csv.find(",True,0.007936507936507936,mann-whitney-u,0.05,5,5,exact,faster,,True\n"), std::string::npos)
      << csv;
  EXPECT_NE(r.output.find("1.2000    +20.00%  *  0.0079  faster\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("two-sided Mann-Whitney U test over the per-pass values (alpha = 0.05)"), std::string::npos)
      << r.output;
  // loader is the same in both: ratio 1, not flagged; with 3 passes a side no test could say more.
  EXPECT_NE(csv.find("\nloader,100,10,100,10,1,0,14.142135623730951,False,1,mann-whitney-u,0.05,3,3,"
                     "\"exact (ties, midranks)\",no significant difference,needs >= 4 passes a side: with 3 vs 3 no p "
                     "is below 0.1,False\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(r.output.find("+0.00%     1.0000  no significant difference (needs >= 4 passes a side"), std::string::npos)
      << r.output;
}

// A benchmark whose sd% fails the 5 % rule (docs/report.md, "Unstable benchmarks") is flagged with its
// measured cause in every output, its outliers and dropped passes named, and the HTML shows each spread.
// steady: quiet passes; noisy: R1 lost 38 % of its slot to other processes (newer reports);
// tiny: reports without `stability`, observations of ~0.8 ms (train.avg).
TEST(ReportE2E, InstabilityFlagsCausesAndOutliersInEveryOutput) {
  TempDir tmp;
  const fs::path tree = tmp.path() / "out";
  const double steady[4] = {1000, 1002, 998, 1001}, noisy[4] = {1000, 600, 1010, 990},
               tiny[4] = {3.2e6, 2.0e6, 3.3e6, 3.1e6};
  for (int run = 0; run < 4; ++run) {
    const nlohmann::json stability = {{"observations", 20},
                                      {"sd_pct", 1.0},
                                      {"min_s", 0.9},
                                      {"max_s", 1.1},
                                      {"median_s", 1.0},
                                      {"trend_pct", 0.5},
                                      {"warmup_trending", false},
                                      {"short_observations", false}};
    nlohmann::json interference = {{"slot_cpus", {0}},       {"wall_s", 30.0},        {"own_cpu_s", 29.5},
                                   {"other_cpu_s", 0.3},     {"other_cpu_pct", 1.0},  {"steal_pct", 0.0},
                                   {"loadavg_start", 0.2},   {"loadavg_end", 1.1},    {"probe_before_s", 0.29},
                                   {"probe_after_s", 0.291}, {"probe_drift_pct", 0.3}};
    FakeInstance s;
    s.name = "steady";
    s.run = run;
    s.items_per_s = steady[run];
    s.extra = {{"stability", stability}, {"interference", interference}};
    write_fake_report(tree, s);
    FakeInstance n = s;
    n.name = "noisy";
    n.items_per_s = noisy[run];
    if (run == 1) n.extra["interference"]["other_cpu_pct"] = 38.2;
    write_fake_report(tree, n);
    FakeInstance t;
    t.name = "tiny";
    t.run = run;
    t.items_per_s = tiny[run];  // train.avg = 2560 / items_per_s: 0.78 to 1.28 ms
    write_fake_report(tree, t);
  }
  const CommandResult r =
      report("--reports " + tree.string() + " --name fast --csv " + (tmp.path() / "r.csv").string() + " --json " +
             (tmp.path() / "r.json").string() + " --html " + (tmp.path() / "r.html").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string& out = r.output;
  EXPECT_NE(
      out.find("Unstable (sd% above the rule; likely cause as measured, docs/report.md):\n"
               "  noisy: sd% 20.1% > 5%: other load: 38% of the slot's CPU time went to other processes in R1/D0\n"
               "  tiny: sd% 19.2% > 5%: short observations: one timed observation lasts 0.776 ms in R2/D0 "
               "(train.avg), under the 100 ms minimum\n"),
      std::string::npos)
      << out;
  EXPECT_EQ(out.find("  steady: sd%"), std::string::npos) << out;
  EXPECT_NE(out.find("  noisy: trimmed mean drops R1 (600), R2 (1010); outside R1/D0 (600)\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("  tiny: trimmed mean drops R1 (2000000), R2 (3300000); outside R1/D0 (2000000)\n"),
            std::string::npos)
      << out;

  const nlohmann::json j = nlohmann::json::parse(read_text(tmp.path() / "r.json"));
  EXPECT_EQ(j["schema_version"], 2);
  const nlohmann::json& noisy_j = j["benchmarks"][0];
  ASSERT_EQ(noisy_j["bench"], "noisy");
  EXPECT_TRUE(noisy_j["unstable"].get<bool>());
  EXPECT_EQ(noisy_j["instability"]["cause"], "other load");
  EXPECT_DOUBLE_EQ(noisy_j["instability"]["limit_pct"].get<double>(), 5.0);
  ASSERT_EQ(noisy_j["outliers"].size(), 1u);
  EXPECT_EQ(noisy_j["outliers"][0]["where"], "R1/D0");
  EXPECT_EQ(noisy_j["dropped"][0]["where"], "R1");
  EXPECT_EQ(noisy_j["dropped"][1]["where"], "R2");
  EXPECT_FALSE(j["benchmarks"][1]["unstable"].get<bool>());
  EXPECT_TRUE(j["benchmarks"][1]["instability"].is_null());
  EXPECT_EQ(j["benchmarks"][2]["instability"]["cause"], "short observations");

  const std::string csv = read_text(tmp.path() / "r.csv");
  EXPECT_NE(csv.find(",600,1010,True,other load,other load: 38% of the slot's CPU time went to other processes in "
                     "R1/D0,R1;R2,R1/D0,1000,600,1010,990\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find(",998,1002,False,,,R2;R1,,1000,1002,998,1001\n"), std::string::npos) << csv;

  const std::string html = read_text(tmp.path() / "r.html");
  EXPECT_NE(html.find("<tr class=\"unstable\"><td>noisy</td>"), std::string::npos) << html;
  EXPECT_NE(html.find(">unstable: other load</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<tr><td>steady</td>"), std::string::npos) << html;
  EXPECT_NE(html.find(">600 – 1010</td>"), std::string::npos) << html;  // the spread, not only the mean
  EXPECT_NE(html.find("<li data-bench=\"tiny\" data-cause=\"short observations\">"), std::string::npos) << html;
  EXPECT_NE(html.find("outside R1/D0 (600: below Q1 - 1.5 IQR"), std::string::npos) << html;
}

// mlbench-run's output folder without --repeat-suite is one run directory
// (no R0..); a single report file is one run too. Both are read, with one line saying
// what needs repeated passes; --name defaults to the one suite the reports hold.
TEST(ReportE2E, SingleRunDirectoryAndSingleReportFile) {
  TempDir tmp;
  const fs::path out = tmp.path() / "output";
  fs::path toy_file;
  for (int slot = 0; slot < 2; ++slot) {
    FakeInstance i;
    i.slot = slot;
    i.items_per_s = slot == 0 ? 1000.0 : 1100.0;
    toy_file = write_fake_report(tmp.path(), i, "output");
  }
  FakeInstance l;
  l.name = "loader";
  l.items_per_s = 100.0;
  write_fake_report(tmp.path(), l, "output");
  write(out / "machine.json", R"({"hostname": "h1", "cpu_model": "Test CPU", "gpus": []})");
  write(out / "summary.txt", "[ 1/ 2][  /  ] PASSED |     0.01 MIN | toy_reg\n");

  const CommandResult r = report("--reports " + out.string() + " --html " + (tmp.path() / "r.html").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Suite fast | 1 runs (output)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("toy_reg"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1050.0"), std::string::npos) << "mean over the run's two instances:\n" << r.output;
  const std::string note =
      "Note: 1 run: sd and sd% need at least 2 runs, and the Mila rules compare on 4 or more (mlbench-run "
      "--repeat-suite 4)";
  ASSERT_NE(r.output.find(note), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(note), r.output.rfind(note)) << "said once:\n" << r.output;
  EXPECT_EQ(r.output.find("error"), std::string::npos) << r.output;
  EXPECT_NE(read_text(tmp.path() / "r.html").find("Note: 1 run: sd and sd%"), std::string::npos);

  // One report file: that instance alone.
  const CommandResult one = report("--reports " + toy_file.string() + " --name fast");
  ASSERT_EQ(one.status, 0) << one.output;
  EXPECT_NE(one.output.find("1 runs (output)"), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("1100.0"), std::string::npos) << one.output;
  EXPECT_EQ(one.output.find("loader"), std::string::npos) << "only the file named:\n" << one.output;
  EXPECT_NE(one.output.find(note), std::string::npos) << one.output;

  // Two suites and no --name: which one is asked, in one line.
  FakeInstance other;
  other.suite = "other";
  write_fake_report(tmp.path(), other, "output");
  const CommandResult two = report("--reports " + out.string());
  EXPECT_EQ(two.status, 2) << two.output;
  EXPECT_NE(two.output.find("--name is required: " + out.string() + " holds reports of several suites (fast, other)"),
            std::string::npos)
      << two.output;
  EXPECT_EQ(std::count(two.output.begin(), two.output.end(), '\n'), 1) << two.output;
  const CommandResult none = report("--reports " + out.string() + " --name nosuchsuite");
  EXPECT_EQ(none.status, 1) << none.output;
  EXPECT_EQ(none.output,
            "mlbench-report: error: --reports " + out.string() + ": holds no report of suite 'nosuchsuite'\n");
}

TEST(ReportE2E, RunsOfDifferentMachinesAreGroupedAndSaidSo) {
  TempDir tmp;
  const fs::path tree = tmp.path() / "out";
  for (int run = 0; run < 4; ++run) {
    FakeInstance i;
    i.run = run;
    i.items_per_s = 1000.0 + run;
    write_fake_report(tree, i);
    write(tree / ("R" + std::to_string(run)) / "machine.json",
          run < 2 ? R"({"hostname": "alpha", "cpu_model": "CPU A", "gpus": []})"
                  : R"({"hostname": "beta", "cpu_model": "CPU B", "gpus": ["NVIDIA GeForce RTX 3090"]})");
  }
  const CommandResult r = report("--reports " + tree.string() + " --name fast");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Note: runs from 2 machines grouped together (alpha (CPU A): R0 R1; beta (NVIDIA GeForce "
                          "RTX 3090): R2 R3)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("Note: 4 runs"), std::string::npos) << "4 runs need no repeated-passes note:\n" << r.output;
  // One machine: nothing to say.
  write(tree / "R2" / "machine.json", R"({"hostname": "alpha", "cpu_model": "CPU A", "gpus": []})");
  write(tree / "R3" / "machine.json", R"({"hostname": "alpha", "cpu_model": "CPU A", "gpus": []})");
  const CommandResult same = report("--reports " + tree.string() + " --name fast");
  EXPECT_EQ(same.output.find("machines grouped"), std::string::npos) << same.output;
}

// A benchmark without a target gets "no target" in the chart, not a bar at +0.0 % (a false "on target").
TEST(ReportE2E, HtmlSaysNoTargetForABenchWithoutOne) {
  TempDir tmp;
  build_tree(tmp.path() / "out");
  write(tmp.path() / "t.json", R"({"model": "T", "benchmarks": {"toy_reg": 1000}})");
  const CommandResult r = report("--reports " + (tmp.path() / "out").string() + " --name fast --min-runs 3 --targets " +
                                 (tmp.path() / "t.json").string() + " --html " + (tmp.path() / "r.html").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string html = read_text(tmp.path() / "r.html");
  const auto loader = html.find("<g class=\"result-group\" data-bench=\"loader\">");
  ASSERT_NE(loader, std::string::npos) << html;
  const std::string group = html.substr(loader, html.find("</g>", loader) - loader);
  EXPECT_NE(group.find("no target (100 items/s)"), std::string::npos) << group;
  EXPECT_EQ(group.find("<rect"), std::string::npos) << "a bar for a bench without a target: " << group;
  EXPECT_EQ(group.find("+0.0 %"), std::string::npos) << group;
  const auto toy = html.find("<g class=\"result-group\" data-bench=\"toy_reg\">");
  ASSERT_NE(toy, std::string::npos);
  EXPECT_NE(html.substr(toy, html.find("</g>", toy) - toy).find("+3.0 %"), std::string::npos);
}

TEST(ReportE2E, ColourOnlyWhenAskedOrOnATerminal) {
  TempDir tmp;
  build_tree(tmp.path() / "out");
  const CommandResult r = report("--reports " + (tmp.path() / "out").string() + " --name fast --color always");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("\033[31mFalse\033[0m"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace mlbench::report::testing
