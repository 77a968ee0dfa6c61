// Reliability tests of mlbench-run (docs/reliability.md, faults 1, 4, 6, 7, 12): the real
// runner with fakebench under a full disk, a hung sibling, a SIGKILLed runner, an
// orphan's report before --resume, and a huge --slot-memory. Cases that need root
// (mount) or cgroups skip elsewhere and say why.
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

#include "cgroup/control_files.h"
#include "cgroup/slice.h"
#include "core/process.h"
#include "tests/runner/runner_test_fixture.h"
#include "tests/support/processes.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using mlbench::testing_support::run_command;
using nlohmann::json;
using Result = mlbench::testing_support::CommandResult;
using mlbench::testing_support::alive;
using mlbench::testing_support::children_of;

namespace {

class RunnerFaults : public mlbench::testing_support::RunnerTest {
 protected:
  RunnerFaults() : RunnerTest("faults") {}
  void TearDown() override {
    if (mounted_) run_command("umount -l " + (dir_ / "out").string());
    RunnerTest::TearDown();
  }
  // A tmpfs of `size` on dir_/out; the reason in `why` when mounting is refused.
  bool mount_small_disk(const std::string& size, std::string* why) {
    fs::create_directories(dir_ / "out");
    const Result r = run_command("mount -t tmpfs -o size=" + size + " tmpfs " + (dir_ / "out").string());
    if (r.exit_code != 0) {
      *why = "cannot mount a tmpfs (needs root): " + r.output;
      return false;
    }
    mounted_ = true;
    return true;
  }

  bool mounted_ = false;
};

}  // namespace

// Fault 1: the disk fills after the benchmark's report fit. The runner's rewrite of
// the report and summary.txt fail: the run must fail, name the files and the cause,
// and not claim results it does not have.
TEST_F(RunnerFaults, DiskFullWhileFinishingFailsTheRunNamingFileAndCause) {
  std::string why;
  if (!mount_small_disk("2m", &why)) GTEST_SKIP() << why;
  const std::string out = (dir_ / "out").string();
  const std::string j =
      jobs(R"([{"name": "full", "cmd": "FAKE", "args": {"--fill-dir": ")" + out + R"("}, "cgroup": "all"}])");
  const Result r = runner("--jobs " + j + " --no-cgroup");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("warning: only"), std::string::npos) << "low free space is announced\n" << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cannot write " + out + "/summary.txt: No space left on device"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("cannot write " + out + "/jobs.full.R0.D0."), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(" PASSED "), std::string::npos) << r.output;
  // The results table: the instance whose final record was lost failed (its row said 1/1 passed).
  std::string row;
  for (std::size_t at = 0; at < r.output.size();) {
    const std::size_t end = r.output.find('\n', at);
    const std::string line = r.output.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (line.rfind("full ", 0) == 0) row = line;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  EXPECT_NE(row.find(" 0/1 "), std::string::npos) << row << "\n" << r.output;
  EXPECT_NE(row.find("report not written"), std::string::npos) << row;
  EXPECT_EQ(r.output.find("Results: "), std::string::npos) << "names no summary.txt that is not there\n" << r.output;
  EXPECT_NE(r.output.find("failed (named above); the run's results are incomplete"), std::string::npos) << r.output;
}

// The disk fills during the second job, after summary.txt held the first job's line: the
// summary is not named as a result ("Summary: PATH" followed "cannot write PATH"), each
// failure is printed once (summary.txt's was printed after the step and at the end), and no
// message names its path twice ("cannot write X: cannot write X: ...").
TEST_F(RunnerFaults, AFailedWriteIsPrintedOnceAndItsFileIsNotNamedAsAResult) {
  std::string why;
  if (!mount_small_disk("2m", &why)) GTEST_SKIP() << why;
  const std::string out = (dir_ / "out").string();
  const std::string j = jobs(R"([{"name": "first", "cmd": "FAKE", "args": {}, "cgroup": "all"},
    {"name": "full", "cmd": "FAKE", "args": {"--fill-dir": ")" +
                             out + R"("}, "cgroup": "all"}])");
  const Result r = runner("--jobs " + j + " --no-cgroup --no-store");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "out" / "summary.txt")) << "the first job's line is there";
  EXPECT_EQ(r.output.find("Summary: " + out), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Summary: not written"), std::string::npos) << r.output;
  std::set<std::string> errors;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("error:") == std::string::npos) continue;
    EXPECT_TRUE(errors.insert(line).second) << "printed twice: " << line << "\n" << r.output;
    const std::size_t first = line.find("cannot ");
    if (first != std::string::npos) {
      EXPECT_EQ(line.find("cannot ", first + 1), std::string::npos) << "the failure said twice: " << line;
    }
  }
  EXPECT_NE(r.output.find("cannot write " + out + "/summary.txt: No space left on device"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("cannot write " + out + "/report.html: No space left on device"), std::string::npos)
      << r.output;
}

