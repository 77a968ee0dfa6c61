// End-to-end: the real mlbench-run on jobs files that run fakebench. Checks
// concurrency, CPU sets, OOM, timeouts, crashes, Ctrl-C, --resume, --dry and
// bad jobs files. Cgroup cases need root with cgroups and skip elsewhere, saying why.
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cgroup/slice.h"
#include "core/process.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "tests/runner/runner_test_fixture.h"
#include "tests/support/processes.h"

namespace fs = std::filesystem;
using nlohmann::json;
using mlbench::testing_support::run_command;
using Result = mlbench::testing_support::CommandResult;

namespace {

class RunnerE2E : public mlbench::testing_support::RunnerTest {
 protected:
  RunnerE2E() : RunnerTest("e2e") {}
  static bool cgroups_usable(std::string* why) { return mlbench::cgroup::Hierarchy::open(why).has_value(); }
  // What the runner records as its isolation here: this machine's cgroup mode, else affinity.
  static std::string expected_isolation() {
    std::string why;
    const auto h = mlbench::cgroup::Hierarchy::open(&why);
    return h ? mlbench::cgroup::to_string(h->isolation()) : "affinity";
  }
};

// A --dry command line of fakebench with these arguments.
std::string fmt_cmd(const std::string& args) {
  return std::string(FAKEBENCH) + " " + args;
}

}  // namespace

TEST_F(RunnerE2E, StudentInstancesRunConcurrentlyEachOnItsCpus) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs 2 CPUs for 2 disjoint CPU sets";
  std::string why;
  const bool cg = cgroups_usable(&why);
  const std::string j = jobs(R"([{"name": "par", "cmd": "FAKE", "args": {"--sleep": 1}, "cgroup": "student"}])");
  const Result r = runner("--jobs " + j + " --slots 2" + (cg ? "" : " --no-cgroup"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto rs = reports("par");
  ASSERT_EQ(rs.size(), 2u) << r.output;
  EXPECT_EQ(rs[0]["metrics"]["affinity"], "0");
  EXPECT_EQ(rs[1]["metrics"]["affinity"], "1");
  // Overlapping lifetimes: each started before the other ended.
  EXPECT_LT(rs[0]["metrics"]["t_start"].get<double>(), rs[1]["metrics"]["t_end"].get<double>());
  EXPECT_LT(rs[1]["metrics"]["t_start"].get<double>(), rs[0]["metrics"]["t_end"].get<double>());
  EXPECT_EQ(rs[0]["seed"], 100);
  EXPECT_EQ(rs[1]["seed"], 200);
  EXPECT_EQ(rs[0]["isolation"], expected_isolation());
  EXPECT_TRUE(rs[0]["resources"]["cpu_seconds"].is_number());
  const json machine = json::parse(std::ifstream(dir_ / "out" / "machine.json"));
  EXPECT_EQ(machine["isolation"], rs[0]["isolation"]);
  EXPECT_EQ(machine["slots"].size(), 2u);
  std::ifstream summary(dir_ / "out" / "summary.txt");
  std::string line;
  std::getline(summary, line);
  EXPECT_EQ(line.substr(0, 24), "[ 1/ 1][  /  ] PASSED | ") << line;
  EXPECT_TRUE(fs::exists(dir_ / "out" / "par.R0.D0.log"));
}

TEST_F(RunnerE2E, AffinityOnlyModeRecordsIt) {
  const std::string j = jobs(R"([{"name": "aff", "cmd": "FAKE", "args": {}, "cgroup": "student"}])");
  const Result r = runner("--jobs " + j + " --slots 1 --no-cgroup");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto rs = reports("aff");
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0]["isolation"], "affinity");
  EXPECT_EQ(rs[0]["resources"]["source"], "rusage");
}

