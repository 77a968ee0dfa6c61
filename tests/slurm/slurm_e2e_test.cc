// The Slurm launcher end to end: the real mlbench-run with --launcher slurm inside an
// allocation (salloc) of the private two-node test cluster (slurm_cluster.sh, started by
// the ctest fixture `slurm_cluster`, or by this program when run alone). Checks the run
// directory a Slurm run leaves (the same as a local run's), and that timeouts, a step
// over its memory, scancel and Ctrl-C each end in a FAIL record naming the Slurm state,
// with no step left behind. They skip, saying why, only where the cluster cannot start.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/process.h"
#include "tests/runner/runner_test_fixture.h"
#include "tests/support/processes.h"
#include "tests/slurm/slurm_test_cluster.h"

namespace mlbench::testing_support {
namespace {

namespace fs = std::filesystem;

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new SlurmEnvironment("slurm_cluster"));

// Steps of mlbench-run (named mlbench-<pid>-<n>) Slurm still knows, as "<id> <name>" lines.
std::string mlbench_steps() {
  const CommandResult r = run_command("squeue --noheader --steps --format='%i %j' | grep ' mlbench-' || true");
  return r.output;
}

class SlurmE2E : public RunnerTest {
 protected:
  SlurmE2E() : RunnerTest("slurm") {}
  void SetUp() override {
    if (!cluster().skip.empty()) GTEST_SKIP() << "no private Slurm cluster: " << cluster().skip;
    RunnerTest::SetUp();
  }
  void TearDown() override {
    RunnerTest::TearDown();
    if (!cluster().skip.empty()) return;
    // Nothing of this test may be left running in the cluster.
    for (int i = 0; i < 300 && !mlbench_steps().empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(mlbench_steps(), "") << "steps left behind";
  }
  // mlbench-run --launcher slurm in a two-node allocation: 2 CPUs and `mem` MiB per node.
  std::string in_allocation(const std::string& args, const std::string& mem = "1000") {
    return "salloc --quiet --nodes=2 --ntasks-per-node=1 --cpus-per-task=2 --mem=" + mem + " --time=5 " + MLBENCH_RUN +
           " --launcher slurm --outdir " + (dir_ / "out").string() + " " + args;
  }
  CommandResult slurm_runner(const std::string& args, const std::string& mem = "1000") {
    return run_command(in_allocation(args, mem));
  }
  std::string summary() {
    std::ifstream in(dir_ / "out" / "summary.txt");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // Starts mlbench-run in an allocation in the background (output to runner.log).
  core::Process start_in_allocation(const std::string& args) {
    core::ProcessSpec spec;
    spec.executable = "/bin/sh";
    spec.args = {"-c", "exec " + in_allocation(args)};
    spec.output = core::Output::File;
    spec.log_path = (dir_ / "runner.log").string();
    return core::Process(spec);
  }
  // Waits (up to 30 s, while `run` runs) until Slurm runs `n` steps of mlbench-run; their lines.
  std::vector<std::string> wait_for_steps(core::Process& run, std::size_t n) {
    std::vector<std::string> lines;
    for (int i = 0; i < 300 && alive(run.pid()); ++i) {
      lines.clear();
      std::istringstream in(mlbench_steps());
      for (std::string l; std::getline(in, l);) lines.push_back(l);
      if (lines.size() >= n) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return lines;
  }
  std::string runner_log() {
    std::ifstream in(dir_ / "runner.log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

// The instance reports, run layout and a second slot on the second node: what a local run leaves.
TEST_F(SlurmE2E, RunsStepsAndLeavesTheLocalRunLayout) {
  const std::string jobs_file =
      jobs(R"([{"name": "fake", "cmd": "FAKE", "args": {"--repeat": 2}, "cgroup": "student"}])");
  const CommandResult r = slurm_runner("--jobs " + jobs_file + " --slots 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto reps = reports("fake");
  ASSERT_EQ(reps.size(), 2u) << r.output;
  for (const auto& rep : reps) {
    EXPECT_TRUE(rep["completed"].get<bool>()) << rep.dump();
    EXPECT_EQ(rep["runner"]["slurm_state"], "COMPLETED");
    EXPECT_EQ(rep["isolation"], "slurm");
    EXPECT_EQ(rep["resources"]["source"], "slurm");
    EXPECT_EQ(rep["_file"].get<std::string>().find(".FAIL."), std::string::npos);
  }
  EXPECT_TRUE(fs::exists(dir_ / "out" / "fake.R0.D0.log"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "fake.R0.D1.log"));
  EXPECT_NE(summary().find("PASSED"), std::string::npos) << summary();
  const nlohmann::json machine = nlohmann::json::parse(std::ifstream(dir_ / "out" / "machine.json"));
  EXPECT_EQ(machine.dump().find("\"slurm\"") != std::string::npos, true) << machine.dump();
}

// A crash is `signal 11`, as locally (srun's own exit code 139 is not the benchmark's).
TEST_F(SlurmE2E, CrashIsASignalAsLocally) {
  const std::string jobs_file =
      jobs(R"([{"name": "crash", "cmd": "FAKE", "args": {"--crash": ""}, "cgroup": "student"}])");
  const CommandResult r = slurm_runner("--jobs " + jobs_file + " --slots 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto reps = reports("crash");
  ASSERT_EQ(reps.size(), 2u) << r.output;
  for (const auto& rep : reps) {
    EXPECT_EQ(rep["reason"], "signal 11") << rep.dump();
    EXPECT_EQ(rep["runner"]["signal"], 11);
    EXPECT_EQ(rep["runner"]["slurm_state"], "FAILED");
  }
}

// An `all` job is one step with a task on each node; rank 0's report is the record.
TEST_F(SlurmE2E, AllJobIsOneStepOverEveryNode) {
  const std::string jobs_file = jobs(R"([{"name": "whole", "cmd": "FAKE", "args": {}, "cgroup": "all"}])");
  const CommandResult r = slurm_runner("--jobs " + jobs_file);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto reps = reports("whole");
  ASSERT_EQ(reps.size(), 1u);
  EXPECT_TRUE(reps[0]["completed"].get<bool>()) << reps[0].dump();
  int others = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "out" / "rank1")) others += e.path().extension() == ".json";
  EXPECT_EQ(others, 1) << "the second node's task did not run";
}

TEST_F(SlurmE2E, TimeoutIsAFailRecordWithTheStateAndTheStepEnds) {
  const std::string jobs_file =
      jobs(R"([{"name": "hang", "cmd": "FAKE", "args": {"--ignore-term": ""}, "cgroup": "student"}])");
  const CommandResult r = slurm_runner("--jobs " + jobs_file + " --slots 2 --timeout 2 --kill-grace 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto reps = reports("hang");
  ASSERT_EQ(reps.size(), 2u) << r.output;
  for (const auto& rep : reps) {
    EXPECT_FALSE(rep["completed"].get<bool>());
    EXPECT_EQ(rep["reason"], "TIMEOUT (timeout 2s)");
    EXPECT_EQ(rep["runner"]["slurm_state"], "CANCELLED");  // SIGTERM ignored: scancel ended it
  }
}

// Slot 0 goes over its --mem (OUT_OF_MEMORY) while slot 1 passes; --resume with more
// memory reruns only slot 0.
TEST_F(SlurmE2E, StepOverItsMemoryIsOutOfMemoryAndResumeRerunsIt) {
  const std::string jobs_file = jobs(
      R"([{"name": "mem", "cmd": "FAKE", "args": {"--alloc-mib": 200, "--alloc-only-slot": 0}, "cgroup": "student"}])");
  CommandResult r = slurm_runner("--jobs " + jobs_file + " --slots 2 --slot-memory 64M");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  auto reps = reports("mem");
  ASSERT_EQ(reps.size(), 2u) << r.output;
  EXPECT_EQ(reps[0]["reason"], "OUT_OF_MEMORY") << reps[0].dump();
  EXPECT_EQ(reps[0]["runner"]["slurm_state"], "OUT_OF_MEMORY");
  EXPECT_TRUE(reps[1]["completed"].get<bool>()) << reps[1].dump();
  const std::string kept = reps[1]["_file"];

  r = run_command("salloc --quiet --nodes=2 --ntasks-per-node=1 --cpus-per-task=2 --mem=1000 --time=5 " +
                  std::string(MLBENCH_RUN) + " --launcher slurm --resume " + (dir_ / "out").string() + " --jobs " +
                  jobs_file + " --slots 2 --slot-memory 400M");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  reps = reports("mem");
  ASSERT_EQ(reps.size(), 2u);
  EXPECT_TRUE(reps[0]["completed"].get<bool>()) << reps[0].dump();
  EXPECT_EQ(reps[1]["_file"], kept);  // not rerun
  EXPECT_TRUE(fs::exists(dir_ / "out" / "superseded"));
}

TEST_F(SlurmE2E, ScancelOfAStepIsAFailRecordCancelled) {
  // Slot 0 hangs until its step is cancelled; slot 1 passes.
  const std::string jobs_file =
      jobs(R"([{"name": "hang", "cmd": "FAKE", "args": {"--hang": "", "--hang-only-slot": 0}, "cgroup": "student"}])");
  core::Process run = start_in_allocation("--jobs " + jobs_file + " --slots 2");
  std::string id;
  for (int i = 0; i < 300 && id.empty() && alive(run.pid()); ++i) {
    std::istringstream in(mlbench_steps());
    for (std::string step, name; in >> step >> name;) {
      if (name.size() > 2 && name.compare(name.size() - 2, 2, "-0") == 0) id = step;  // the first started: slot 0
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(id.empty()) << runner_log();
  // A running benchmark (its banner in the log), not a step still being set up.
  for (int i = 0; i < 300 && alive(run.pid()); ++i) {
    std::ifstream in(dir_ / "out" / "hang.R0.D0.log");
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().find("framework") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  run_command("scancel " + id);
  const auto status = run.wait_for(60);
  ASSERT_TRUE(status) << "mlbench-run did not end after scancel: " << runner_log();
  EXPECT_EQ(status->shell_code(), 1) << runner_log();
  const auto reps = reports("hang");
  ASSERT_EQ(reps.size(), 2u) << runner_log();
  EXPECT_EQ(reps[0]["reason"], "CANCELLED") << reps[0].dump();
  EXPECT_EQ(reps[0]["runner"]["slurm_state"], "CANCELLED");
  EXPECT_TRUE(reps[1]["completed"].get<bool>()) << reps[1].dump();
}

// A node of the allocation going down (here: marked down by the admin) ends the step on
// it with NODE_FAIL; the step on the other node runs on until Ctrl-C.
TEST_F(SlurmE2E, NodeFailureIsAFailRecordNodeFail) {
  const std::string jobs_file =
      jobs(R"([{"name": "hang", "cmd": "FAKE", "args": {"--hang": ""}, "cgroup": "student"}])");
  core::ProcessSpec spec;
  spec.executable = "/bin/sh";
  // --no-kill: the allocation outlives the node (else Slurm ends the whole job, runner included).
  spec.args = {"-c",
               "exec salloc --quiet --no-kill --nodes=2 --ntasks-per-node=1 --cpus-per-task=2 --mem=1000 "
               "--time=5 " +
                   std::string(MLBENCH_RUN) + " --launcher slurm --outdir " + (dir_ / "out").string() + " --jobs " +
                   jobs_file + " --slots 2 --kill-grace 5"};
  spec.output = core::Output::File;
  spec.log_path = (dir_ / "runner.log").string();
  core::Process run(spec);
  ASSERT_EQ(wait_for_steps(run, 2).size(), 2u) << runner_log();
  std::string node;  // the second node (DIR/nodes)
  std::ifstream nodes(cluster().dir / "nodes");
  std::getline(nodes, node);
  std::getline(nodes, node);
  ASSERT_FALSE(node.empty());
  run_command("scontrol update nodename=" + node + " state=down reason=mlbench-test");
  // srun says so in the instance's log when it gives the step up; then Ctrl-C ends the other.
  bool said = false;
  for (int i = 0; i < 600 && !said && alive(run.pid()); ++i) {
    for (const char* log : {"hang.R0.D0.log", "hang.R0.D1.log"}) {
      std::ifstream in(dir_ / "out" / log);
      std::stringstream text;
      text << in.rdbuf();
      said = said || text.str().find("Node failure on " + node) != std::string::npos;
    }
    if (!said) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::set<int> kids = children_of(run.pid());  // salloc's child: mlbench-run
  if (kids.size() == 1) ::kill(*kids.begin(), SIGINT);
  const auto status = run.wait_for(60);
  // The node back for the next tests, whatever happened.
  run_command("scontrol update nodename=" + node + " state=resume");
  for (int i = 0; i < 150 && run_command("sinfo -h -N -t idle -o %N | sort -u | wc -l").output != "2\n"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(said) << "srun never reported the node failure: " << runner_log();
  ASSERT_TRUE(status) << runner_log();
  EXPECT_EQ(status->shell_code(), 130) << runner_log();
  const auto reps = reports("hang");
  ASSERT_EQ(reps.size(), 2u) << runner_log();
  std::multiset<std::string> reasons;
  for (const auto& rep : reps) reasons.insert(rep["reason"].get<std::string>());
  EXPECT_EQ(reasons, (std::multiset<std::string>{"NODE_FAIL", "CANCELLED (interrupted)"})) << runner_log();
}

// Ctrl-C of mlbench-run: steps that ignore SIGINT are cancelled after the grace.
TEST_F(SlurmE2E, CtrlCCancelsTheSteps) {
  const std::string jobs_file =
      jobs(R"([{"name": "stuck", "cmd": "FAKE", "args": {"--ignore-term": ""}, "cgroup": "student"}])");
  core::Process run = start_in_allocation("--jobs " + jobs_file + " --slots 2 --kill-grace 1");
  // Two steps at once: each slot has 2 CPUs of a 2-CPU node, so they run on both nodes.
  ASSERT_EQ(wait_for_steps(run, 2).size(), 2u) << runner_log();
  const std::set<int> kids = children_of(run.pid());  // salloc's child: mlbench-run
  ASSERT_EQ(kids.size(), 1u);
  ::kill(*kids.begin(), SIGINT);
  const auto status = run.wait_for(60);
  ASSERT_TRUE(status) << "mlbench-run did not end after Ctrl-C: " << runner_log();
  EXPECT_EQ(status->shell_code(), 130) << runner_log();
  EXPECT_EQ(mlbench_steps(), "");
  const auto reps = reports("stuck");
  ASSERT_EQ(reps.size(), 2u) << runner_log();
  for (const auto& rep : reps) EXPECT_EQ(rep["reason"], "CANCELLED (interrupted)") << rep.dump();
}

// --sbatch writes the batch script and submits it; the job leaves the same run directory.
TEST_F(SlurmE2E, SbatchSubmitsTheWholeJobsFile) {
  const std::string jobs_file = jobs(R"([{"name": "fake", "cmd": "FAKE", "args": {}, "cgroup": "student"}])");
  const CommandResult r = run_command(std::string(MLBENCH_RUN) +
                                      " --sbatch --sbatch-args '--nodes=1 --exclusive "
                                      "--mem=500 --wait' --jobs " +
                                      jobs_file + " --slots 1 --outdir " + (dir_ / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("submitted batch job"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "out" / "mlbench.sbatch"));
  const auto reps = reports("fake");
  ASSERT_EQ(reps.size(), 1u) << r.output;
  EXPECT_TRUE(reps[0]["completed"].get<bool>()) << reps[0].dump();
  EXPECT_EQ(reps[0]["runner"]["slurm_state"], "COMPLETED");
}

// A subset of configs/fast.json with real benchmarks (when they are built), read back by mlbench-report.
TEST_F(SlurmE2E, FastSubsetPassesAndMlbenchReportReadsIt) {
  std::string bench = MLBENCH_BENCH_DIR;
  if (const char* b = std::getenv("MLBENCH_BENCH_DIR"); b && *b) bench = b;
  if (access((bench + "/toy_reg").c_str(), X_OK) != 0) {
    GTEST_SKIP() << "toy_reg not built in " << bench << " (a build without LibTorch; set MLBENCH_BENCH_DIR)";
  }
  const CommandResult r = slurm_runner(std::string("--jobs ") + MLBENCH_SOURCE_DIR +
                                           "/configs/fast.json --name toy_reg"
                                           " --slots 2 --bench-dir " +
                                           bench,
                                       "2000");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto reps = reports("toy_reg");
  ASSERT_EQ(reps.size(), 2u);
  for (const auto& rep : reps) EXPECT_TRUE(rep["completed"].get<bool>()) << rep.dump();
  const CommandResult report = run_command(std::string(MLBENCH_REPORT) + " --reports " + (dir_ / "out").string());
  EXPECT_EQ(report.exit_code, 0) << report.output;
  EXPECT_NE(report.output.find("toy_reg"), std::string::npos) << report.output;
}

TEST_F(SlurmE2E, OutsideAnAllocationIsOneErrorLine) {
  const CommandResult r = run_command("env -u SLURM_JOB_ID " + std::string(MLBENCH_RUN) + " --launcher slurm --jobs " +
                                      jobs(R"([{"name": "f", "cmd": "FAKE"}])"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("not inside a Slurm allocation"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace mlbench::testing_support