// docs/reliability.md, "Trust boundaries": mlbench-run hands every instance of a run one shared secret for a
// partitioned cache ($MLBENCH_PEER_SECRET), and another run another.
TEST_F(RunnerFaults, EveryInstanceOfARunGetsTheRunsPeerSecret) {
  ::unsetenv("MLBENCH_PEER_SECRET");  // the runner makes one only when the user set none
  const fs::path script = dir_ / "secret.sh";
  std::ofstream(script) << "#!/bin/sh\nprintf %s \"$MLBENCH_PEER_SECRET\" > \"$OUTPUT_DIRECTORY/secret.$JOB_ID\"\n";
  fs::permissions(script, fs::perms::owner_all);
  const std::string j =
      jobs(R"([{"name": "sec", "cmd": ")" + script.string() + R"(", "args": {}, "cgroup": "student"}])");
  std::vector<std::string> seen;
  for (int run = 0; run < 2; ++run) {
    fs::remove_all(dir_ / "out");
    const Result r = runner("--jobs " + j + " --no-cgroup --slots 2");
    std::string a, b;
    std::ifstream(dir_ / "out" / "secret.0") >> a;
    std::ifstream(dir_ / "out" / "secret.1") >> b;
    EXPECT_EQ(a.size(), 64u) << r.output;
    EXPECT_EQ(a, b) << "the instances of one run share it";
    seen.push_back(a);
  }
  EXPECT_NE(seen[0], seen[1]) << "each run has its own";
}

// Fault 4: an instance's wall time and end are its own, not its hung sibling's.
TEST_F(RunnerFaults, WallTimeIsTheInstancesOwnWhileItsSiblingHangs) {
  const std::string j = jobs(R"([{"name": "wall", "cmd": "FAKE", "args": {"--hang": "", "--hang-only-slot": 1},
                                  "cgroup": "student", "timeout": 4}])");
  const Result r = runner("--jobs " + j + " --no-cgroup --slots 2 --kill-grace 0.5");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  auto rs = reports("wall");
  ASSERT_EQ(rs.size(), 2u) << r.output;
  EXPECT_EQ(rs[0]["completed"], true);
  EXPECT_EQ(rs[1]["reason"], "timeout 4s");
  const double quick = rs[0]["runner"]["wall_seconds"].get<double>();
  const double hung = rs[1]["runner"]["wall_seconds"].get<double>();
  EXPECT_GE(hung, 4.0);
  EXPECT_LT(quick, 3.0) << "slot 0 ended long before its sibling's timeout";
  EXPECT_LT(rs[0]["end_time"].get<std::string>(), rs[1]["end_time"].get<std::string>());
}