TEST_F(RunnerE2E, MemoryLimitGivesOomWhileSiblingPasses) {
  std::string why;
  if (!cgroups_usable(&why)) GTEST_SKIP() << "needs cgroups for a memory limit: " << why;
  const std::string j = jobs(
      R"([{"name": "mem", "cmd": "FAKE", "args": {"--alloc-mib": 400, "--alloc-only-slot": 1}, "cgroup": "student"}])");
  const Result r = runner("--jobs " + j + " --slots 2 --slot-memory 128M");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  auto rs = reports("mem");
  ASSERT_EQ(rs.size(), 2u) << r.output;
  EXPECT_EQ(rs[0]["completed"], true);
  EXPECT_EQ(rs[1]["completed"], false);
  EXPECT_EQ(rs[1]["reason"], "oom");
  EXPECT_NE(rs[1]["_file"].get<std::string>().find(".FAIL."), std::string::npos);
  EXPECT_GE(rs[1]["resources"]["oom_kills"].get<int>(), 1);
}

TEST_F(RunnerE2E, HangIsKilledAtTimeout) {
  const std::string j = jobs(R"([
    {"name": "hang", "cmd": "FAKE", "args": {"--hang": "", "--repeat": 3}, "cgroup": "all", "timeout": 1},
    {"name": "stubborn", "cmd": "FAKE", "args": {"--ignore-term": ""}, "cgroup": "all", "timeout": 1}])");
  const auto t0 = std::chrono::steady_clock::now();
  const Result r = runner("--jobs " + j + " --no-cgroup --kill-grace 0.5");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_LT(took, 8.0);
  for (const char* name : {"hang", "stubborn"}) {
    auto rs = reports(name);
    ASSERT_EQ(rs.size(), 1u) << name << " must leave exactly one report\n" << r.output;
    EXPECT_EQ(rs[0]["reason"], "timeout 1s") << name;
    EXPECT_EQ(rs[0]["completed"], false);
  }
  EXPECT_EQ(reports("hang")[0]["benchmark_reason"], "terminated");  // its own report, reason replaced
}

TEST_F(RunnerE2E, CrashExitAndMissingReportAreFailReasons) {
  const std::string j = jobs(R"([
    {"name": "crash", "cmd": "FAKE", "args": {"--crash": ""}, "cgroup": "all"},
    {"name": "exit3", "cmd": "FAKE", "args": {"--exit-code": 3}, "cgroup": "all"},
    {"name": "silent", "cmd": "FAKE", "args": {"--no-report": ""}, "cgroup": "all"},
    {"name": "fine", "cmd": "FAKE", "args": {}, "cgroup": "all"}])");
  const Result r = runner("--jobs " + j + " --no-cgroup");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(reports("crash").at(0)["reason"], "signal 11");
  EXPECT_EQ(reports("exit3").at(0)["reason"], "exit 3");
  EXPECT_EQ(reports("silent").at(0)["reason"], "no report");
  EXPECT_EQ(reports("fine").at(0)["completed"], true);
  std::ifstream summary(dir_ / "out" / "summary.txt");
  std::string all((std::istreambuf_iterator<char>(summary)), {});
  EXPECT_NE(all.find("[ 1/ 4][ 1/ 1] FAILED"), std::string::npos) << all;
  EXPECT_NE(all.find("[ 4/ 4][  /  ] PASSED"), std::string::npos) << all;
  EXPECT_NE(all.find("Total Time"), std::string::npos) << all;
}

TEST_F(RunnerE2E, RaiseErrorStopsAfterFirstFailure) {
  const std::string j = jobs(R"([{"name": "bad", "cmd": "FAKE", "args": {"--exit-code": 2}, "cgroup": "all"},
                                 {"name": "never", "cmd": "FAKE", "args": {}, "cgroup": "all"}])");
  const Result r = runner("--jobs " + j + " --no-cgroup --raise-error");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(reports("never").empty());
}

