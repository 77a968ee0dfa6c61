// Reliability tests of mlbench-stall (docs/reliability.md, faults 8 and 10): Ctrl-C stops
// the benchmark it runs (and what that started), and an --out that cannot be a
// folder is one error line, not an abort.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/process.h"
#include "tests/support/run_command.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using mlbench::testing_support::run_command;
using mlbench::testing_support::TempDir;

using mlbench::testing_support::alive;

class StallFaults : public testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 4; ++i) {
      fs::create_directories(dir() / "data" / "c0");
      std::ofstream(dir() / "data" / "c0" / fmt::format("f{}.bin", i)) << std::string(4096, 'x');
    }
  }
  const fs::path& dir() const { return tmp_.path(); }
  TempDir tmp_{"stall_faults"};
};

int read_pid(const fs::path& file) {
  std::ifstream in(file);
  int pid = 0;
  in >> pid;
  return pid;
}

TEST_F(StallFaults, OutThatIsAFileOrCannotBeMadeIsOneLineAndExit2) {
  std::ofstream(dir() / "plain") << "x";
  for (const fs::path& out : {dir() / "plain", dir() / "plain" / "below"}) {
    const auto r = run_command(fmt::format("{} --bench stallsim --bench-dir {} --data {} --out {}", MLBENCH_STALL_BIN,
                                           MLBENCH_BENCH_DIR, (dir() / "data").string(), out.string()));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("mlbench-stall: error: --out " + out.string() + ": "), std::string::npos) << r.output;
  }
}

TEST_F(StallFaults, CtrlCStopsTheRunningBenchmarkAndWhatItStarted) {
  // A "benchmark" that starts a helper process in its group, then waits (a hang).
  const fs::path bin = dir() / "bin";
  fs::create_directories(bin);
  {
    std::ofstream script(bin / "sleeper");
    script << "#!/bin/sh\nsleep 60 &\necho $! > " << (dir() / "helper.pid").string() << "\necho $$ > "
           << (dir() / "bench.pid").string() << "\nwait\n";
  }
  fs::permissions(bin / "sleeper", fs::perms::owner_all, fs::perm_options::add);
  mlbench::core::ProcessSpec spec;
  spec.executable = MLBENCH_STALL_BIN;
  spec.args = {"--bench",       "sleeper",
               "--bench-dir",   bin.string(),
               "--data",        (dir() / "data").string(),
               "--out",         (dir() / "out").string(),
               "--cpus",        "1",
               "--cache-fracs", "0.5"};
  spec.output = mlbench::core::Output::Capture;
  mlbench::core::Process stall(spec);
  for (int i = 0; i < 200 && !(fs::exists(dir() / "helper.pid") && fs::exists(dir() / "bench.pid")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // both pids written
  const int bench = read_pid(dir() / "bench.pid");
  const int helper = read_pid(dir() / "helper.pid");
  ASSERT_GT(bench, 0) << "the benchmark did not start";
  ASSERT_GT(helper, 0);
  ::kill(stall.pid(), SIGINT);  // Ctrl-C reaches mlbench-stall's group, not the benchmark's
  const auto status = stall.wait_for(30);
  ASSERT_TRUE(status.has_value()) << "mlbench-stall did not stop";
  EXPECT_TRUE(status->exited) << "died of signal " << status->signal << " instead of stopping its run";
  EXPECT_EQ(status->code, 128 + SIGINT) << stall.output();
  EXPECT_NE(stall.output().find("interrupted by signal 2 during run synthetic"), std::string::npos) << stall.output();
  for (int i = 0; i < 100 && (alive(bench) || alive(helper)); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(alive(bench)) << "the benchmark outlived mlbench-stall";
  EXPECT_FALSE(alive(helper)) << "the process the benchmark started outlived mlbench-stall";
  if (alive(helper)) ::kill(helper, SIGKILL);
}

}  // namespace