// Faults 6 and 7: SIGKILL of the runner. Its instances die with it; a later run
// removes the cgroups it left; --resume does not take an orphan's report for a
// completed one.
TEST_F(RunnerFaults, SigkilledRunnersInstancesDieAndALaterRunRemovesItsCgroups) {
  std::string why;
  const auto h = mlbench::cgroup::Hierarchy::open(&why);
  const std::string j = jobs(R"([{"name": "long", "cmd": "FAKE", "args": {"--sleep": 60}, "cgroup": "student"}])");
  mlbench::core::ProcessSpec spec;
  spec.executable = MLBENCH_RUN;
  spec.args = {"--jobs", j, "--outdir", (dir_ / "out").string(), "--slots", "1"};
  if (!h) spec.args.push_back("--no-cgroup");
  spec.output = mlbench::core::Output::File;
  spec.log_path = (dir_ / "runner.txt").string();
  mlbench::core::Process runner_process(spec);
  const pid_t pid = runner_process.pid();
  std::set<int> kids;
  for (int i = 0; i < 200 && kids.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    kids = children_of(pid);
  }
  ASSERT_EQ(kids.size(), 1u) << "the instance did not start";
  kill(pid, SIGKILL);
  runner_process.wait();
  for (int i = 0; i < 100 && alive(*kids.begin()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(alive(*kids.begin())) << "the instance outlived its SIGKILLed runner";
  if (!h) GTEST_SKIP() << "the instance died with its runner; no cgroups here to check the clean-up: " << why;
  const json machine = json::parse(std::ifstream(dir_ / "out" / "machine.json"));
  const std::string parent = machine["cgroup_parent"];
  ASSERT_TRUE(fs::exists(h->dir("cpuset", parent))) << "a SIGKILLed runner cannot remove its own group";
  // A later run (any jobs file) removes it.
  const std::string later = jobs(R"([{"name": "quick", "cmd": "FAKE", "args": {}, "cgroup": "student"}])");
  const Result r =
      run_command(std::string(MLBENCH_RUN) + " --jobs " + later + " --slots 1 --outdir " + (dir_ / "later").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* c : {"cpuset", "cpu", "cpuacct", "memory"}) {
    try {
      EXPECT_FALSE(fs::exists(h->dir(c, parent))) << c << "/" << parent << " left behind\n" << r.output;
    } catch (const mlbench::cgroup::CgroupError&) {
      // a controller this hierarchy lacks holds no group
    }
  }
  EXPECT_NE(r.output.find("removed cgroup " + parent), std::string::npos) << r.output;
}

TEST_F(RunnerFaults, ResumeDoesNotCountAReportTheRunnerNeverFinished) {
  const std::string j = jobs(R"([{"name": "orphan", "cmd": "FAKE", "args": {}, "cgroup": "all"}])");
  Result r = runner("--jobs " + j + " --no-cgroup");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // What an orphan leaves: the benchmark's own report, completed, without the runner's blocks.
  auto rs = reports("orphan");
  ASSERT_EQ(rs.size(), 1u);
  json own = rs[0];
  const std::string path = own["_path"];
  for (const char* k : {"runner", "resources", "isolation", "_file", "_path"}) own.erase(k);
  std::ofstream(path) << own.dump(2);
  r = runner("--jobs " + j + " --no-cgroup --resume " + (dir_ / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("(resumed)"), std::string::npos) << "an orphan's report is not a finished instance\n"
                                                           << r.output;
  rs = reports("orphan");
  ASSERT_EQ(rs.size(), 1u) << "the orphan's report moves to superseded/";
  EXPECT_TRUE(rs[0]["runner"].is_object());
  EXPECT_TRUE(fs::exists(dir_ / "out" / "superseded" / fs::path(path).filename()));
}

// Fault 12: a huge --slot-memory must not become a 0-byte limit (every instance "oom").
TEST_F(RunnerFaults, HugeSlotMemoryIsRefusedNotAZeroLimit) {
  const std::string j = jobs(R"([{"name": "mem", "cmd": "FAKE", "args": {}, "cgroup": "student"}])");
  const Result r = runner("--jobs " + j + " --slots 1 --slot-memory 15000000T --dry");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--slot-memory 15000000T"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("more than this machine's memory"), std::string::npos) << r.output;
  // The cgroup layer writes a limit the kernel cannot hold as "no limit", never a wrapped number.
  EXPECT_EQ(mlbench::cgroup::memory_limit_value(mlbench::cgroup::Version::V1, 15000000ull << 40), "-1");
  EXPECT_EQ(mlbench::cgroup::memory_limit_value(mlbench::cgroup::Version::V2, ~0ull), "max");
  EXPECT_EQ(mlbench::cgroup::memory_limit_value(mlbench::cgroup::Version::V1, 128ull << 20), "134217728");
}