TEST_F(RunnerE2E, CtrlCLeavesNoChildNoCgroupAndInterruptedRecords) {
  std::string why;
  const bool cg = cgroups_usable(&why);
  const std::string j = jobs(R"([{"name": "long", "cmd": "FAKE", "args": {"--hang": ""}, "cgroup": "student"},
                                 {"name": "later", "cmd": "FAKE", "args": {}, "cgroup": "student"}])");
  const std::string out = (dir_ / "out").string();
  mlbench::core::ProcessSpec spec;
  spec.executable = MLBENCH_RUN;
  spec.args = {"--jobs", j, "--outdir", out, "--slots", "2"};
  if (!cg) spec.args.push_back("--no-cgroup");
  spec.output = mlbench::core::Output::File;
  spec.log_path = (dir_ / "runner.txt").string();
  mlbench::core::Process runner_process(spec);
  const pid_t pid = runner_process.pid();
  // Wait until both instances have started (their logs show the config block).
  auto children = [&] { return mlbench::testing_support::children_of(pid); };
  std::set<int> kids;
  for (int i = 0; i < 100 && kids.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    kids = children();
  }
  ASSERT_EQ(kids.size(), 2u) << "instances did not start";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let them install their handlers
  kill(pid, SIGINT);  // the runner alone, as a terminal's Ctrl-C would reach it first
  const mlbench::core::ExitStatus status = runner_process.wait();
  std::ifstream txt(dir_ / "runner.txt");
  std::string output((std::istreambuf_iterator<char>(txt)), {});
  ASSERT_TRUE(status.exited) << output;
  EXPECT_EQ(status.code, 130) << output;
  for (int k : kids) EXPECT_FALSE(fs::exists("/proc/" + std::to_string(k))) << "child " << k << " left behind";
  auto rs = reports("long");
  ASSERT_EQ(rs.size(), 2u) << output;
  for (const auto& r : rs) EXPECT_EQ(r["reason"], "interrupted");
  EXPECT_TRUE(reports("later").empty());
  EXPECT_NE(output.find("Results: " + out), std::string::npos) << output;
  // The results table also ends an interrupted run, with what finished.
  EXPECT_NE(output.find("FAILED D0: interrupted; D1: interrupted"), std::string::npos) << output;
  EXPECT_NE(output.find("later"), std::string::npos) << output;
  EXPECT_NE(output.find("not run"), std::string::npos) << output;
  EXPECT_NE(output.find("Report: " + out + "/report.html"), std::string::npos) << output;
  EXPECT_TRUE(fs::exists(dir_ / "out" / "report.html"));
  const json machine = json::parse(std::ifstream(dir_ / "out" / "machine.json"));
  if (!cg) GTEST_SKIP() << "everything but the cgroup clean-up was checked; no cgroups here: " << why;
  const std::string parent = machine["cgroup_parent"];
  const auto h = mlbench::cgroup::Hierarchy::open(&why);
  ASSERT_TRUE(h.has_value()) << why;
  for (const char* c : {"cpuset", "cpu", "cpuacct", "memory"}) {
    try {
      EXPECT_FALSE(fs::exists(h->dir(c, parent))) << c << "/" << parent;
    } catch (const mlbench::cgroup::CgroupError&) {
      // a controller this hierarchy lacks (cpuacct on v2) holds no group
    }
  }
}

