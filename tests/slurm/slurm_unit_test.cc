// The Slurm launcher's pure parts: the allocation from its variables, srun's
// arguments for a slot and for an `all` job, the step's state from srun's and
// slurmstepd's lines, the FAIL reasons under Slurm, and the --sbatch script.
#include <signal.h>

#include <gtest/gtest.h>

#include "core/process.h"
#include "runner/outcome.h"
#include "runner/slurm_batch.h"
#include "runner/slurm_launcher.h"
#include "tests/support/temp_dir.h"

namespace mlbench::runner {
namespace {

TEST(SlurmAllocationTest, CpusPerNodeExpandRepeats) {
  EXPECT_EQ(parse_cpus_per_node("2(x3),4"), (std::vector<int>{2, 2, 2, 4}));
  EXPECT_EQ(parse_cpus_per_node("8"), (std::vector<int>{8}));
  for (const char* bad : {"", "x", "2(x)", "2(x2", "0", "2(x0)", "4,", "3a"}) {
    EXPECT_THROW(parse_cpus_per_node(bad), std::invalid_argument) << bad;
  }
}

TEST(SlurmAllocationTest, FromTheVariablesOrWhyNot) {
  std::string why;
  EXPECT_FALSE(slurm_allocation({}, &why));
  EXPECT_NE(why.find("SLURM_JOB_ID is unset"), std::string::npos);
  EXPECT_FALSE(slurm_allocation({{"SLURM_JOB_ID", "7"}}, &why));
  EXPECT_NE(why.find("SLURM_JOB_CPUS_PER_NODE"), std::string::npos);
  const auto a = slurm_allocation(
      {{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_CPUS_PER_NODE", "4(x2)"}, {"SLURM_MEM_PER_NODE", "1000"}}, &why);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->job_id, "7");
  EXPECT_EQ(a->nodes(), 2);
  EXPECT_EQ(a->total_cpus(), 8);
  EXPECT_EQ(a->memory_per_node, 1000ull << 20);
  EXPECT_THROW(
      slurm_allocation({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_CPUS_PER_NODE", "4"}, {"SLURM_MEM_PER_NODE", "lots"}}, &why),
      std::invalid_argument);
}

SlurmAllocation two_nodes() {
  return {"7", {4, 2}, std::nullopt};
}

TEST(SrunArgsTest, SlotIsOneTaskOnOneNodeWithItsCpusMemoryAndTime) {
  LaunchRequest r;
  r.executable = "/b/bench";
  r.argv = {"--seed", "100"};
  r.cpus = {0, 1};
  r.memory_bytes = 512ull << 20;
  r.timeout = 100;
  const auto args = srun_args(r, two_nodes(), "mlbench-1-0", 10);
  EXPECT_EQ(args, (std::vector<std::string>{"--job-name=mlbench-1-0", "--kill-on-bad-exit=1", "--nodes=1", "--ntasks=1",
                                            "--cpus-per-task=2", "--mem=512M", "--time=3", "--", "/b/bench", "--seed",
                                            "100"}));
  r.memory_bytes.reset();
  r.env["CUDA_VISIBLE_DEVICES"] = "1";
  const auto gpu = srun_args(r, two_nodes(), "n", 10);
  EXPECT_EQ(std::count(gpu.begin(), gpu.end(), "--gres=gpu:1"), 1);
  EXPECT_EQ(std::count_if(gpu.begin(), gpu.end(), [](const std::string& a) { return a.rfind("--mem", 0) == 0; }), 0);
}

TEST(SrunArgsTest, AllJobIsATaskPerNodeAndRanksAboveZeroReportAside) {
  LaunchRequest r;
  r.executable = "/b/bench";
  r.whole_allocation = true;
  const auto args = srun_args(r, two_nodes(), "n", 10);
  for (const char* want : {"--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--cpus-per-task=2", "--mem=0"}) {
    EXPECT_EQ(std::count(args.begin(), args.end(), want), 1) << want;
  }
  const auto sh = std::find(args.begin(), args.end(), "/bin/sh");
  ASSERT_NE(sh, args.end());
  EXPECT_NE(sh[2].find("rank$SLURM_PROCID"), std::string::npos);
  EXPECT_EQ(args.back(), "/b/bench");
  // One node: the benchmark itself, as locally.
  const auto one = srun_args(r, {"7", {4}, std::nullopt}, "n", 10);
  EXPECT_EQ(std::find(one.begin(), one.end(), "/bin/sh"), one.end());
}

TEST(StepStateTest, FromSlurmsOwnLinesOnly) {
  EXPECT_EQ(step_state("loss 1\n", true, 0), "COMPLETED");
  EXPECT_EQ(step_state("loss 1\n", true, 3), "FAILED");
  EXPECT_EQ(step_state("srun: error: n1: task 0: Out Of Memory\n", true, 1), "OUT_OF_MEMORY");
  EXPECT_EQ(step_state("slurmstepd-n1: error: Detected 1 oom-kill event(s) in StepId=1.1.\n", true, 0),
            "OUT_OF_MEMORY");
  EXPECT_EQ(
      step_state("slurmstepd-n1: error: *** STEP 2.2 ON n1 CANCELLED AT 2026-11-23T19:34:48 DUE TO TIME LIMIT ***\n",
                 true, 143),
      "TIMEOUT");
  EXPECT_EQ(step_state("slurmstepd-n1: error: *** STEP 2.1 ON n1 CANCELLED AT 2026-11-23T19:33:30 ***\n", true, 0),
            "CANCELLED");
  EXPECT_EQ(step_state("srun: Job step aborted: Waiting up to 4 seconds for job step to finish.\n"
                       "srun: error: n1: task 0: Killed\n",
                       true, 137),
            "CANCELLED");  // scancel as the step started: slurmstepd's line never came
  EXPECT_EQ(step_state("srun: error: Node failure on n2\n", false, SIGKILL), "NODE_FAIL");
  EXPECT_EQ(step_state("slurmstepd: error: *** JOB 4 ON n1 CANCELLED AT 2026 DUE TO PREEMPTION ***\n", true, 1),
            "PREEMPTED");
  // The benchmark printing the same words is not Slurm saying them.
  EXPECT_EQ(step_state("my model: Out Of Memory DUE TO TIME LIMIT\n", true, 0), "COMPLETED");
  EXPECT_EQ(step_creation_error("srun: error: Unable to create step for job 5: Memory required by task is not "
                                "available\n"),
            "srun: error: Unable to create step for job 5: Memory required by task is not available");
  EXPECT_EQ(step_creation_error("srun: error: n1: task 0: Out Of Memory\n"), "");
}

TEST(StepStateTest, TaskKilledByASignalIsThatSignalNotSrunsExitCode) {
  EXPECT_EQ(task_signal("srun: error: n1: task 0: Segmentation fault\n", 139), SIGSEGV);
  EXPECT_EQ(task_signal("srun: error: mlb1n2: task 0: Killed\n", 137), SIGKILL);
  // A benchmark's own exit 139, or srun naming another signal, is not a signal.
  EXPECT_EQ(task_signal("loss 1\n", 139), 0);
  EXPECT_EQ(task_signal("srun: error: n1: task 0: Killed\n", 139), 0);
  EXPECT_EQ(task_signal("srun: error: n1: task 0: Exited with exit code 3\n", 3), 0);
}

TEST(SlurmOutcomeTest, ReasonNamesTheStepsState) {
  EndFacts f;
  f.exited = true;
  f.state = "COMPLETED";
  f.has_report = true;
  f.report_completed = true;
  EXPECT_TRUE(decide_outcome(f).passed);
  EndFacts oom = f;
  oom.state = "OUT_OF_MEMORY";
  oom.exit_code = 1;
  EXPECT_EQ(decide_outcome(oom).reason, "OUT_OF_MEMORY");
  EndFacts cancelled = f;
  cancelled.state = "CANCELLED";
  EXPECT_EQ(decide_outcome(cancelled).reason, "CANCELLED");  // even with a report: Slurm ended it
  EndFacts node = f;
  node.state = "NODE_FAIL";
  EXPECT_EQ(decide_outcome(node).reason, "NODE_FAIL");
  EndFacts timed = cancelled;
  timed.timed_out = true;
  timed.timeout = 2;
  EXPECT_EQ(decide_outcome(timed).reason, "TIMEOUT (timeout 2s)");
  EndFacts ctrl_c = cancelled;
  ctrl_c.interrupted = true;
  EXPECT_EQ(decide_outcome(ctrl_c).reason, "CANCELLED (interrupted)");
  // Slurm's own cause wins over the runner's Ctrl-C or timeout that came after it.
  EndFacts node_then_ctrl_c = node;
  node_then_ctrl_c.interrupted = true;
  EXPECT_EQ(decide_outcome(node_then_ctrl_c).reason, "NODE_FAIL");
  EndFacts oom_then_timeout = oom;
  oom_then_timeout.timed_out = true;
  EXPECT_EQ(decide_outcome(oom_then_timeout).reason, "OUT_OF_MEMORY");
  EndFacts failed = f;
  failed.state = "FAILED";
  failed.exit_code = 3;
  EXPECT_EQ(decide_outcome(failed).reason, "exit 3");
  // The local launcher's reasons are unchanged.
  EndFacts local = ctrl_c;
  local.state.clear();
  EXPECT_EQ(decide_outcome(local).reason, "interrupted");
}

// Inside an allocation of 4 one-CPU tasks, mlbench-run without --slots refused: "a slot of 2
// CPUs does not fit on one node". The slots now default to the allocation's tasks.
TEST(SlurmAllocationTest, SlotsDefaultToTheAllocationsTasks) {
  std::string why;
  auto a = slurm_allocation({{"SLURM_JOB_ID", "7"},
                             {"SLURM_JOB_CPUS_PER_NODE", "1(x4)"},
                             {"SLURM_NTASKS", "4"},
                             {"SLURM_CPUS_PER_TASK", "1"}},
                            &why);
  ASSERT_TRUE(a) << why;
  EXPECT_EQ(a->ntasks, 4);
  EXPECT_EQ(a->cpus_per_task, 1);
  EXPECT_EQ(slurm_default_slots(*a, 2), 4);
  a->ntasks = 0;  // no task count: the CPUs per task divide the allocation
  a->cpus_per_node = {4, 4};
  a->cpus_per_task = 2;
  EXPECT_EQ(slurm_default_slots(*a, 1), 4);
  a->cpus_per_task = 0;  // neither: the runner's own default
  EXPECT_EQ(slurm_default_slots(*a, 3), 3);
  EXPECT_THROW(slurm_allocation({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_CPUS_PER_NODE", "4"}, {"SLURM_NTASKS", "x"}}, &why),
               std::invalid_argument);
}

TEST(SlurmBatchTest, ScriptRerunsTheArgumentsWithTheSlurmLauncher) {
  Options o;
  o.self = "/opt/mlbench/bin/mlbench-run";
  o.args = {"--jobs", "fast", "--sbatch", "--sbatch-args", "-N2 -p gpu", "--outdir", "rel", "--name", "it's"};
  const std::string s = batch_script(o, "/c/fast.json", "fast", "/abs/out", "/home/u");
  EXPECT_EQ(s.rfind("#!/bin/bash\n", 0), 0u);
  EXPECT_EQ(batch_identity_options("fast", "/abs/out"),
            (std::vector<std::string>{"--job-name=mlbench-fast", "--output=/abs/out/slurm-%j.out"}));
  EXPECT_NE(s.find("cd '/home/u' || exit 2\n"), std::string::npos) << s;
  EXPECT_NE(s.find("exec '/opt/mlbench/bin/mlbench-run' '--jobs' 'fast' '--name' 'it'\\''s' --launcher slurm --outdir "
                   "'/abs/out'\n"),
            std::string::npos)
      << s;
  o.sbatch_args = "-N2  -p gpu";
  EXPECT_EQ(sbatch_options(o), (std::vector<std::string>{"-N2", "-p", "gpu"}));
  EXPECT_EQ(sbatch_options(Options{}), (std::vector<std::string>{"--nodes=1", "--exclusive"}));
}

// A --store URL with a password is in no file: the script reads it from the job's environment
// (sbatch hands the submitter's to the job). It was written into mlbench.sbatch as given.
TEST(SlurmBatchTest, AStorePasswordIsNotWrittenIntoTheScript) {
  Options o;
  o.self = "/opt/mlbench/bin/mlbench-run";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--jobs", "fast", "--store", "postgresql://u:hunter2@db/r", "--sbatch"},
        std::vector<std::string>{"--jobs", "fast", "--store=postgresql://u@db/r?password=hunter2", "--sbatch"}}) {
    o.args = args;
    o.store = args[2] == "--store" ? args[3] : args[2].substr(8);
    const std::string s = batch_script(o, "/c/fast.json", "fast", "/abs/out", "/home/u");
    EXPECT_EQ(s.find("hunter2"), std::string::npos) << s;
    EXPECT_NE(s.find("exec '/opt/mlbench/bin/mlbench-run' '--jobs' 'fast' '--store' \"$MLBENCH_STORE\" --launcher "
                     "slurm"),
              std::string::npos)
        << s;
  }
  // A store without a credential stays on the command line as given.
  o.args = {"--jobs", "fast", "--store", "/shared/results.db"};
  o.store = "/shared/results.db";
  EXPECT_NE(batch_script(o, "/c/fast.json", "fast", "/abs/out", "/home/u").find("'--store' '/shared/results.db'"),
            std::string::npos);
}

// A newline in a value once ended a comment or an #SBATCH line of the script and made the
// rest a command the batch job ran; a blank in the outdir made sbatch fail ("Invalid directive").
TEST(SlurmBatchTest, NoValueOfTheUserRunsAsACommandOfTheBatchScript) {
  auto tmp = testing_support::temp_dir_for_current_test("sbatch-inject");
  Options o;
  o.self = "/bin/true";  // the script's exec: harmless here
  o.args = {"--jobs", "x\ntouch pwned-1", "--name", "a\ntouch pwned-2"};
  const std::string s =
      batch_script(o, "/c/x\ntouch pwned-3.json", "s\ntouch pwned-4", tmp->path() / "my out", tmp->path());
  EXPECT_EQ(s.find("#SBATCH"), std::string::npos) << s;
  core::ProcessSpec bash;
  bash.executable = "/bin/bash";
  bash.args = {"-c", s};
  bash.working_dir = tmp->path().string();
  bash.output = core::Output::Capture;
  const auto r = core::run_captured(bash);
  EXPECT_TRUE(r.status.exited && r.status.code == 0) << r.output;
  for (int k = 1; k <= 4; ++k) {
    EXPECT_FALSE(std::filesystem::exists(tmp->path() / ("pwned-" + std::to_string(k))))
        << "value " << k << " ran as a command:\n"
        << s;
  }
  EXPECT_EQ(batch_identity_options("s", "/abs/my out"),
            (std::vector<std::string>{"--job-name=mlbench-s", "--output=/abs/my out/slurm-%j.out"}));
}

}  // namespace
}  // namespace mlbench::runner
