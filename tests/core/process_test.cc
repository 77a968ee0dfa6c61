// core::Process: exit codes and signals, timeouts, group kill (grandchildren
// too), death with the parent, environment, working directory and output.
// Real processes (/bin/sh, /bin/sleep); no assertion depends on machine speed:
// waits only bound from above, generously.
#include "core/process.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "core/environment.h"
#include "tests/support/temp_dir.h"

namespace mlbench::core {
namespace {

ProcessSpec shell(const std::string& script) {
  ProcessSpec spec;
  spec.executable = "/bin/sh";
  spec.args = {"-c", script};
  return spec;
}

// `spec` with its output into `dir`/log.
ProcessSpec logged(ProcessSpec spec, const testing_support::TempDir& dir) {
  spec.output = Output::File;
  spec.log_path = (dir.path() / "log").string();
  return spec;
}

// True once `pid` has ended: no such process, or a zombie nobody reaped yet.
bool ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto close = line.rfind(')');
  return close != std::string::npos && line.size() > close + 2 && (line[close + 2] == 'Z' || line[close + 2] == 'X');
}

// Waits (up to 30 s, a bound a loaded machine meets) for `pid` to end.
bool ends_soon(pid_t pid) {
  for (int i = 0; i < 3000 && !ended(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return ended(pid);
}

// Waits (up to 30 s) for a first complete line in `file`.
std::string read_line(const std::filesystem::path& file) {
  for (int i = 0; i < 3000; ++i) {
    std::ifstream in(file);
    std::string line;
    if (std::getline(in, line) && !in.eof()) return line;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "";
}

pid_t read_pid(const std::filesystem::path& file) {
  const std::string line = read_line(file);
  return line.empty() ? -1 : std::stoi(line);
}

TEST(Process, ExitCode) {
  Process p(shell("exit 3"));
  const ExitStatus s = p.wait();
  EXPECT_TRUE(s.exited);
  EXPECT_EQ(s.code, 3);
  EXPECT_EQ(s.signal, 0);
  EXPECT_EQ(s.shell_code(), 3);
}

TEST(Process, Signal) {
  Process p(shell("kill -SEGV $$"));
  const ExitStatus s = p.wait();
  EXPECT_FALSE(s.exited);
  EXPECT_EQ(s.signal, SIGSEGV);
  EXPECT_EQ(s.shell_code(), 128 + SIGSEGV);
}

TEST(Process, OwnProcessGroup) {
  Process p(shell("sleep 600"));
  EXPECT_EQ(getpgid(p.pid()), p.pid());
  EXPECT_NE(getpgid(p.pid()), getpgrp());
}

TEST(Process, TimeoutThenStopKillsASleepingChild) {
  ProcessSpec spec;
  spec.executable = "/bin/sleep";
  spec.args = {"600"};
  Process p(spec);
  EXPECT_FALSE(p.wait_for(0.05).has_value());
  const ExitStatus s = p.stop(30);
  EXPECT_FALSE(s.exited);
  EXPECT_EQ(s.signal, SIGTERM);
  EXPECT_TRUE(ended(p.pid()));
}

TEST(Process, StopEscalatesToSigkill) {
  testing_support::TempDir dir("process_stop");
  Process p(logged(shell("trap '' TERM; echo ready; while :; do sleep 1; done"), dir));
  ASSERT_EQ(read_line(dir.path() / "log"), "ready");  // the trap is in place before the SIGTERM
  const ExitStatus s = p.stop(0.2);
  EXPECT_EQ(s.signal, SIGKILL);
}

TEST(Process, GroupKillReachesGrandchildren) {
  testing_support::TempDir dir("process_group");
  Process p(logged(shell("sleep 600 & echo $!; wait"), dir));
  const pid_t grandchild = read_pid(dir.path() / "log");
  ASSERT_GT(grandchild, 0);
  EXPECT_FALSE(ended(grandchild));
  p.signal_group(SIGKILL);
  EXPECT_EQ(p.wait().signal, SIGKILL);
  EXPECT_TRUE(ends_soon(grandchild)) << "grandchild " << grandchild << " outlived its group";
}

TEST(Process, ChildDiesWithItsParent) {
  testing_support::TempDir dir("process_pdeath");
  ProcessSpec spec;
  spec.executable = PROCESS_HELPER;
  Process helper(logged(spec, dir));
  const pid_t child = read_pid(dir.path() / "log");
  ASSERT_GT(child, 0);
  EXPECT_FALSE(ended(child));
  EXPECT_EQ(getpgid(child), child) << "the helper's child is in a group of its own, out of reach of a group kill";
  kill(helper.pid(), SIGKILL);  // the helper only: its child must go by the parent-death signal
  EXPECT_EQ(helper.wait().signal, SIGKILL);
  EXPECT_TRUE(ends_soon(child)) << "child " << child << " outlived its parent";
}

TEST(Process, EnvironmentIsExactlyTheOneGiven) {
  ProcessSpec spec = shell("echo \"[$MLBENCH_TEST_VAR][$HOME]\"");
  spec.env = Environment{{"MLBENCH_TEST_VAR", "a b=c"}};
  const CommandResult r = run_captured(spec);
  EXPECT_EQ(r.status.code, 0);
  EXPECT_EQ(r.output, "[a b=c][]\n");
}

TEST(Process, InheritsTheEnvironmentByDefault) {
  ASSERT_EQ(setenv("MLBENCH_TEST_INHERITED", "yes", 1), 0);
  const CommandResult r = run_captured(shell("echo $MLBENCH_TEST_INHERITED"));
  unsetenv("MLBENCH_TEST_INHERITED");
  EXPECT_EQ(r.output, "yes\n");
}

TEST(Process, WorkingDirectoryAndCapturedStderr) {
  testing_support::TempDir dir("process_cwd");
  ProcessSpec spec = shell("pwd; echo oops >&2; exit 4");
  spec.working_dir = dir.path().string();
  const CommandResult r = run_captured(spec);
  EXPECT_EQ(r.status.code, 4);
  EXPECT_EQ(r.output, std::filesystem::canonical(dir.path()).string() + "\noops\n");
}

TEST(Process, LogFileStartsWithItsHeader) {
  testing_support::TempDir dir("process_log");
  ProcessSpec spec = shell("echo out; echo err >&2");
  spec.output = Output::File;
  spec.log_path = (dir.path() / "x.log").string();
  spec.log_header = "# header\n";
  Process p(spec);
  EXPECT_EQ(p.wait().code, 0);
  std::ifstream in(spec.log_path);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "# header\nout\nerr\n");
}

TEST(Process, CpuAffinityIsApplied) {
  ProcessSpec spec;
  spec.executable = "/bin/cat";
  spec.args = {"/proc/self/status"};
  spec.cpus = {0};
  const CommandResult r = run_captured(spec);
  EXPECT_NE(r.output.find("Cpus_allowed_list:\t0\n"), std::string::npos) << r.output;
}

TEST(Process, RunCapturedStopsAtItsTimeout) {
  const CommandResult r = run_captured(shell("exec sleep 600"), 0.05);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.status.signal, SIGTERM);
}

TEST(Process, StartFailuresThrowOneLine) {
  ProcessSpec missing;
  missing.executable = "/no/such/program";
  EXPECT_THROW(Process p(missing), ProcessError);
  ProcessSpec setup = shell("exit 0");
  setup.child_setup = [] { return EACCES; };
  setup.child_setup_what = "cannot join the cgroup";
  try {
    Process p(setup);
    FAIL() << "child_setup's error must fail the start";
  } catch (const ProcessError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot join the cgroup"), std::string::npos) << e.what();
  }
  ProcessSpec log = shell("exit 0");
  log.output = Output::File;
  log.log_path = "/no/such/dir/x.log";
  EXPECT_THROW(Process p(log), ProcessError);
}

TEST(Environment, ParseKeepsFirstValueAndSkipsMalformed) {
  const char* entries[] = {"A=1", "B=x=y", "A=2", "NOEQUALS", "EMPTY=", nullptr};
  const Environment env = parse_environment(entries);
  EXPECT_EQ(env, (Environment{{"A", "1"}, {"B", "x=y"}, {"EMPTY", ""}}));
  EXPECT_TRUE(parse_environment(nullptr).empty());
}

TEST(Environment, CurrentAndGetenvOr) {
  ASSERT_EQ(setenv("MLBENCH_TEST_ENV", "v", 1), 0);
  EXPECT_EQ(current_environment().at("MLBENCH_TEST_ENV"), "v");
  EXPECT_EQ(getenv_or("MLBENCH_TEST_ENV", "f"), "v");
  ASSERT_EQ(setenv("MLBENCH_TEST_ENV", "", 1), 0);
  EXPECT_EQ(getenv_or("MLBENCH_TEST_ENV", "f"), "f");
  unsetenv("MLBENCH_TEST_ENV");
  EXPECT_EQ(getenv_or("MLBENCH_TEST_ENV", "f"), "f");
}

}  // namespace
}  // namespace mlbench::core