TEST_F(RunnerE2E, ResumeRerunsOnlyWhatFailed) {
  const fs::path flag = dir_ / "fail-now";
  std::ofstream(flag) << "x";
  const std::string j = jobs(R"([{"name": "good", "cmd": "FAKE", "args": {}, "cgroup": "all"},
    {"name": "flaky", "cmd": "FAKE", "args": {"--fail-if-exists": ")" + flag.string() + R"("}, "cgroup": "all"}])");
  Result r = runner("--jobs " + j + " --no-cgroup");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  const std::string good_file = reports("good").at(0)["_file"];
  EXPECT_EQ(reports("flaky").at(0)["reason"], "exit 3");
  fs::remove(flag);
  r = run_command(std::string(MLBENCH_RUN) + " --jobs " + j + " --no-cgroup --resume " + (dir_ / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto good = reports("good");
  ASSERT_EQ(good.size(), 1u);
  EXPECT_EQ(good[0]["_file"], good_file);  // not rerun
  auto flaky = reports("flaky");
  ASSERT_EQ(flaky.size(), 1u) << "the old FAIL report moves to superseded/";
  EXPECT_EQ(flaky[0]["completed"], true);
  EXPECT_TRUE(fs::exists(dir_ / "out" / "superseded"));
  EXPECT_NE(r.output.find("PASSED |     0.00 MIN | good (resumed)"), std::string::npos) << r.output;
}

TEST_F(RunnerE2E, DryPrintsEveryCommandWithSlotCpusAndMemory) {
  const std::string j = jobs(R"([{"name": "d", "cmd": "FAKE", "args": {"--batch-size": [8, 16]}, "cgroup": "student"}])");
  const Result r = runner("--jobs " + j + " --slots 2 --slot-memory 1G --dry --uid 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[1/2] d [--batch-size 8]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("slot 1 | cpus "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("memory 1.0 GiB"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--batch-size 16 --seed 205"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("JOB_ID=1"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "out")) << "--dry writes nothing";
  const Result show = runner("--jobs " + j + " --show");
  EXPECT_EQ(show.exit_code, 0);
  EXPECT_EQ(show.output.substr(0, 1), "d");
}

// A run ends with its results: one row per job (passed/total, items/s and
// spread, stall, vs target, failure reasons), report.html written by mlbench-report's
// renderer into the run directory, and the paths of both files. Plain text in a log.
TEST_F(RunnerE2E, RunEndsWithResultsTableAndReportHtml) {
  const std::string j = jobs(R"([
    {"name": "ok", "cmd": "FAKE", "args": {}, "cgroup": "student"},
    {"name": "sweep", "cmd": "FAKE", "args": {"--batch-size": [2, 4]}, "cgroup": "all"},
    {"name": "bad", "cmd": "FAKE", "args": {"--exit-code": 3}, "cgroup": "student"}])");
  const Result r = runner("--jobs " + j + " --slots 2 --no-cgroup");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string out = (dir_ / "out").string();
  const auto header = r.output.find("\nbenchmark  ");
  ASSERT_NE(header, std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  passed     items/s   spread    stall  vs target\n", header), std::string::npos) << r.output;
  const std::string table = r.output.substr(header);
  auto row = [&](const std::string& title) {
    const auto at = table.find("\n" + title + " ");
    return at == std::string::npos ? std::string() : table.substr(at + 1, table.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(row("ok").find("    2/2  "), std::string::npos) << table;
  EXPECT_NE(row("ok").find('%'), std::string::npos) << "spread of two instances: " << row("ok");
  EXPECT_NE(row("sweep [--batch-size 2]").find("    1/1  "), std::string::npos) << table;
  EXPECT_NE(row("sweep [--batch-size 4]"), "") << table;
  EXPECT_NE(row("bad").find("    0/2  "), std::string::npos) << table;
  EXPECT_NE(row("bad").find("FAILED D0: exit 3; D1: exit 3"), std::string::npos) << row("bad");
  EXPECT_NE(r.output.find("vs target: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nReport: " + out + "/report.html\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nSummary: " + out + "/summary.txt\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\033'), std::string::npos) << "colour codes in a log";
  std::ifstream in(dir_ / "out" / "report.html");
  const std::string html((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(html.find("<h1>mlbench report: jobs</h1>"), std::string::npos) << html.substr(0, 500);
  EXPECT_NE(html.find("data-bench=\"ok\""), std::string::npos);
  EXPECT_NE(html.find("Note: 1 run: sd and sd%"), std::string::npos);
  // mlbench-report reads the same single run directory.
  const Result rep = run_command(fs::path(MLBENCH_RUN).parent_path().string() + "/mlbench-report --reports " + out);
  EXPECT_EQ(rep.exit_code, 0) << rep.output;
  EXPECT_NE(rep.output.find("Suite jobs | 1 runs (out)"), std::string::npos) << rep.output;
}

// A Mila-format jobs file (positional "" arguments, list sweeps, an `all` job,
// $CPU_COUNT, $DEVICE_TOTAL, ...) expands per instance from that instance's values, not
// from mlbench-run's own environment; --dry shows every expanded command.
TEST_F(RunnerE2E, MilaJobsFileExpandsPerInstanceInDry) {
  const std::string j = jobs(R"([
    {"name": "mila", "cmd": "FAKE", "cgroup": "student",
     "args": {"input.txt": "", "--batch-size": [8, 16], "--cpu-cores": "$CPU_COUNT", "--devices": "$DEVICE_TOTAL",
              "--jr": "$JOB_ID", "--report": "$OUTPUT_DIRECTORY/mila", "--data": "${DATA_DIRECTORY}/x"}},
    {"name": "whole", "cmd": "FAKE", "cgroup": "all",
     "args": {"--workers": "$CPU_COUNT", "--devices": "$DEVICE_TOTAL", "--total": "$CPU_TOTAL", "--no-cuda": ""}}])");
  const std::string out = (dir_ / "out").string();
  // The runner's own environment holds other values: they must not leak into the commands.
  const Result r = run_command("CPU_COUNT=99 JOB_ID=7 DEVICE_TOTAL=5 DATA_DIRECTORY=/data " + std::string(MLBENCH_RUN) +
                               " --outdir " + out + " --jobs " + j + " --slots 2 --dry");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int cpus = CPU_COUNT(&set);
  const int per_slot = std::max(1, cpus / 2);
  // The runner's header says whether it found GPUs: DEVICE_TOTAL is their count, else the slots.
  int devices = 2;
  if (r.output.find("| no GPU |") == std::string::npos) {
    const auto bar = r.output.find(" GPU(s)");
    ASSERT_NE(bar, std::string::npos) << r.output;
    devices = std::stoi(r.output.substr(r.output.rfind("| ", bar) + 2));
  }
  std::vector<std::string> expected;
  for (int bs : {8, 16}) {
    for (int slot = 0; slot < 2; ++slot) {
      expected.push_back(fmt_cmd("input.txt --batch-size " + std::to_string(bs) + " --cpu-cores " +
                                 std::to_string(per_slot) + " --devices " + std::to_string(devices) + " --jr " +
                                 std::to_string(slot) + " --report " + out + "/mila --data /data/x --seed " +
                                 std::to_string((slot + 1) * 100)));
    }
  }
  expected.push_back(fmt_cmd("--workers " + std::to_string(cpus) + " --devices " + std::to_string(devices) +
                             " --total " + std::to_string(cpus) + " --no-cuda --seed 2"));
  std::vector<std::string> got;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find(std::string(" ") + FAKEBENCH + " ");
    if (line.rfind("  slot ", 0) == 0 && at != std::string::npos) got.push_back(line.substr(at + 1));
    if (line.rfind("  slot ", 0) == 0) {
      EXPECT_NE(line.find("DEVICE_TOTAL=" + std::to_string(devices) + " "), std::string::npos) << line;
      EXPECT_NE(line.find("CPU_TOTAL=" + std::to_string(cpus) + " "), std::string::npos) << line;
      EXPECT_NE(line.find("RAM_TOTAL="), std::string::npos) << line;
    }
  }
  EXPECT_EQ(got, expected) << r.output;
  EXPECT_NE(r.output.find("[1/3] mila [--batch-size 8]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[3/3] whole"), std::string::npos) << r.output;

  // A variable neither the runner nor its environment defines: one line naming job and variable.
  const std::string bad = jobs(R"([{"name": "ok", "cmd": "FAKE", "args": {"--c": "$CPU_COUNT"}},
                                   {"name": "typo", "cmd": "FAKE", "args": {"--d": "$DEVICE_TOTLA"}}])");
  const Result e = runner("--jobs " + bad + " --dry");
  EXPECT_EQ(e.exit_code, 2) << e.output;
  EXPECT_EQ(e.output, "mlbench-run: error: " + bad + ": job 1 (typo): field 'args.--d': $DEVICE_TOTLA is not set\n");
}

// The results table is coloured on a terminal, never under NO_COLOR.
// util-linux's `script` gives the runner a pseudo-terminal.
TEST_F(RunnerE2E, ResultsColourOnATerminalUnlessNoColor) {
  if (run_command("command -v script").exit_code != 0) GTEST_SKIP() << "needs util-linux's script for a terminal";
  const std::string j = jobs(R"([{"name": "ok", "cmd": "FAKE", "args": {}, "cgroup": "all"},
                                 {"name": "bad", "cmd": "FAKE", "args": {"--exit-code": 3}, "cgroup": "all"}])");
  const std::string cmd = std::string(MLBENCH_RUN) + " --outdir " + (dir_ / "out").string() + " --jobs " + j +
                          " --no-cgroup";
  const Result tty = run_command("script -qec '" + cmd + "' /dev/null");
  EXPECT_NE(tty.output.find("\033[32m    1/1\033[0m"), std::string::npos) << tty.output;
  EXPECT_NE(tty.output.find("\033[31mFAILED D0: exit 3\033[0m"), std::string::npos) << tty.output;
  const Result plain = run_command("NO_COLOR=1 script -qec '" + cmd + "' /dev/null");
  EXPECT_NE(plain.output.find("FAILED D0: exit 3"), std::string::npos) << plain.output;
  EXPECT_EQ(plain.output.find("\033[3"), std::string::npos) << "colour under NO_COLOR: " << plain.output;
}

// With --repeat-suite a row counts the instances of every pass, names the pass of each
// failure, and report.html covers the R<k> tree.
TEST_F(RunnerE2E, ResultsTableSpansEveryPass) {
  const std::string j = jobs(R"([{"name": "ok", "cmd": "FAKE", "args": {}, "cgroup": "all"},
                                 {"name": "bad", "cmd": "FAKE", "args": {"--exit-code": 3}, "cgroup": "all"}])");
  const Result r = runner("--jobs " + j + " --no-cgroup --repeat-suite 2 --uid 4");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string out = (dir_ / "out").string();
  EXPECT_NE(r.output.find("\nok             2/2 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nbad            0/2 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("FAILED R4/D0: exit 3; R5/D0: exit 3\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nReport: " + out + "/report.html\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nSummary: " + out + "/R*/summary.txt\n"), std::string::npos) << r.output;
  std::ifstream in(dir_ / "out" / "report.html");
  const std::string html((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(html.find("2 runs (R0 R1)"), std::string::npos) << html.substr(0, 1500);
}

TEST_F(RunnerE2E, BadJobsFilesAreRejectedInOneLine) {
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {"[{", "not valid JSON"},
      {R"([{"name": "a", "args": {}}])", "job 0 (a): field 'cmd': missing required field"},
      {R"([{"name": "a", "cmd": "FAKE", "args": {"--x": {"y": 1}}}])",
       "job 0 (a): field 'args.--x': expected a number, a string or a list, got an object"},
      {R"([{"name": "a", "cmd": "no_such_bench", "args": {}}])", "job 0 (a): field 'cmd': unknown benchmark 'no_such_bench'"},
      {R"([{"name": "a", "cmd": "FAKE", "args": {"--data": "$NOT_SET_ANYWHERE/x"}}])",
       "job 0 (a): field 'args.--data': $NOT_SET_ANYWHERE is not set"},
  };
  for (const auto& c : cases) {
    const std::string j = jobs(c.text);
    const Result r = runner("--jobs " + j);
    EXPECT_EQ(r.exit_code, 2) << c.text;
    EXPECT_EQ(r.output.rfind("mlbench-run: error: " + j + ": ", 0), 0u) << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_FALSE(fs::exists(dir_ / "out")) << "nothing ran";
  }
  // An unbuilt benchmark only matters when its job is selected.
  const std::string j = jobs(R"([{"name": "a", "cmd": "FAKE", "args": {}, "cgroup": "all"},
                                 {"name": "b", "cmd": "not_built_yet", "args": {}}])");
  EXPECT_EQ(runner("--jobs " + j + " --name a --no-cgroup").exit_code, 0);
  const Result unknown = runner("--jobs " + j + " --name zzz");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("no job named 'zzz'"), std::string::npos) << unknown.output;
}

TEST_F(RunnerE2E, DatasetJobsFailClearlyWhenDatagenIsMissingOrFails) {
  // A copy of mlbench-run in a directory without (then with a failing) mlbench-datagen.
  const fs::path bin = dir_ / "bin";
  fs::create_directories(bin);
  fs::copy_file(MLBENCH_RUN, bin / "mlbench-run");
  const std::string j = jobs(R"([{"name": "needs", "cmd": "FAKE", "args": {}, "cgroup": "all", "dataset": "tiny"},
                                 {"name": "free", "cmd": "FAKE", "args": {}, "cgroup": "all"}])");
  const std::string cmd = (bin / "mlbench-run").string() + " --no-cgroup --outdir " + (dir_ / "out").string() + " --jobs " + j;
  Result r = run_command(cmd);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(reports("needs").at(0)["reason"].get<std::string>().find("dataset tiny: mlbench-datagen not found"),
            std::string::npos);
  EXPECT_EQ(reports("free").at(0)["completed"], true);
  fs::remove_all(dir_ / "out");
  std::ofstream(bin / "mlbench-datagen") << "#!/bin/sh\necho \"mlbench-datagen: error: disk full\"\nexit 1\n";
  fs::permissions(bin / "mlbench-datagen", fs::perms::owner_all);
  r = run_command(cmd);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(reports("needs").at(0)["reason"], "dataset tiny: mlbench-datagen: error: disk full");
}

// The runner adds what else used the slot's CPUs to every report it finishes (a FAIL
// one too), so that mlbench-report can name an unstable run's cause, and a --min-time
// run records its calibration.
TEST_F(RunnerE2E, ReportsCarryInterferenceAndCalibration) {
  std::string why;
  const bool cg = cgroups_usable(&why);
  const std::string j = jobs(R"([
    {"name": "busy", "cmd": "FAKE", "args": {"--burn": 0.2, "--repeat": 2, "--number": 1}, "cgroup": "student"},
    {"name": "timed", "cmd": "FAKE", "args": {"--sleep": 0.005, "--repeat": 3, "--min-time": 0.03}, "cgroup": "student"},
    {"name": "nan", "cmd": "FAKE", "args": {"--nan-loss": ""}, "cgroup": "student"}])");
  const Result r = runner("--jobs " + j + " --slots 1" + (cg ? "" : " --no-cgroup"));
  EXPECT_EQ(r.exit_code, 1) << r.output;  // the nan job fails
  for (const std::string job : {"busy", "timed", "nan"}) {
    const auto reps = reports(job);
    ASSERT_EQ(reps.size(), 1u) << job;
    const json& rep = reps[0];
    ASSERT_TRUE(rep.contains("interference")) << job << ": " << rep.dump();
    const json& in = rep["interference"];
    ASSERT_TRUE(in.is_object()) << job << ": " << in.dump();
    for (const char* key : {"slot_cpus", "wall_s", "own_cpu_s", "other_cpu_s", "other_cpu_pct", "steal_pct",
                            "loadavg_start", "loadavg_end", "probe_before_s", "probe_after_s", "probe_drift_pct"}) {
      EXPECT_TRUE(in.contains(key)) << job << " lacks " << key;
    }
    EXPECT_FALSE(in["slot_cpus"].empty()) << job;
    EXPECT_GT(in["wall_s"].get<double>(), 0.0) << job;
    EXPECT_GT(in["probe_before_s"].get<double>(), 0.0) << job;
    EXPECT_GT(in["probe_after_s"].get<double>(), 0.0) << job;
    EXPECT_GE(in["other_cpu_pct"].get<double>(), 0.0) << job;
    EXPECT_EQ(in["own_cpu_s"], rep["resources"]["cpu_seconds"]) << job;
    ASSERT_TRUE(rep.contains("stability")) << job;
  }
  // fakebench burned CPU (for 2 x 0.2 s of wall time, less CPU time on a loaded machine): its own time.
  EXPECT_GT(reports("busy")[0]["interference"]["own_cpu_s"].get<double>(), 0.0);
  EXPECT_EQ(reports("nan")[0]["completed"], false);
  const json timed = reports("timed")[0];
  EXPECT_EQ(timed["min_time"], 0.03);
  ASSERT_TRUE(timed["calibration"].is_object()) << timed.dump();
  EXPECT_EQ(timed["number"], timed["calibration"]["number"]);
  EXPECT_TRUE(reports("busy")[0]["calibration"].is_null());
}
